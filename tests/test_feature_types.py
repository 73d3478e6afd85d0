"""A feature type is one module: tests/percent_type.py, defined in the tests alone, is named
by its module (`type: percent_type`) and trains, predicts and serves like a built-in type."""

import json
import os

import numpy as np
import pandas as pd
import pytest
import requests
from helpers import (
    ROOT,
    error_lines,
    run_cli,
    run_experiment,
    stop_serve,
    wait_until_serving,
)

from bench.probe import start_serve  # conftest puts the checkout on the path
from runner import Predictor
from runner.errors import UserError
from runner.processing.features.registry import build_feature

TESTS = str(ROOT / "tests")
PLUGIN_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))}
FEATURES = (
    "model.input_features=[{name:discount,type:percent_type},{name:noise,type:number}]",
    "model.output_features=[{name:bought,type:binary}]",
)


def percent_table(rows: int, seed: int = 0) -> pd.DataFrame:
    """`discount` written three ways ('45%', '45 %', '0.45') with a few missing; the target
    follows it."""
    rng = np.random.default_rng(seed)
    share = rng.random(rows)
    form = rng.integers(0, 3, rows)
    written = np.where(
        form == 0,
        [f"{100 * s:.1f}%" for s in share],
        np.where(form == 1, [f"{100 * s:.1f} %" for s in share], [f"{s:.3f}" for s in share]),
    ).astype(object)
    written[rng.random(rows) < 0.03] = None
    bought = (share + rng.normal(scale=0.1, size=rows)) > 0.5
    return pd.DataFrame({"discount": written, "noise": rng.normal(size=rows), "bought": bought})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("percent")
    percent_table(1500).to_csv(root / "sales.csv", index=False)
    run_dir = root / "run"
    metrics = run_experiment(
        run_dir,
        root / "cache",
        f"dataset.path={root / 'sales.csv'}",
        *FEATURES,
        "trainer.epochs=6",
    )
    return root, run_dir, metrics


def test_a_type_of_the_tests_own_trains_and_predicts_as_a_built_in_one(trained):
    root, run_dir, metrics = trained
    meta = json.loads((run_dir / "model" / "meta.json").read_text())
    assert meta["features"]["discount"]["type"] == "percent_type"
    # The type read '45%', '45 %' and '0.45' alike: the target, which follows the share, is
    # learned from it (noise alone gives 0.5).
    assert metrics["test"]["bought/roc_auc"] > 0.9
    # Its importance is the model's: shuffling the percentages costs the most.
    report = json.loads((run_dir / "metrics.json").read_text())
    assert report["importance"]["features"][0]["input"] == "discount"  # ranked, largest first
    # Raw rows through the Python Predictor (this process imports the module from tests/).
    frame = pd.read_csv(root / "sales.csv")
    written = run_dir / "predictions.parquet"
    scored = pd.read_parquet(written if written.exists() else run_dir / "predictions")
    got = Predictor.load(run_dir / "model").predict(frame.iloc[scored["row"].to_numpy()])
    np.testing.assert_allclose(
        got["bought_probability"].to_numpy(), scored["bought_probability"].to_numpy(), atol=1e-5
    )


def test_a_type_that_is_not_a_module_or_not_a_feature_type_is_one_error_line(tmp_path):
    percent_table(100).to_csv(tmp_path / "sales.csv", index=False)
    result = run_cli(
        f"dataset.path={tmp_path / 'sales.csv'}",
        "model.input_features=[{name:discount,type:percent_typo}]",
        FEATURES[1],
        f"hydra.run.dir={tmp_path / 'run'}",
        env=PLUGIN_ENV,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = error_lines(result)
    assert (
        len(lines) == 1 and "has unknown type 'percent_typo'; known input types: binary" in lines[0]
    )
    with pytest.raises(UserError, match=r"the module 'json' defines no feature type \(FEATURE"):
        build_feature({"name": "discount", "type": "json"}, "input")


@pytest.mark.distributed
@pytest.mark.slow
def test_a_type_of_the_tests_own_is_served_over_http(trained, tmp_path):
    """command=serve on its own Ray: the replica imports the type's module as every process
    does, and answers what the Predictor answers."""
    root, run_dir, _ = trained
    process, url = start_serve(
        run_dir / "model",
        tmp_path / "serve",
        "backend.ray.num_cpus=2",
        env={**os.environ, "RAY_ADDRESS": "", **PLUGIN_ENV},
    )
    try:
        wait_until_serving(process, f"{url}/health")
        frame = pd.read_csv(root / "sales.csv").head(20)
        rows = json.loads(frame.to_json(orient="records"))
        answer = requests.post(f"{url}/predict", json=rows, timeout=60)
        assert answer.status_code == 200, answer.text
        want = Predictor.load(run_dir / "model").predict(frame)
        np.testing.assert_allclose(
            pd.DataFrame(answer.json())["bought_probability"],
            want["bought_probability"],
            atol=1e-5,
        )
        bad = requests.post(f"{url}/predict", json=[{"discount": "lots", "noise": 0.1}], timeout=30)
        assert bad.status_code == 422 and "'lots'" in bad.json()["error"]
    finally:
        output = stop_serve(process)
    assert process.returncode == 0, output[-3000:]
