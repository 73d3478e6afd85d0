"""The names of the processed columns each feature writes, and the sizes of the tables its ids
index: what a cache's metadata says about its columns, readable without the feature code.

A training worker builds its model's layout from these alone, so it does not import pandas
and the feature classes (0.3-0.4 s of a fresh Ray actor's start, profiled); the features
import them from here so that the two can never disagree.
"""

from __future__ import annotations

ROW_ID = "__row__"  # the raw row number, kept beside the processed columns

# Ids of a vocabulary's tokens (texts) or members (sets) start here: 0 is padding, 1 unknown.
FIRST_TOKEN_ID = 2

# A date becomes these numbers: its place in time (z-scored seconds), its year (z-scored),
# and each calendar cycle as a point on a circle, so December sits next to January.
DATE_CYCLES = {
    "month": 12,
    "day": 31,
    "weekday": 7,
    "dayofyear": 366,
    "hour": 24,
    "minute": 60,
}


def date_columns(name: str) -> list[str]:
    """The processed columns of a date feature, in order (the model reads them as numbers)."""
    cycles = [f"{name}.{part}_{f}" for part in DATE_CYCLES for f in ("sin", "cos")]
    return [f"{name}.time", f"{name}.year", *cycles, f"{name}.missing"]


def missing_column(name: str) -> str:
    """The processed flag column of a number input that had missing values in training."""
    return f"{name}.missing"


def vector_columns(name: str, length: int) -> list[str]:
    return [f"{name}.{i}" for i in range(length)]


def component_columns(name: str, count: int) -> list[str]:
    return [f"{name}.component{i}" for i in range(count)]


def score_column(name: str) -> str:
    return f"{name}.score"


def components_of(stats: dict) -> int:
    """How many component columns a text feature's statistics give (0: none)."""
    fitted = stats.get("components")
    return len(fitted["mean"]) if fitted else 0


def text_table_size(stats: dict) -> int:
    """Rows of a text feature's embedding table: padding, unknown and the vocabulary (or the
    buckets)."""
    if "vocab" in stats:
        return len(stats["vocab"]) + FIRST_TOKEN_ID
    return int(stats["num_buckets"])
