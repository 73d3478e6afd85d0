"""dataset.split.method=group: a group's rows share one split and one k_fold part, placed by
a hash of the group's value (the same whatever the processor or the partition), and the
group column is left out of the inferred inputs. On a table whose groups carry the target,
the random split scores what the model's memory of the groups gives, the group split what a
new group gets."""

import json

import numpy as np
import pandas as pd
import pytest
from helpers import compose_config, run_experiment

from runner.config import check_config
from runner.errors import UserError
from runner.processing.split import assign_splits, group_keys, validate_split

GROUP = {"method": "group", "ratios": [0.7, 0.15, 0.15], "seed": 42, "group_column": "store"}


def stores(rows: int = 3000, groups: int = 150, seed: int = 0) -> pd.DataFrame:
    """y = the store's own level (large) + 0.5 x + noise; some stores' ids are missing."""
    rng = np.random.default_rng(seed)
    store = rng.integers(0, groups, rows)
    level = rng.normal(0, 2.0, groups)
    x = rng.normal(size=rows)
    y = level[store] + 0.5 * x + rng.normal(0, 0.3, rows)
    frame = pd.DataFrame({"store": store.astype(float), "x": x, "y": y})
    frame.loc[frame["store"] == 7, "store"] = np.nan  # a missing id: one group of its own
    return frame


def test_a_groups_rows_share_one_split_and_one_fold_part():
    frame = stores()
    ids = np.arange(len(frame), dtype=np.int64)
    codes = assign_splits(frame, ids, GROUP)
    by_group = pd.Series(codes).groupby(frame["store"].fillna(-1)).nunique()
    assert (by_group == 1).all()
    shares = np.bincount(codes, minlength=3) / len(codes)
    assert shares == pytest.approx([0.7, 0.15, 0.15], abs=0.08)  # by groups, not rows
    for fold in range(3):
        folded = assign_splits(frame, ids, {**GROUP, "folds": 3, "fold": fold})
        assert ((folded == 2) == (codes == 2)).all()  # the same test groups
        assert (pd.Series(folded).groupby(frame["store"].fillna(-1)).nunique() == 1).all()


def test_group_keys_are_the_same_for_the_same_value_in_any_dtype():
    """What lets every processor place a group alike: 3, 3.0 and "3" are one group, every
    missing value another."""
    as_float = group_keys(pd.Series([3.0, np.nan, 4.0]))
    as_int = group_keys(pd.Series([3, None, 4], dtype="Int64"))
    as_text = group_keys(pd.Series(["3", None, " 4"]))
    assert (as_float == as_int).all() and (as_int == as_text).all()
    assert len(set(group_keys(pd.Series(["a", "b", "c"])))) == 3


def test_a_group_split_needs_its_column_and_k_fold_takes_it():
    with pytest.raises(UserError, match="method=group needs dataset.split.group_column"):
        validate_split({**GROUP, "group_column": None})
    cfg = compose_config(["k_fold=3", "dataset.split.method=group", "dataset.split.group_column=g"])
    assert check_config(cfg).k_fold == 3


@pytest.mark.slow
def test_the_random_split_scores_the_groups_memory_and_the_group_split_new_groups(tmp_path):
    stores().to_csv(tmp_path / "t.csv", index=False)
    common = [f"dataset.path={tmp_path / 't.csv'}", "dataset.target=y", "model=gbm"]
    test = {}
    for method in ("random", "group"):
        run = tmp_path / method
        extra = ["dataset.split.method=group", "dataset.split.group_column=store"]
        run_experiment(run, tmp_path / "cache", *common, *(extra if method == "group" else []))
        saved = json.loads((run / "metrics.json").read_text())
        test[method] = saved["test"]["y/r2"]
        inputs = (run / "model" / "config.yaml").read_text()
        assert ("name: store" in inputs) == (method == "random")  # left out by the group split
    # random: the store is an input the test rows' stores were trained on (its level known);
    # group: the test stores are new, so only x's share is left (about 0.5**2 / 4.3 of y)
    assert test["random"] > 0.9
    assert test["group"] < 0.3


def test_inference_says_when_a_column_looks_like_a_group_id_the_split_ignores():
    from runner.processing.type_inference import group_hints, infer_types

    rng = np.random.default_rng(0)
    rows = 600
    sample = pd.DataFrame(
        {
            "store_id": rng.integers(0, 40, rows),  # repeats: a group id
            "order_id": np.arange(rows),  # one row each: an id, not a group
            "valid": rng.integers(0, 40, rows),  # repeats, but named like no id
            "y": rng.normal(size=rows),
        }
    )
    decisions = infer_types(sample, ["y"])
    hints = group_hints(sample, decisions, ["y"])
    assert len(hints) == 1 and hints[0].startswith("'store_id' looks like a group id")
    assert hints[0].endswith("dataset.split.method=group dataset.split.group_column=store_id")
