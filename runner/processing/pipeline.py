"""The one preprocessing path: read -> split -> fit on train -> transform -> cache.

Engines only read and map partitions; every decision is made here and in the feature
types (features/), so pandas, Dask, Modin and Arrow produce the same cache entry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.processing.cache import PreprocessingCache, cache_key
from runner.processing.crosscheck import combine_counts, partial_counts, sample_misses
from runner.processing.features.base import PREPROCESSING_VERSION
from runner.processing.features.feature_set import (
    FeatureSet,
    automatic_choices,
    combine_partials,
    fit_partial,
    transform_frame,
)
from runner.processing.features.model_side import model_side
from runner.processing.source import DataSource
from runner.processing.split import (
    assign_splits,
    split_column,
    split_names,
    time_cuts,
    time_seconds,
    validate_split,
)
from runner.storage import Location, local_write_errors, storage_errors

log = logging.getLogger(__name__)


@dataclass
class Preprocessed:
    entry: Location  # the directory holding the split directories
    meta: dict
    cache_hit: bool
    seconds: float

    def split_path(self, split: str) -> Location:
        return self.entry.join(split)


def check_columns(
    available: list[str], features: list, source: DataSource, extra: Sequence[str] = ()
) -> None:
    for feature in features:
        if feature.name not in available:
            needed = (
                " (the target: training and command=evaluate need it, command=predict does not)"
                if feature.role == "output"
                else ""
            )
            raise UserError(
                f"{feature.role} feature '{feature.name}' is not a column of {source.label}"
                f"{needed}; available columns: {', '.join(map(str, available))}"
            )
    for column in extra:
        if column not in available:
            raise UserError(
                f"split column '{column}' is not a column of {source.label}; "
                f"available columns: {', '.join(map(str, available))}"
            )


def preprocess(
    processor,
    source: DataSource,
    features: FeatureSet,
    split: dict,
    cache_dir: str,
    cache_options: dict | None = None,
    watched: dict[str, str] | None = None,
) -> Preprocessed:
    """The cache entry for this data and config, built only when missing. `watched`: columns
    inference left out from its sample ({column: why}), checked against the training split."""
    validate_split(split)
    started = time.perf_counter()
    cache = PreprocessingCache(cache_dir, cache_options)
    with (
        storage_errors(cache.root.url, "cache_credentials"),
        local_write_errors(cache.root.url, "cache_dir"),
    ):
        cache.check()
        return _preprocess(processor, source, features, split, cache, started, watched or {})


def _preprocess(
    processor, source, features, split, cache: PreprocessingCache, started: float, watched
) -> Preprocessed:
    key = cache_key(source.fingerprint(), features.describe(), split)
    meta = cache.lookup(key)
    if meta is None:
        with cache.lock(key):
            meta = cache.lookup(key)  # another run may have built it while we waited
            if meta is None:
                log.info(
                    "preprocessing %s with %s (cache miss, key %s)",
                    source.label,
                    processor.name,
                    key,
                )
                with cache.staging(key) as (data, publish):
                    meta = _build(processor, source, features, split, data, key, watched)
                    publish(meta)
                meta = cache.lookup(key)
                assert meta is not None  # published just above, under the lock
                seconds = time.perf_counter() - started
                log.info("preprocessed in %.2fs: %s", seconds, _rows_line(meta))
                _log_choices(meta)
                return Preprocessed(cache.splits(key, meta), meta, False, seconds)
    seconds = time.perf_counter() - started
    log.info(
        "preprocessing skipped: cache hit %s (%s; %.4fs)",
        cache.entry(key).url,
        _rows_line(meta),
        seconds,
    )
    _log_choices(meta)
    return Preprocessed(cache.splits(key, meta), meta, True, seconds)


def _log_choices(meta: dict) -> None:
    """Every choice made from the data, with its reason, in every run's log (cache hit or not),
    and the rows left out."""
    for line in automatic_choices(meta):
        log.info("%s", line)
    for line in sample_misses(meta.get("sample_check", {})):
        log.warning("%s", line)
    counts = meta.get("left_out", {})  # none in an entry written before it was recorded
    left_out = {name: counts[name] for name in split_names(meta["split"]) if counts.get(name)}
    if left_out:
        # A warning where validation or test lost rows: their metrics do not cover them.
        level = logging.INFO if set(left_out) == {"train"} else logging.WARNING
        log.log(level, "%s", left_out_line(meta, left_out))


def left_out_line(meta: dict, left_out: dict[str, int]) -> str:
    """Which rows preprocessing left out of which split, and the reasons it could have had."""
    counts = ", ".join(f"{name} {n}" for name, n in left_out.items())
    reasons = []
    for name in meta["output_features"]:
        head = model_side(meta["features"][name]["type"])
        if head.drops_missing_rows:
            reasons.append(f"a missing '{name}'")
        if head.drops_unseen_classes:
            reasons.append(f"a '{name}' class the training split does not have")
    for name in meta["input_features"]:
        if meta["features"][name]["preprocessing"].get("missing_value_strategy") == "drop_row":
            reasons.append(f"a missing '{name}' (missing_value_strategy: drop_row)")
    total = sum(left_out.values())
    return (
        f"left out {total} row{'s' if total != 1 else ''} ({counts}) for {' or '.join(reasons)}; "
        "metrics and predictions cover the rest"
    )


def _rows_line(meta: dict) -> str:
    return ", ".join(f"{name} {meta['rows'][name]} rows" for name in split_names(meta["split"]))


def _number_columns(features) -> set[str]:
    """Columns a processor may parse as numbers while reading (a speed hint; values are typed by the features)."""
    return {f.name for f in features if f.numeric}


def _build(
    processor, source, features: FeatureSet, split: dict, staging: Location, key: str, watched
) -> dict:
    frame = processor.read(source, _number_columns(features.all))
    split_columns = [c for c in [split_column(split)] if c]
    available = processor.column_names(frame)
    check_columns(available, features.all, source, split_columns)
    watched = {c: why for c, why in watched.items() if c in available}
    extra = [c for c in [*split_columns, *watched] if c not in features.columns]
    frame = processor.select(frame, features.columns + list(dict.fromkeys(extra)))
    names = split_names(split)

    def row_ids(part: pd.DataFrame, offset: int) -> np.ndarray:
        return np.arange(offset, offset + len(part), dtype=np.int64)

    if split["method"] == "time":  # one pass over the time column: the cuts for every part
        times = processor.map_collect(
            frame, lambda part, offset: time_seconds(part, row_ids(part, offset), split)
        )
        split = {**split, "time_cuts": time_cuts(np.concatenate(times), split)}

    def fit(part: pd.DataFrame, offset: int) -> dict:
        ids = row_ids(part, offset)
        codes = assign_splits(part, ids, split)
        train = codes == 0
        return {
            "stats": fit_partial(part[train], ids[train], features),
            # A forward-chaining fold's unused rows (codes past the names) count nowhere.
            "rows": np.bincount(codes[codes < len(names)], minlength=len(names)).tolist(),
            "watched": partial_counts(part[train], list(watched)),
        }

    fitted = processor.map_collect(frame, fit)
    stats = combine_partials([f["stats"] for f in fitted], features)
    checked = combine_counts([f["watched"] for f in fitted], watched)
    assigned = np.sum([f["rows"] for f in fitted], axis=0)

    def transform(part: pd.DataFrame, offset: int) -> dict[str, pd.DataFrame]:
        ids = row_ids(part, offset)
        codes = assign_splits(part, ids, split)
        processed, keep = transform_frame(part, ids, features.all, stats, training=codes == 0)
        return {
            name: processed[keep & (codes == i)].reset_index(drop=True)
            for i, name in enumerate(names)
        }

    report = processor.map_write(frame, transform, staging)
    rows = report["rows"]
    if rows.get("train", 0) == 0:
        raise UserError(
            f"the training split of {source.label} is empty after preprocessing; check dataset.split"
        )
    meta = {
        "version": PREPROCESSING_VERSION,
        "key": key,
        "source": source.label,
        "fingerprint": source.fingerprint(),
        "split": split,
        "processor": processor.name,
        "partitions": report["partitions"],
        "nodes": report["nodes"],
        "features": {f.name: {**f.describe(), "stats": stats[f.name]} for f in features.all},
        "input_features": [f.name for f in features.inputs],
        "output_features": [f.name for f in features.outputs],
        "rows": {name: int(rows.get(name, 0)) for name in names},
        "sample_check": checked,
    }
    # Rows a feature dropped (a missing target, a class the training split lacks, drop_row):
    # the log names them, since metrics are computed without them.
    meta["left_out"] = {name: int(assigned[i]) - meta["rows"][name] for i, name in enumerate(names)}
    return meta


def read_raw(processor, source: DataSource, features: list, extra: Sequence[str] = ()):
    """The processor's frame of only these features' columns (and `extra` raw columns, e.g.
    predict.keep_columns); a missing one is named."""
    frame = processor.read(source, _number_columns(features))
    available = processor.column_names(frame)
    check_columns(available, features, source)
    for column in extra:
        if column not in available:
            raise UserError(
                f"predict.keep_columns names {column!r}, which is not a column of {source.label}; "
                f"available columns: {', '.join(map(str, available))}"
            )
    names = [f.name for f in features]
    return processor.select(frame, names + [c for c in extra if c not in names])


def map_raw(processor, source: DataSource, features: list, fn, extra: Sequence[str] = ()) -> list:
    """fn(partition of raw rows, offset of its first row) over the raw table, partition by
    partition where the processor keeps them (predict / evaluate on new data)."""
    return processor.map_collect(read_raw(processor, source, features, extra), fn)
