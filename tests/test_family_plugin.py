"""A model family from outside runner/: tests/toy_linear.py, one module with a FAMILY, is
`model.family=toy_linear` for every command: experiment, predict, export and serve."""

import json
import os

import numpy as np
import pandas as pd
import pytest
import requests
from helpers import ROOT, error_lines, run_cli, stop_serve, wait_until_serving

from bench.probe import start_serve
from runner.scoring.predictor import Predictor

TESTS = str(ROOT / "tests")
ENV = {"PYTHONPATH": os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])}


def linear_table(rows: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=rows), rng.normal(size=rows)
    return pd.DataFrame({"x1": x1, "x2": x2, "y": 3.0 * x1 - 2.0 * x2 + rng.normal(0, 0.1, rows)})


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    work = tmp_path_factory.mktemp("plugin")
    table = work / "t.csv"
    linear_table().to_csv(table, index=False)
    result = run_cli(
        f"dataset.path={table}",
        "dataset.target=y",
        "model.family=toy_linear",
        f"cache_dir={work / 'cache'}",
        f"hydra.run.dir={work / 'run'}",
        env=ENV,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return {"work": work, "table": table, "run": work / "run"}


@pytest.mark.slow
def test_a_family_of_ones_own_trains_scores_and_predicts(trained):
    metrics = json.loads((trained["run"] / "metrics.json").read_text())
    assert metrics["test"]["y/r2"] > 0.99  # least squares on a linear table
    out = trained["work"] / "predict"
    result = run_cli(
        "command=predict",
        f"model_dir={trained['run'] / 'model'}",
        f"dataset.path={trained['table']}",
        f"hydra.run.dir={out}",
        env=ENV,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    predictions = pd.read_parquet(out / "predictions.parquet")
    truth = linear_table()
    assert np.corrcoef(predictions["y_prediction"], truth["y"])[0, 1] > 0.99
    exported = run_cli(
        "command=export",
        f"model_dir={trained['run'] / 'model'}",
        f"hydra.run.dir={trained['work'] / 'export'}",
        env=ENV,
    )
    assert exported.returncode == 0, exported.stderr[-3000:]
    described = list((trained["work"] / "export").rglob("export.json"))
    assert described and json.loads(described[0].read_text())["format"] == "torchscript"


def test_a_family_module_that_is_not_one_says_what_it_needs(tmp_path):
    table = tmp_path / "t.csv"
    linear_table(50).to_csv(table, index=False)
    result = run_cli(
        f"dataset.path={table}",
        "dataset.target=y",
        "model.family=helpers",  # a module, without a FAMILY
        f"hydra.run.dir={tmp_path / 'run'}",
        env=ENV,
    )
    assert result.returncode != 0
    assert error_lines(result) == [
        "error: model.family=helpers: the module needs FAMILY, a family named 'helpers' with "
        "fit, save and load (docs/configuration.md: a model family of your own)"
    ]
    result = run_cli(
        f"dataset.path={table}", "model.family=gmb", f"hydra.run.dir={tmp_path / 'r2'}"
    )
    assert "did you mean model.family=gbm?" in result.stderr


@pytest.mark.distributed
@pytest.mark.slow
def test_a_family_of_ones_own_serves(trained, tmp_path):
    process, url = start_serve(
        trained["run"] / "model",
        tmp_path / "serve",
        "backend.ray.num_cpus=2",
        env={**os.environ, **ENV, "RAY_ADDRESS": ""},
    )
    try:
        wait_until_serving(process, f"{url}/health")
        rows = [{"x1": 1.0, "x2": 0.0}, {"x1": 0.0, "x2": 1.0}]
        answer = requests.post(f"{url}/predict", json=rows, timeout=30)
        assert answer.status_code == 200, answer.text
        got = [r["y_prediction"] for r in answer.json()]
        # the Predictor's answers here (tests/ is on this process's path, as on the server's)
        expected = Predictor.load(trained["run"] / "model").predict(pd.DataFrame(rows))
        assert got == pytest.approx(expected["y_prediction"].tolist(), abs=1e-5)
        assert got[0] > 2.5 and got[1] < -1.5  # the table's 3 x1 - 2 x2
    finally:
        stop_serve(process)
