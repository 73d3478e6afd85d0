"""What every feature type shares: the `Feature` contract, reading values as numbers or
strings the same way by every processor, and the map-reduce helpers that merge partitions'
statistics.

Fitting is a map-reduce: `partial_stats` runs on one partition of training rows
and returns a small JSON-able summary, `combine` merges the summaries into the
final statistics. pandas calls them once; Dask, Modin and the Arrow processor call
`partial_stats` per partition. `transform` maps one partition with the final statistics and
is the only code that turns raw values into model inputs, whatever the processor.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from runner.errors import UserError
from runner.processing.row_hash import uniform_from_ids

# Bump when a transform's output changes: it is part of every cache key.
PREPROCESSING_VERSION = 6

UNKNOWN_TOKEN = "<UNK>"

# What pandas' to_numeric would read as a number (inf and nan included, any case).
_NUMBER_TEXT = r"(?i)[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|inf(?:inity)?|nan)"
# A number written with a decimal comma ('3,5', '-0,25e3'), as its two halves.
_DECIMAL_COMMA = r"^([-+]?\d*),(\d+(?:[eE][-+]?\d+)?)$"


def numbers_from_text(series: pd.Series, decimal: str = ".") -> pd.Series:
    """Like pd.to_numeric(series, errors="coerce") (float64; NaN where a value is no number),
    without its crash: pandas 2.3 ends the process (a segmentation fault) on some strings with
    a huge exponent, such as '3e42320041052' or the hex key '3973e42320041052-100'. Only values
    that look like numbers are converted, by pyarrow. decimal=',': '3,5' is 3.5."""
    text = series.astype(str).str.strip()
    if decimal == ",":
        text = text.str.replace(_DECIMAL_COMMA, r"\1.\2", regex=True)
    looks = (text.str.fullmatch(_NUMBER_TEXT) & series.notna()).to_numpy(dtype=bool)
    values = np.full(len(series), np.nan)
    if looks.any():
        parsed = pc.cast(pa.array(text[looks].tolist(), pa.string()), pa.float64())
        values[looks] = parsed.to_numpy(zero_copy_only=False)
    return pd.Series(values, index=series.index)


def as_strings(series: pd.Series) -> pd.Series:
    """Values as strings (missing stays missing), the same for every partition and
    processor: integer-valued floats print as integers, so 3.0 from one file and 3
    from another are one category."""
    # numpy, then one Series: pandas' map/where cost most of a one-row request (serving).
    if series.dtype == np.bool_:
        words = np.where(series.to_numpy(), "True", "False").astype(object)
        return pd.Series(words, index=series.index, dtype=object)
    if pd.api.types.is_bool_dtype(series):  # nullable booleans: pd.NA maps to missing
        return series.map({True: "True", False: "False"}).astype(object)
    if pd.api.types.is_float_dtype(series):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
        whole = np.isfinite(values) & (values == np.floor(values))
        out = np.where(
            whole, np.where(missing, 0, values).astype(np.int64).astype(str), values.astype(str)
        )
        # numpy's stubs reject None here; at run time it makes an object array.
        kept = np.where(missing, None, out)  # type: ignore[call-overload]
        return pd.Series(kept, index=series.index, dtype=object)
    if pd.api.types.is_integer_dtype(series):
        return series.astype(str).astype(object).where(series.notna(), None)
    if pd.api.types.is_string_dtype(series) and pd.api.types.infer_dtype(series, skipna=True) in (
        "string",
        "empty",
    ):
        values = series.to_numpy(dtype=object, copy=True)
        values[pd.isna(values)] = None
        return pd.Series(values, index=series.index, dtype=object)
    return series.map(
        lambda v: None if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)
    ).astype(object)


def scalar_strings(values: list) -> list[str | None]:
    """Each of a request's values (null, a boolean, a number or a string) as as_strings gives
    it in a column of its own kind: a row read on its own, not with the rows it came with."""
    out: list[str | None] = []
    for value in values:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            out.append(None)
        elif isinstance(value, bool):
            out.append("True" if value else "False")
        elif isinstance(value, float) and value.is_integer():
            out.append(str(int(value)))
        else:
            out.append(str(value))
    return out


class Feature:
    """One configured feature. Subclasses define the type's behaviour."""

    type_name: ClassVar[str]
    output_allowed: ClassVar[bool] = True
    # Its raw values are numbers: a processor may parse them while reading, a served row must
    # send numbers, and the file's decimal mark (dataset.decimal) applies.
    numeric: ClassVar[bool] = False
    # Preprocessing options and their defaults; anything else is a config error.
    defaults: ClassVar[dict[str, Any]] = {}
    # Options added after cache entries and saved models were written: left out of describe()
    # (the cache key) while at their default, so that those stay valid.
    later_options: ClassVar[dict[str, Any]] = {}
    missing_strategies: ClassVar[tuple[str, ...]] = ()
    _vocab_cache: tuple[list[str], pd.Index]  # vocab_index's, set on first use
    _positions_cache: tuple[list[str], dict[str, int]]  # vocab_positions's, set on first use

    def __init__(self, cfg: dict, role: str):
        self.name = cfg["name"]
        self.role = role
        self.embedding_size = cfg.get("embedding_size")
        given = dict(cfg.get("preprocessing") or {})
        known = {**self.defaults, **self.later_options}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise UserError(
                f"{role} feature '{self.name}' ({self.type_name}) has unknown preprocessing option "
                f"'{unknown[0]}'; known options: {', '.join(sorted(known)) or 'none'}"
            )
        self.options = {**known, **given}
        strategy = self.options.get("missing_value_strategy")
        if self.missing_strategies and strategy not in self.missing_strategies:
            raise UserError(
                f"{role} feature '{self.name}' has missing_value_strategy '{strategy}'; "
                f"use one of: {', '.join(self.missing_strategies)}"
            )

    @property
    def drops_missing(self) -> bool:
        # A row without a target teaches nothing; inputs drop only when asked to.
        return self.role == "output" or self.options.get("missing_value_strategy") == "drop_row"

    def describe(self) -> dict:
        """What identifies this feature's processed data (part of the cache key)."""
        return {
            "name": self.name,
            "type": self.type_name,
            "role": self.role,
            "preprocessing": {
                k: v
                for k, v in self.options.items()
                if k not in self.later_options or v != self.later_options[k]
            },
        }

    def check_values(self, series: pd.Series, stats: dict) -> None:
        """For a request's rows (serving): raise a UserError naming the first bad value's row
        and field, so one bad request fails alone, not the batch it would have joined."""

    def set_target(self, target: Feature) -> None:
        """The first output, for an input whose statistics read it too (a text's target
        score); the others ignore it."""

    def partial_stats(self, series: pd.Series, row_ids: np.ndarray) -> dict:
        raise NotImplementedError

    def partial_stats_of(self, frame: pd.DataFrame, row_ids: np.ndarray) -> dict:
        """partial_stats of this feature's column of one partition (a feature that reads the
        target too finds it in the same frame)."""
        return self.partial_stats(frame[self.name], row_ids)

    def combine(self, partials: list[dict]) -> dict:
        raise NotImplementedError

    def transform(
        self, series: pd.Series, stats: dict, row_ids: np.ndarray
    ) -> tuple[Any, np.ndarray]:
        """(processed values, mask of rows to keep)."""
        raise NotImplementedError

    # The kinds of value (besides null) transform_records reads; None: it reads none.
    record_kinds: ClassVar[tuple[type, ...] | None] = None

    def reads_records(self, values: list) -> bool:
        """transform_records takes these values (else the frame path reads the request)."""
        kinds = self.record_kinds
        return kinds is not None and all(v is None or isinstance(v, kinds) for v in values)

    def transform_records(self, values: list, stats: dict) -> tuple[Any, np.ndarray]:
        """transform of one input's values from a request's row objects, each read on its own,
        without pandas (a served row: most of its time went to building frames and series);
        only for values reads_records takes."""
        raise NotImplementedError

    def transform_split(
        self, series: pd.Series, stats: dict, row_ids: np.ndarray, training: np.ndarray | None
    ) -> tuple[Any, np.ndarray]:
        """transform, told which rows are the training split's (`training`; None: none are,
        new data): a feature fitted on the target scores those out of fold."""
        return self.transform(series, stats, row_ids)


