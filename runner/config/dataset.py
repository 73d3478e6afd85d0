"""dataset: the table, its features and its split."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.config.checks import MISSING, _require
from runner.errors import UserError


@dataclass
class FeatureConfig:
    name: str = MISSING
    type: str = MISSING
    # Options that change the processed data (missing values, normalization,
    # vocabulary, tokenizer). Only these enter the cache key; processing/features/ checks them.
    preprocessing: dict[str, Any] = field(default_factory=dict)
    # Model-side options (embedding size of a category or text feature).
    embedding_size: int | None = None


@dataclass
class SplitConfig:
    # random (by row); group (by group_column's value: a group's rows share one split, and
    # one k_fold part); time (by time_column); column (each row's split named in `column`)
    method: str = "random"
    ratios: list[float] = field(default_factory=lambda: [0.7, 0.15, 0.15])
    seed: int = 42
    column: str | None = None  # with method=column: values train/validation/test or 0/1/2
    # with method=group: the column naming each row's group (a customer, a patient, a store),
    # left out of the inferred inputs
    group_column: str | None = None
    # with method=time: the column of each row's date or time (or a number that orders rows);
    # the earliest rows train, the next validate, the latest test (k_fold: forward-chaining)
    time_column: str | None = None
    # Set by k_fold=N for each of its runs (not typed by hand): the training and validation
    # rows cut into `folds` parts by the same hash; part `fold` validates, the rest train.
    folds: int = 0
    fold: int = 0


@dataclass
class DatasetConfig:
    # Local path or fsspec URL; null means the built-in synthetic dataset.
    path: str | None = None
    # csv | tsv | json | feather | orc | excel | parquet; from the file's name when null
    format: str | None = None
    # The column(s) to predict. With model.input_features null (model=auto), every other
    # column becomes an input of an inferred type (runner/processing/type_inference.py).
    target: Any = None
    exclude: list[str] = field(default_factory=list)  # columns inference leaves out
    # Leading rows of the training split that inference looks at.
    inference_rows: int = 10000
    # CSV field delimiter; null: sniffed from the first lines ("\t" for .tsv files).
    delimiter: str | None = None
    # A CSV's decimal mark, '.' or ','; null: sniffed from the first lines (',' only where
    # numbers are written as 3,5 and the delimiter is not a comma).
    decimal: str | None = None
    synthetic_rows: int = 10000
    synthetic_seed: int = 0
    # Passed to fsspec: key, secret, client_kwargs: {endpoint_url: ...}, ... (never logged).
    # Any, not a typed dict, so that `dataset.storage_options={...}` sets it whole.
    storage_options: Any = None
    split: SplitConfig = field(default_factory=SplitConfig)

    def __post_init__(self):
        _require(
            self.synthetic_rows >= 1, "dataset.synthetic_rows", "at least 1", self.synthetic_rows
        )
        _require(
            self.inference_rows >= 20, "dataset.inference_rows", "at least 20", self.inference_rows
        )
        if isinstance(self.target, str):
            self.target = [self.target]
        elif self.target is not None:
            self.target = [str(t) for t in self.target]
        self.exclude = [str(c) for c in self.exclude]
        if self.delimiter in ("\\t", "tab"):  # what a shell hands over for a tab
            self.delimiter = "\t"
        if self.decimal not in (None, ".", ","):
            raise UserError(
                f"dataset.decimal={self.decimal!r} is not a decimal mark; use '.' or ',' "
                "(or null to sniff it)"
            )
        if self.delimiter is not None and len(self.delimiter) != 1:
            raise UserError(
                f"dataset.delimiter={self.delimiter!r} must be one character, e.g. ';' or '\\t'"
            )

    @property
    def targets(self) -> list[str]:
        return list(self.target or [])
