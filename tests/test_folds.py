"""k_fold=N (runner/folds.py): the folds cut the training and validation rows and keep the
test rows held out; each fold's preprocessing and its validation split (early stopping, the
ensemble's weights) see only its own training rows; metrics.json's means and standard errors
are the folds' held-out metrics."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import compose_config, run_experiment

from runner.config import check_config
from runner.errors import UserError
from runner.folds import summarize
from runner.processing.split import assign_splits

SPLIT = {"method": "random", "ratios": [0.7, 0.15, 0.15], "seed": 42}
SPLITS = ("train", "validation", "holdout")


def test_the_folds_cut_the_training_rows_and_keep_the_test_rows():
    ids = np.arange(20_000, dtype=np.int64)
    plain = assign_splits(pd.DataFrame(index=ids), ids, SPLIT)
    held_out = []
    for fold in range(5):
        codes = assign_splits(pd.DataFrame(index=ids), ids, {**SPLIT, "folds": 5, "fold": fold})
        assert ((codes == 2) == (plain == 2)).all()  # the same test rows in every fold
        held_out.append(codes == 3)
        # the fold's validation split: the validation ratio's share of its training rows
        training = (codes == 0) | (codes == 1)
        assert (codes[codes == 1] != 3).all()
        assert (codes == 1).sum() / training.sum() == pytest.approx(0.15 / 0.85, abs=0.01)
    counts = np.sum(held_out, axis=0)
    assert (counts[plain != 2] == 1).all() and (counts[plain == 2] == 0).all()  # a partition
    sizes = [int(h.sum()) for h in held_out]
    assert max(sizes) - min(sizes) < 0.05 * np.mean(sizes)


def test_the_summary_is_the_folds_mean_and_standard_error():
    got = summarize([{"a": 1.0, "b": 2.0}, {"a": 2.0}, {"a": 6.0, "b": 4.0}])
    assert got["a"]["folds"] == [1.0, 2.0, 6.0] and got["a"]["mean"] == 3.0
    assert got["a"]["se"] == pytest.approx(math.sqrt(7.0) / math.sqrt(3.0))  # sd 7**0.5
    # corrected for shared training rows (Nadeau and Bengio): sd * sqrt(1/k + 1/(k - 1))
    assert got["a"]["se_corrected"] == pytest.approx(math.sqrt(7.0) * math.sqrt(1 / 3 + 1 / 2))
    assert got["b"] == {
        "mean": 3.0,
        "se": pytest.approx(1.0),
        "se_corrected": pytest.approx(math.sqrt(3.0)),
        "folds": [2.0, 4.0],
    }


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["k_fold=1"], "k_fold=1 is out of range: it must be at least 2"),
        (["k_fold=3", "command=train"], "k_fold=3 cross-validates command=experiment"),
        (
            ["k_fold=3", "dataset.split.method=column", "dataset.split.column=part"],
            "dataset.split.method=column fixes each row's split",
        ),
    ],
)
def test_k_fold_refuses_what_it_cannot_cross_validate(overrides, message):
    with pytest.raises(UserError, match=message):
        check_config(compose_config(overrides))


@pytest.mark.slow
def test_k_fold_trains_each_fold_on_its_own_rows_and_reports_their_mean(tmp_path):
    """Three folds of a table whose column `planted` is 1e6 on fold 0's held-out rows only:
    fold 0's preprocessing never saw them (its mean of `planted` stays small) and neither did
    its validation split, which early stopping and the ensemble's weights read (the held-out
    part was that split before the inner cut); the others trained on them. metrics.json's
    means and SEs are the folds' held-out metrics."""
    import pyarrow.parquet as pq

    rows = 1200
    rng = np.random.default_rng(0)
    ids = np.arange(rows, dtype=np.int64)
    frame = pd.DataFrame({"x": rng.normal(size=rows), "planted": rng.normal(size=rows)})
    frame["y"] = (frame["x"] + rng.normal(scale=0.5, size=rows) > 0).astype(int)
    fold0 = assign_splits(frame, ids, {**SPLIT, "folds": 3, "fold": 0}) == 3
    frame.loc[fold0, "planted"] = 1e6
    frame.to_csv(tmp_path / "t.csv", index=False)
    metrics = run_experiment(
        tmp_path / "run",
        tmp_path / "cache",
        "k_fold=3",
        f"dataset.path={tmp_path / 't.csv'}",
        "dataset.target=y",
        "trainer.epochs=2",
        "backend=local",
        "report.importance_rows=0",
    )
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    folds = [tmp_path / "run" / "folds" / f"fold-{i}" for i in range(3)]
    assert written["folds"] == [str(f) for f in folds]
    means = []
    for fold in folds:
        meta = json.loads((fold / "model" / "meta.json").read_text())
        means.append(meta["features"]["planted"]["stats"]["mean"])
    assert abs(means[0]) < 1.0 and means[1] > 1e5 and means[2] > 1e5
    fold_metrics = json.loads((folds[0] / "metrics.json").read_text())
    entry = Path(fold_metrics["training"]["cache_entry"])
    rows_of = {s: set(pq.read_table(entry / s).column("__row__").to_pylist()) for s in SPLITS}
    assert rows_of["holdout"] == set(ids[fold0])  # held out, and only scored
    assert rows_of["validation"] and not rows_of["validation"] & set(ids[fold0])
    assert not rows_of["train"] & set(ids[fold0])
    per_fold = [json.loads((f / "metrics.json").read_text())["holdout"] for f in folds]
    auc = written["cross_validation"]["y/roc_auc"]
    assert auc["folds"] == [m["y/roc_auc"] for m in per_fold]
    assert auc["mean"] == pytest.approx(np.mean(auc["folds"]))
    assert auc["se"] == pytest.approx(np.std(auc["folds"], ddof=1) / math.sqrt(3))
    assert metrics["validation"]["y/roc_auc"] == auc["mean"] > 0.7
    tests = [json.loads((f / "metrics.json").read_text())["test"]["y/roc_auc"] for f in folds]
    assert written["cross_validation_test"]["y/roc_auc"]["folds"] == tests


