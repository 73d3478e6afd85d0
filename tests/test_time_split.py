"""dataset.split.method=time: the earliest rows train, the next validate, the latest test, by
cut points taken over the whole time column (the same whatever the processor or the
partition: test_ray.py); k_fold chains forward. On a table whose target drifts, the random
split scores rows from every time, the time split what the model does on later rows."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers import compose_config, run_experiment

from runner.config import check_config
from runner.errors import UserError
from runner.processing.split import UNUSED, assign_splits, validate_split

TIME = {"method": "time", "ratios": [0.7, 0.15, 0.15], "seed": 42, "time_column": "when"}


def drifting(rows: int = 3000, seed: int = 0) -> pd.DataFrame:
    """Rows in random order over 1,000 days; y = x's effect, which turns around over time, +
    noise; a few times missing, some days repeated."""
    rng = np.random.default_rng(seed)
    day = rng.integers(0, 1000, rows)
    x = rng.normal(size=rows)
    y = x * (1 - day / 250) + rng.normal(0, 0.3, rows)  # slope 1 at day 0, -3 at day 1000
    when = pd.Timestamp("2021-01-01") + pd.to_timedelta(day, unit="D")
    frame = pd.DataFrame({"when": when.strftime("%Y-%m-%d"), "x": x, "y": y})
    frame.loc[::301, "when"] = None
    return frame


def days(frame: pd.DataFrame) -> np.ndarray:
    return pd.to_datetime(frame["when"]).to_numpy()


def test_test_rows_are_later_than_validation_rows_later_than_training_rows():
    frame = drifting()
    codes = assign_splits(frame, np.arange(len(frame), dtype=np.int64), TIME)
    when = pd.to_datetime(frame["when"])
    assert when[codes == 0].max() < when[codes == 1].min()
    assert when[codes == 1].max() < when[codes == 2].min()
    assert (codes[when.isna().to_numpy()] == 0).all()  # a row without a time trains
    shares = np.bincount(codes, minlength=3) / len(codes)
    assert shares == pytest.approx([0.7, 0.15, 0.15], abs=0.01)


def test_k_fold_chains_forward_over_the_training_rows():
    """Fold f trains on the earliest f + 1 blocks, holds out the next, leaves the later ones
    out; every fold keeps the same test rows."""
    frame = drifting().dropna()
    ids = np.arange(len(frame), dtype=np.int64)
    when = pd.to_datetime(frame["when"]).to_numpy()
    test = assign_splits(frame, ids, TIME) == 2
    held, trained_rows = [], []
    for fold in range(3):
        codes = assign_splits(frame, ids, {**TIME, "folds": 3, "fold": fold})
        assert ((codes == 2) == test).all()
        trained = when[(codes == 0) | (codes == 1)]
        assert when[codes == 0].max() < when[codes == 1].min()
        assert trained.max() < when[codes == 3].min()
        assert when[codes == 3].max() < when[codes == UNUSED].min(initial=np.datetime64("2100"))
        held.append(set(np.flatnonzero(codes == 3)))
        trained_rows.append(len(trained))
    assert not (held[0] & held[1]) and not (held[1] & held[2])
    assert trained_rows[2] == pytest.approx(3 * trained_rows[0], rel=0.05)


def test_a_time_split_needs_its_column_and_says_which_value_is_no_time():
    with pytest.raises(UserError, match="method=time needs dataset.split.time_column"):
        validate_split({**TIME, "time_column": None})
    cfg = compose_config(["k_fold=3", "dataset.split.method=time", "dataset.split.time_column=t"])
    assert check_config(cfg).k_fold == 3
    frame = drifting(20)
    frame.loc[4, "when"] = "soon"
    with pytest.raises(UserError, match="time column 'when' has value 'soon' .* at data row 5"):
        assign_splits(frame, np.arange(20, dtype=np.int64), TIME)


def test_inference_says_when_a_random_split_ignores_a_date_input():
    from runner.processing.type_inference import infer_types, time_hints

    frame = drifting(600)
    hints = time_hints(infer_types(frame, ["y"]), ["y"])
    assert len(hints) == 1 and hints[0].startswith("'when' holds dates")
    assert hints[0].endswith("dataset.split.method=time dataset.split.time_column=when")
    assert time_hints(infer_types(frame.drop(columns=["when"]), ["y"]), ["y"]) == []


@pytest.mark.slow
def test_the_time_split_scores_later_rows_and_keeps_the_time_an_input(tmp_path):
    """End to end with the trees: the cache's test rows are all later than its training
    rows; the random split's test rows come from every time, where the model has seen each
    time's slope, and score higher than the latest rows do."""
    frame = drifting()
    frame.to_csv(tmp_path / "t.csv", index=False)
    common = [f"dataset.path={tmp_path / 't.csv'}", "dataset.target=y", "model=gbm"]
    test, entries = {}, {}
    for method in ("random", "time"):
        run = tmp_path / method
        extra = ["dataset.split.method=time", "dataset.split.time_column=when"]
        run_experiment(run, tmp_path / "cache", *common, *(extra if method == "time" else []))
        metrics = json.loads((run / "metrics.json").read_text())
        test[method] = metrics["test"]["y/r2"]
        entries[method] = Path(metrics["training"]["cache_entry"])
        assert "name: when" in (run / "model" / "config.yaml").read_text()  # still an input
    when = days(frame)
    rows = {
        name: pq.read_table(entries["time"] / name).column("__row__").to_numpy()
        for name in ("train", "test")
    }
    assert np.nanmax(when[rows["train"]]) < np.min(when[rows["test"]])
    assert test["random"] > test["time"] + 0.1
