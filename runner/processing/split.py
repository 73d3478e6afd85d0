"""Train / validation / test assignment that does not depend on partitioning.

Each row's split comes from a counter-based hash of (seed, global row number), or with
method=group of (seed, its group's value), so every processor (pandas, Arrow, Dask, Modin)
assigns every row the same split however the table is partitioned, and a group's rows share
one split (and one k_fold part). With method=time, from its time against cut points taken by
rank over the whole time column before any partition is split (time_cuts): the earliest rows
train, the next validate, the latest test.
"""

import math

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.processing.features.date import date_seconds
from runner.processing.row_hash import uniform_from_ids

SPLIT_NAMES = ("train", "validation", "test")
# A k_fold run's fourth split (code 3): its held-out part, scored once training is done and
# never seen before (its validation split is a cut of its own training rows).
HOLDOUT = "holdout"
# A forward-chaining fold's rows later than its held-out part and earlier than the test rows:
# in none of its splits.
UNUSED = 4


def split_names(split: dict) -> tuple[str, ...]:
    """The splits a cache entry of this dataset.split holds, in code order."""
    return (*SPLIT_NAMES, HOLDOUT) if split.get("folds") else SPLIT_NAMES


_COLUMN_VALUES = {
    "train": 0,
    "training": 0,
    "0": 0,
    "validation": 1,
    "val": 1,
    "valid": 1,
    "1": 1,
    "test": 2,
    "2": 2,
}


def split_settings(node) -> dict:
    """dataset.split as the plain dict the split and the cache key take; without k_fold's
    keys when they are unset, so a run without folds keeps its cache entry."""
    from omegaconf import OmegaConf

    split = dict(OmegaConf.to_container(node, resolve=True))  # type: ignore[arg-type]
    return split if split.get("folds") else without_folds(split)


def without_folds(split: dict) -> dict:
    """The split before any k_fold cut (its train, validation and test rows)."""
    return {key: value for key, value in split.items() if key not in ("folds", "fold")}


# The dataset.split key that names the raw column each method reads (random reads none).
SPLIT_COLUMN_KEYS = {"column": "column", "group": "group_column", "time": "time_column"}


def split_column(split: dict) -> str | None:
    """The raw column the split reads: method=column's, method=group's group column or
    method=time's time column."""
    key = SPLIT_COLUMN_KEYS.get(split["method"])
    return split.get(key) if key else None


def group_keys(values: pd.Series) -> np.ndarray:
    """A stable 64-bit key per row from its group's value: equal values, equal keys, whatever
    the processor or the partition (a whole float as its integer, every missing value one
    group), so the hash of (seed, key) places a group as the row hash places a row."""
    codes, uniques = pd.factorize(values)  # each distinct value canonicalized once
    text = np.array([*(_canonical(v) for v in uniques), ""], dtype=object)  # -1: missing
    return pd.util.hash_array(text, categorize=False)[codes]


