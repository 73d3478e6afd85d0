"""Train / validation / test assignment that does not depend on partitioning.

Each row's split comes from a counter-based hash of (seed, global row number), or with
method=group of (seed, its group's value), so every processor (pandas, Arrow, Dask, Modin)
assigns every row the same split however the table is partitioned, and a group's rows share
one split (and one k_fold part).
"""

import math

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.processing.row_hash import uniform_from_ids

SPLIT_NAMES = ("train", "validation", "test")
# A k_fold run's fourth split (code 3): its held-out part, scored once training is done and
# never seen before (its validation split is a cut of its own training rows).
HOLDOUT = "holdout"


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


def split_column(split: dict) -> str | None:
    """The raw column the split reads: method=column's, or method=group's group column."""
    return {"column": split.get("column"), "group": split.get("group_column")}.get(split["method"])


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


def validate_split(split: dict) -> None:
    method = split["method"]
    if method == "group" and not split.get("group_column"):
        raise UserError(
            "dataset.split.method=group needs dataset.split.group_column=<the column whose "
            "value names a row's group>"
        )
    if method in ("random", "group"):
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
            f"unknown dataset.split.method '{method}'; use 'random', 'group' or 'column'"
        )


def assign_splits(frame: pd.DataFrame, row_ids: np.ndarray, split: dict) -> np.ndarray:
    """Split code per row: 0 train, 1 validation, 2 test; 3 a k_fold run's held-out part."""
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
