"""One column of the inference sample and the facts the types' inference rules read (each
computed once, on first use). Each feature type's module holds its rules; `inference` runs
them in order and the first that decides wins."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from runner.processing.features.base import numbers_from_text

# A target of integers with at most this many distinct values is a class label (a rating, a
# grade): classification; above it, regression. Integer inputs stay numbers (counts and scales
# keep their order; the piecewise-linear encoder still bins them).
MAX_INTEGER_CODES = 10
# Distinct values per row above which a column of single words is an ID (keys, UUIDs).
ID_SHARE = 0.95
# A column of numbers with a few words among them ('n/a', 'unknown', '?') is a number column
# whose words stand for missing values: up to this many distinct words, in up to this share.
MAX_MISSING_MARKERS = 3
MISSING_MARKER_SHARE = 0.1

_ID_WORD = re.compile(r"(^|[^a-z])(id|key|uuid|guid|index)([^a-z]|$)", re.IGNORECASE)  # row_id
_ID_CAMEL = re.compile(r"[a-z](Id|ID|Key|Uuid|UUID)$")  # customerId, CustomerID


@dataclass(frozen=True)
class Inferred:
    name: str
    type: str | None  # None: left out
    reason: str
    preprocessing: dict | None = None  # options the data called for (a number's missing_values)

    @property
    def kept(self) -> bool:
        return self.type is not None


@dataclass(frozen=True)
class Numbers:
    """A column's values read as numbers: typed, written as text, or written as text with a
    few words standing for missing values (`markers`)."""

    values: pd.Series
    distinct: int
    as_text: bool
    markers: tuple[str, ...] = ()

    @cached_property
    def integral(self) -> bool:
        return bool(np.all(np.mod(self.values.astype(np.float64).to_numpy(), 1) == 0))


class SampledColumn:
    """`column`: the sample's values (with its missing ones); `as_target`: it is an output;
    `decimal`: the file's decimal mark."""

    def __init__(self, column: pd.Series, as_target: bool = False, decimal: str = "."):
        self.name = str(column.name)
        self.rows = len(column)
        self.as_target = as_target
        self.decimal = decimal
        present = column.dropna()
        if present.dtype == object:
            present = present[present.map(lambda v: not (isinstance(v, str) and not v.strip()))]
        self.present = present

    def decided(self, kind: str | None, reason: str, preprocessing: dict | None = None):
        return Inferred(self.name, kind, reason, preprocessing)

    @cached_property
    def distinct(self) -> int:
        return distinct_count(self.present)

    @cached_property
    def text(self) -> pd.Series:
        return self.present.astype(str).str.strip()

    @cached_property
    def text_numbers(self) -> pd.Series:
        return numbers_from_text(self.text, self.decimal)

    @cached_property
    def numbers(self) -> Numbers | None:
        """Every value as a number, typed or written as text; None where some are not."""
        if pd.api.types.is_numeric_dtype(self.present):  # booleans have two values: decided
            return Numbers(self.present, self.distinct, as_text=False)
        if self.is_list or pd.api.types.is_datetime64_any_dtype(self.present):
            return None
        if self.text_numbers.notna().all():
            return Numbers(self.text_numbers, self.distinct, as_text=True)
        return None

    @cached_property
    def marked_numbers(self) -> Numbers | None:
        """Numbers with a few words among them that stand for a missing value ('n/a',
        'unknown', '?'): at most MAX_MISSING_MARKERS distinct ones, in at most
        MISSING_MARKER_SHARE of the values; None when the column is not such a column."""
        numbers = self.text_numbers
        words = self.text[numbers.isna()]
        if len(words) > MISSING_MARKER_SHARE * len(self.text) or numbers.nunique() < 3:
            return None
        markers = sorted(words.unique())
        if not markers or len(markers) > MAX_MISSING_MARKERS:
            return None
        present = numbers.dropna()
        return Numbers(present, distinct_count(present), as_text=True, markers=tuple(markers))

    @cached_property
    def is_list(self) -> bool:
        return bool(self.present.map(lambda v: isinstance(v, list | tuple | np.ndarray)).all())

    @cached_property
    def words(self) -> pd.Series:
        return self.text.str.split().str.len()

    @cached_property
    def distinct_share(self) -> float:
        return self.distinct / len(self.text)

    def id_reason(self, numbers: Numbers) -> str | None:
        """Why these numbers are an ID (left out), or None: a row counter, or distinct integers
        in a column named like an ID. A target is never an ID."""
        if not numbers.integral or self.as_target or self.rows < 20:
            return None
        floats = numbers.values.astype(np.float64).to_numpy()
        steps = np.diff(floats)
        # A row counter: increasing in file order and dense where the sample's rows are
        # neighbours (a split's rows skip some numbers; epoch seconds or amounts sorted by time
        # spread far wider).
        if np.all(steps > 0) and np.median(steps) <= 3:
            return "an ID: a running number"
        if numbers.distinct == self.rows and (
            _ID_WORD.search(self.name) or _ID_CAMEL.search(self.name)
        ):
            return "an ID: distinct integers in a column named like an ID"
        return None

    def integer_classes(self, numbers: Numbers) -> bool:
        """A target of a few distinct integers: class labels (a rating, a grade)."""
        return numbers.integral and self.as_target and numbers.distinct <= MAX_INTEGER_CODES


def distinct_count(values: pd.Series) -> int:
    try:
        return int(values.nunique())
    except TypeError:  # unhashable cells (lists from Parquet)
        return int(values.map(repr).nunique())