def _canonical(value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def time_seconds(frame: pd.DataFrame, row_ids: np.ndarray, split: dict) -> np.ndarray:
    """Each row's time as seconds (a date's since 1970, a number as it is; NaN: missing)."""
    column = split["time_column"]
    seconds, bad, text = date_seconds(frame[column])
    if bad is not None:
        raise UserError(
            f"time column '{column}' has value {text!r} that is no date or number at data row "
            f"{int(row_ids[bad]) + 1}; fix the value or name another dataset.split.time_column"
        )
    return seconds


def time_cuts(seconds: np.ndarray, split: dict) -> dict[str, float]:
    """The last time of each split, by rank over every row's time (ties stay with the earlier
    split, so every test row is later than every training row). A k_fold run chains forward:
    the training and validation rows in folds + 1 blocks by time; fold f trains on blocks 0..f
    (their latest share by the validation ratio validates), holds out block f + 1, and leaves
    later blocks out."""
    ordered = np.sort(seconds[~np.isnan(seconds)])
    if not len(ordered):
        raise UserError(
            f"time column '{split['time_column']}' has no values; name another "
            "dataset.split.time_column"
        )
    train, validation, _ = split["ratios"]

    def last(rows: float) -> float:
        return float(ordered[min(max(math.ceil(rows), 1), len(ordered)) - 1])

    kept = (train + validation) * len(ordered)
    folds = int(split.get("folds") or 0)
    if not folds:
        return {"train": last(train * len(ordered)), "validation": last(kept)}
    fold = int(split["fold"])
    trained = kept * (fold + 1) / (folds + 1)
    return {
        "train": last(trained * train / (train + validation)),
        "validation": last(trained),
        "holdout": last(kept * (fold + 2) / (folds + 1)),
        "kept": last(kept),
    }


def _time_codes(frame: pd.DataFrame, row_ids: np.ndarray, split: dict) -> np.ndarray:
    """Split codes by time; without time_cuts (inference's sample), the cuts of these rows."""
    seconds = time_seconds(frame, row_ids, split)
    cuts = split.get("time_cuts") or time_cuts(seconds, split)
    bounds = [cuts["train"], cuts["validation"]]
    codes = [0, 1]
    if "holdout" in cuts:
        bounds += [cuts["holdout"], cuts["kept"]]
        codes += [3, UNUSED]
    # The first bound at or above each time; a row without a time trains.
    index = np.searchsorted(np.asarray(bounds), np.nan_to_num(seconds, nan=-np.inf), "left")
    return np.asarray([*codes, 2], dtype=np.int8)[index]


def validate_split(split: dict) -> None:
    method = split["method"]
    if method == "group" and not split.get("group_column"):
        raise UserError(
            "dataset.split.method=group needs dataset.split.group_column=<the column whose "
            "value names a row's group>"
        )
    if method == "time" and not split.get("time_column"):
        raise UserError(
            "dataset.split.method=time needs dataset.split.time_column=<the column of each "
            "row's date or time>"
        )
    if method in ("random", "group", "time"):
        ratios = list(split["ratios"])
        if len(ratios) != 3 or any(r < 0 for r in ratios) or abs(sum(ratios) - 1.0) > 1e-6:
            raise UserError(
                f"dataset.split.ratios={ratios} must be three non-negative numbers "
                "(train, validation, test) that sum to 1, e.g. [0.7,0.15,0.15]"
            )
        if ratios[0] == 0:
            raise UserError(
                "dataset.split.ratios gives the training split no rows; make its first ratio > 0"
            )
    elif method == "column":
        if not split.get("column"):
            raise UserError(
                "dataset.split.method=column needs dataset.split.column=<name of the split column>"
            )
    else:
        raise UserError(
            f"unknown dataset.split.method '{method}'; use 'random', 'group', 'time' or 'column'"
        )


def assign_splits(frame: pd.DataFrame, row_ids: np.ndarray, split: dict) -> np.ndarray:
    """Split code per row: 0 train, 1 validation, 2 test; 3 a k_fold run's held-out part;
    UNUSED a forward-chaining fold's later rows."""
    if split["method"] == "time":
        return _time_codes(frame, row_ids, split)
    if split["method"] in ("random", "group"):
        train, validation, _ = split["ratios"]
        keys = row_ids if split["method"] == "random" else group_keys(frame[split["group_column"]])
        u = uniform_from_ids(keys, int(split["seed"]))
        folds = int(split.get("folds") or 0)
        if folds:  # k_fold: the same held-out test rows; the rest cut into `folds` parts
            kept = train + validation
            position = u / kept * folds
            part = np.minimum(position.astype(np.int64), folds - 1)
            # The fold's validation split (early stopping, ensemble weights, the decision
            # threshold): the validation ratio's share of each other part, so the held-out
            # part shapes nothing it is scored on.
            inner = (position - part) < validation / kept
            codes = np.where(part == int(split["fold"]), 3, np.where(inner, 1, 0))
            return np.where(u < kept, codes, 2).astype(np.int8)
        return np.where(u < train, 0, np.where(u < train + validation, 1, 2)).astype(np.int8)
    column = split["column"]
    values = frame[column].astype(str).str.strip().str.lower()
    codes = values.map(_COLUMN_VALUES)
    if codes.isna().any():
        bad = values[codes.isna()].iloc[0]
        raise UserError(
            f"split column '{column}' has value '{bad}'; use train/validation/test (or 0/1/2)"
        )
    return codes.to_numpy(dtype=np.int8)