def seen_count(partials: list[dict], problem: str) -> int:
    """Values seen in the training split; none is an error."""
    count = sum(p["count"] for p in partials)
    if count == 0:
        raise UserError(f"{problem} in the training split; check the column")
    return count


def merged_moments(
    partials: list[dict], total: str, squares: str, count: int
) -> tuple[float, float]:
    mean = sum(p[total] for p in partials) / count
    var = max(sum(p[squares] for p in partials) / count - mean * mean, 0.0)
    return mean, float(np.sqrt(var))


# A partition's value counts travel to the driver and are merged there, and with free text
# (word pairs above all) or an ID-like category, distinct values grow with the data: 10M rows
# of short texts hold tens of millions of word pairs. So a partition keeps at most this many
# times max_vocab_size of its most frequent values, and the merge prunes itself the same way.
# Below that the counts are exact (every table of the accuracy suite is far below it: the
# most, fine_foods' reviews, have 0.15M distinct tokens against a text's 1M).
PARTIAL_VOCABULARY_FACTOR = 20


def _counts_cap(max_vocab_size: int) -> int:
    return PARTIAL_VOCABULARY_FACTOR * int(max_vocab_size)


def bounded_counts(counts: Mapping[str, int], max_vocab_size: int) -> dict[str, int]:
    """Value counts cut to the PARTIAL_VOCABULARY_FACTOR * max_vocab_size most frequent (ties
    by first occurrence, so the same counts always give the same cut); all of them where there
    are no more than that. In numpy: a Python sort of 1.5M counts took 8 s, this 0.9 s."""
    cap = _counts_cap(max_vocab_size)
    if len(counts) <= cap:
        return dict(counts)
    values = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
    threshold = np.partition(values, len(values) - cap)[len(values) - cap]  # the cap-th largest
    above = np.flatnonzero(values > threshold)
    tied = np.flatnonzero(values == threshold)[: cap - len(above)]
    keys = list(counts)
    return {keys[i]: int(values[i]) for i in np.sort(np.concatenate([above, tied])).tolist()}