@pytest.mark.slow
def test_a_sweeps_objective_is_the_folds_mean(tmp_path):
    from helpers import run_cli

    result = run_cli(
        "--multirun",
        "k_fold=2",
        "trainer.learning_rate=0.01,0.001",
        "dataset.synthetic_rows=800",
        "trainer.epochs=1",
        "trainer.progress_bar=false",
        "hydra/launcher=basic",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"cache_dir={tmp_path / 'cache'}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    for trial in ("0", "1"):
        record = json.loads((tmp_path / "sweep" / trial / "trial.json").read_text())
        written = json.loads((tmp_path / "sweep" / trial / "metrics.json").read_text())
        assert record["objective"] == "val/loss" and record["status"] == "completed"
        assert record["value"] == written["cross_validation"]["loss"]["mean"]


@pytest.mark.distributed
def test_on_ray_the_folds_run_side_by_side_as_tasks(tmp_path, ray_session, caplog):
    """backend=ray: each fold is a Ray task (its run in a Ray worker, attached to the same
    Ray), two at once on the two CPUs; the summary is the folds' as in one process."""
    import logging
    import os

    caplog.set_level(logging.INFO, logger="runner.folds")
    metrics = run_experiment(
        tmp_path / "run",
        tmp_path / "cache",
        "k_fold=2",
        "dataset.synthetic_rows=800",
        "trainer.epochs=1",
        "backend=ray",
        "report.importance_rows=0",
    )
    assert "k_fold: 2 folds on Ray, 2 at once" in caplog.text
    pids = []
    for fold in range(2):
        ran = tmp_path / "run" / "folds" / f"fold-{fold}"
        pids.append(json.loads((ran / "workers" / "rank-0.json").read_text())["pid"])
        held_out = json.loads((ran / "metrics.json").read_text())["holdout"]["label/roc_auc"]
        written = json.loads((tmp_path / "run" / "metrics.json").read_text())
        assert written["cross_validation"]["label/roc_auc"]["folds"][fold] == held_out
    assert os.getpid() not in pids and len(set(pids)) == 2
    assert metrics["validation"]["label/roc_auc"] == pytest.approx(
        written["cross_validation"]["label/roc_auc"]["mean"]
    )
