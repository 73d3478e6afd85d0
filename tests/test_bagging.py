"""preset=best (model.family=bagged, runner/training/bagged_fit.py): LightGBM, CatBoost and the
network each trained on k folds of the training and validation rows, weighted on their
out-of-fold predictions; the saved portfolio predicts from raw rows and serves; time_limit
cuts a slow member and the command ends within it."""

import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import requests
from helpers import run_cli, run_experiment, stop_serve, wait_until_serving
from sklearn.metrics import roc_auc_score

from bench.probe import start_serve  # conftest puts the checkout on the path
from runner import Predictor
from runner.processing.columns import ROW_ID

pytestmark = pytest.mark.slow

FOLDS = 3
QUICK = [
    "backend=local",
    f"model.bagging.folds={FOLDS}",
    "model.catboost.iterations=150",
    "trainer.epochs=6",
]


def table(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    size, weight = rng.normal(size=rows), rng.normal(size=rows)
    shape = rng.choice(["round", "square", "star"], size=rows)
    score = size + 0.5 * weight * (shape == "star") + rng.normal(scale=0.5, size=rows)
    return pd.DataFrame({"size": size, "weight": weight, "shape": shape, "good": score > 0})


@pytest.fixture(scope="module")
def bagged(tmp_path_factory):
    root = tmp_path_factory.mktemp("bagged")
    table(1500).to_csv(root / "train.csv", index=False)
    run_dir = root / "run"
    metrics = run_experiment(
        run_dir,
        root / "cache",
        "preset=best",
        f"dataset.path={root / 'train.csv'}",
        "dataset.target=good",
        *QUICK,
    )
    return {"root": root, "run": run_dir, "metrics": metrics}


def test_each_member_is_bagged_and_weighted_on_out_of_fold_predictions(bagged):
    saved = json.loads((bagged["run"] / "metrics.json").read_text())
    bagging = saved["training"]["bagging"]
    assert bagging["folds"] == FOLDS and bagging["skipped"] == {}
    assert set(bagging["members"]) == {"gbm", "catboost", "network"}
    for member in bagging["members"].values():
        assert member["folds"] == FOLDS and member["out_of_fold"]["good/roc_auc"] > 0.8
    weights = saved["training"]["ensemble_weights"]
    assert sum(weights.values()) == pytest.approx(1.0)
    # Greedy selection starts from the best member: the portfolio is at least as good out of fold.
    best = max(m["out_of_fold"]["good/roc_auc"] for m in bagging["members"].values())
    assert saved["validation"]["good/roc_auc"] >= best - 0.005
    assert saved["test"]["good/roc_auc"] > 0.85
    folds = sorted(p.name for p in (bagged["run"] / "model" / "members").iterdir())
    assert len(folds) == 3 * FOLDS and "network-3" in folds and "catboost-1" in folds


def test_a_fold_never_trains_on_the_rows_it_predicts(bagged):
    entry = bagged["run"] / "metrics.json"
    cache_entry = json.loads(entry.read_text())["training"]["cache_entry"]
    pool = [
        pq.read_table(f"{cache_entry}/{split}").column(ROW_ID).to_numpy()
        for split in ("train", "validation")
    ]
    pooled = np.sort(np.concatenate(pool))
    held_out = []
    for fold in range(1, FOLDS + 1):
        build = json.loads(Path(f"{cache_entry}/bagging/k{FOLDS}-s1.json").read_text())["build"]
        home = f"{cache_entry}/bagging/{build}/fold-{fold}"
        train = pq.read_table(f"{home}/train").column(ROW_ID).to_numpy()
        validation = pq.read_table(f"{home}/validation").column(ROW_ID).to_numpy()
        assert not set(train) & set(validation)
        assert np.array_equal(np.sort(np.concatenate([train, validation])), pooled)
        held_out.append(validation)
    # Every pooled row is held out exactly once.
    assert np.array_equal(np.sort(np.concatenate(held_out)), pooled)


def test_the_portfolio_predicts_raw_rows_as_it_scored_the_test_split(bagged):
    predictor = Predictor.load(bagged["run"] / "model")
    frame = pd.read_csv(bagged["root"] / "train.csv")
    written = pd.read_parquet(bagged["run"] / "predictions.parquet")
    again = predictor.predict(frame.iloc[written["row"].to_numpy()])
    np.testing.assert_allclose(
        again["good_probability"], written["good_probability"], rtol=1e-5, atol=1e-6
    )


def test_the_portfolio_explains_and_exports_each_fold_model(bagged):
    root, model_dir = bagged["root"], bagged["run"] / "model"
    table(40, seed=7).drop(columns="good").to_csv(root / "head.csv", index=False)
    run_experiment(
        root / "explain",
        root / "cache",
        "command=explain",
        f"model_dir={model_dir}",
        f"dataset.path={root / 'head.csv'}",
        "backend=local",
    )
    path = root / "explain" / "explanations.parquet"
    frame = pd.read_parquet(path if path.exists() else root / "explain" / "explanations")
    shares = frame.filter(like="attribution.")
    # Each fold model's attributions, weighted: they add up to the portfolio's output (within
    # the networks' integrated gradients' own completeness error).
    np.testing.assert_allclose(frame["base"] + shares.sum(axis=1), frame["output"], atol=1e-3)
    assert shares.abs().to_numpy().max() > 1e-3
    run_experiment(
        root / "export", root / "cache", "command=export", f"model_dir={model_dir}", "backend=local"
    )
    folder = root / "export" / "export"
    described = json.loads((folder / "ensemble.json").read_text())
    assert described["families"]["catboost-2"] == "catboost"
    assert sum(described["weights"].values()) == pytest.approx(1.0)
    assert (folder / "gbm-1" / "booster.txt").exists() and (
        folder / "catboost-3" / "model.cbm"
    ).exists()


@pytest.mark.distributed
def test_the_portfolio_serves(bagged, tmp_path):
    process, url = start_serve(
        bagged["run"] / "model",
        tmp_path / "serve",
        "backend.ray.num_cpus=2",
        env={**os.environ, "RAY_ADDRESS": ""},
    )
    try:
        wait_until_serving(process, f"{url}/health")
        rows = json.loads(table(5, seed=3).drop(columns="good").to_json(orient="records"))
        answer = requests.post(f"{url}/predict", json=rows, timeout=30)
        assert answer.status_code == 200, answer.text
        got = [r["good_probability"] for r in answer.json()]
        expected = Predictor.load(bagged["run"] / "model").predict(pd.DataFrame(rows))
        assert got == pytest.approx(expected["good_probability"].tolist(), abs=1e-5)
        bad = requests.post(f"{url}/predict", json=[{"size": "big"}], timeout=30)
        assert 400 <= bad.status_code < 500
    finally:
        stop_serve(process)


def test_out_of_fold_predictions_do_not_see_their_rows(tmp_path):
    """A planted leak: the target is noise and each row has a unique key that overfitted trees
    memorize. Scored on rows they trained on, the fold models find the noise (a leak would
    show it); out of fold they cannot."""
    rng = np.random.default_rng(5)
    rows = 1200
    frame = pd.DataFrame({"key": rng.random(rows), "y": rng.random(rows) < 0.5})
    frame.to_csv(tmp_path / "noise.csv", index=False)
    metrics = run_experiment(
        tmp_path / "run",
        tmp_path / "cache",
        "model.family=bagged",
        "model.bagging.members=[gbm]",
        f"dataset.path={tmp_path / 'noise.csv'}",
        "dataset.target=y",
        "backend=local",
        "model.gbm.min_data_in_leaf=1",
        "model.gbm.num_leaves=256",
        "model.gbm.learning_rate=0.3",
        "model.gbm.num_boost_round=200",
        "model.gbm.early_stopping_rounds=0",
        "model.gbm.lambda_l2=0",
        "report.importance_rows=0",
        "report.plots=false",
    )
    assert metrics["validation"]["y/roc_auc"] < 0.6  # out of fold: chance
    predictor = Predictor.load(tmp_path / "run" / "model")
    in_sample = predictor.predict(frame)
    entry = json.loads((tmp_path / "run" / "metrics.json").read_text())["training"]["cache_entry"]
    trained = np.concatenate(
        [
            pq.read_table(f"{entry}/{split}").column(ROW_ID).to_numpy()
            for split in ("train", "validation")
        ]
    )
    seen = in_sample.iloc[trained]
    assert roc_auc_score(frame["y"].iloc[trained], seen["y_probability"]) > 0.75


def test_time_limit_cuts_a_slow_member_and_the_command_ends_within_it(tmp_path):
    table(3000).to_csv(tmp_path / "train.csv", index=False)
    limit = 40
    started = time.perf_counter()
    result = run_cli(
        "preset=best",
        f"time_limit={limit}",
        "model.bagging.members=[gbm,network]",
        f"model.bagging.folds={FOLDS}",
        f"dataset.path={tmp_path / 'train.csv'}",
        "dataset.target=good",
        "backend=local",
        f"cache_dir={tmp_path / 'cache'}",
        # A member that would train for hours: patience off, a million epochs.
        "trainer.epochs=1000000",
        "trainer.early_stopping.patience=0",
        "trainer.progress_bar=false",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    wall = time.perf_counter() - started
    assert result.returncode == 0, result.stderr[-3000:]
    assert wall <= 1.1 * limit, f"{wall:.1f} s for time_limit={limit}"
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    network = saved["training"]["bagging"]["members"]["network"]
    assert network["folds_cut_at_time_limit"] == FOLDS
    assert saved["test"]["good/roc_auc"] > 0.85
    assert "time_limit reached" in (tmp_path / "run" / "run.log").read_text()