def merged_vocabulary(partials: list[dict], options: dict, with_counts: bool = False):
    """Merged value counts -> the values kept (at least min_count, at most max_vocab_size),
    most frequent first, ties by value: the same list whatever the partitioning while the
    partitions' distinct values stay within bounded_counts' cap (and, when asked, each
    value's training count beside it)."""
    counts: Counter = Counter()
    cap = _counts_cap(options["max_vocab_size"])
    for p in partials:
        counts.update(p["counts"])
        if len(counts) > 2 * cap:  # the merge holds at most 3 partitions' worth at once
            counts = Counter(bounded_counts(counts, options["max_vocab_size"]))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    kept = [(k, c) for k, c in ranked if c >= options["min_count"]][: options["max_vocab_size"]]
    values = [k for k, _ in kept]
    return (values, [int(c) for _, c in kept]) if with_counts else values


def vocab_index(owner: Feature, vocab: list[str]) -> pd.Index:
    """A hash index of a vocabulary (value -> position, -1 when unseen), built once per
    vocabulary object: a Predictor or server transforms many small frames with the same one."""
    cached = getattr(owner, "_vocab_cache", None)
    if cached is None or cached[0] is not vocab:
        cached = owner._vocab_cache = (vocab, pd.Index(vocab, dtype=object))
    return cached[1]


def vocab_positions(owner: Feature, vocab: list[str]) -> dict[str, int]:
    """A vocabulary as {value: position}, built once per vocabulary object (a request's few
    values are looked up one by one)."""
    cached = getattr(owner, "_positions_cache", None)
    if cached is None or cached[0] is not vocab:
        cached = owner._positions_cache = (vocab, {v: i for i, v in enumerate(vocab)})
    return cached[1]


# The training split's sample: the SAMPLE_SIZE rows whose row-number hash is smallest. Every
# feature that fits on a sample (number quantiles, text components) picks by this one rule
# (numbers among their non-missing rows), so no processor's partitioning changes the result.
SAMPLE_SIZE = 20000
SAMPLE_SEED = 1  # of the row hash that picks them


def bottom_k_sample(values: np.ndarray, row_ids: np.ndarray) -> list[list]:
    """The values of the SAMPLE_SIZE rows whose row-number hash is smallest, with those
    hashes: merged bottom-k samples are the bottom-k sample of the union, so what is fitted on
    them does not depend on how the rows were partitioned (processors cut them differently)."""
    hashes = uniform_from_ids(row_ids, SAMPLE_SEED)
    # A partition of the hashes instead of a full sort (62 -> 3 ms for 700k rows), with ties at
    # the cut kept as a full stable sort would keep them, so the sample is exactly the same.
    candidates = np.arange(len(hashes))
    if len(hashes) > SAMPLE_SIZE:
        kth = np.partition(hashes, SAMPLE_SIZE - 1)[SAMPLE_SIZE - 1]
        candidates = np.flatnonzero(hashes <= kth)
    order = candidates[np.argsort(hashes[candidates], kind="stable")][:SAMPLE_SIZE]
    return [hashes[order].tolist(), values[order].tolist()]


def merged_sample(partials: list[dict], dtype=np.float64) -> np.ndarray:
    """The bottom-k sample of the union of the partitions' samples, in hash order."""
    hashes = np.concatenate([np.asarray(p["sample"][0], dtype=np.float64) for p in partials])
    values = np.concatenate([np.asarray(p["sample"][1], dtype=dtype) for p in partials])
    return values[np.argsort(hashes, kind="stable")[:SAMPLE_SIZE]]
