"""Processors: the dataframe engine that reads the table and maps the feature
transforms over its partitions. They differ only in how they partition; the
transforms themselves live in features.py."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from runner.errors import UserError
from runner.processing.source import DataSource
from runner.processing.synthetic import make_synthetic
from runner.storage import Location

log = logging.getLogger(__name__)

# fn(partition, offset of its first row in the whole table) -> anything
PartitionFn = Callable[[pd.DataFrame, int], Any]


# Every engine reads CSV cells as strings with these missing-value markers, so
# that values are typed by the feature transforms alone, the same way everywhere.
CSV_NULLS = ["", "NA", "N/A", "NaN", "nan", "null", "NULL", "None", "#N/A"]


def csv_header(fs, path: str) -> list[str]:
    import csv
    import io

    with fs.open(path, "rb", compression="infer") as handle:
        first = handle.readline().decode("utf-8-sig")
    return next(csv.reader(io.StringIO(first)), [])


def _read_csv(fs, path: str, names: list[str], numbers: set[str]) -> pa.Table:
    """Number-feature columns parsed as float64 by pyarrow's C parser; everything else as
    strings. A value that does not parse sends the file down the all-strings path, where
    the number feature names the bad value and its row."""

    def read(types: dict) -> pa.Table:
        convert = pacsv.ConvertOptions(
            column_types=types, null_values=CSV_NULLS, strings_can_be_null=True
        )
        with fs.open(path, "rb", compression="infer") as handle:
            return pacsv.read_csv(handle, convert_options=convert)

    strings = {n: pa.string() for n in names}
    if numbers & set(names):
        try:
            return read({**strings, **{n: pa.float64() for n in numbers if n in strings}})
        except pa.ArrowInvalid as exc:
            if "conversion error" not in str(exc).lower():
                raise
    return read(strings)


def read_arrow(source: DataSource, numbers: set[str] = frozenset()) -> pa.Table:
    """The whole raw table as Arrow; clear errors for missing, empty and unreadable files."""
    fs, files = source.files()
    tables = []
    for path in files:
        try:
            if source.format == "csv":
                names = csv_header(fs, path)
                if not names:
                    raise pa.ArrowInvalid("Empty CSV file")
                tables.append(_read_csv(fs, path, names, set(numbers)))
            else:
                tables.append(pq.read_table(path, filesystem=fs))
        except pa.ArrowInvalid as exc:
            if "Empty CSV file" in str(exc):
                raise UserError(
                    f"dataset {source.path} is empty; give it a header row and data rows"
                ) from None
            raise UserError(
                f"cannot read {path} as {source.format}: {str(exc).splitlines()[0]}"
            ) from None
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    if table.num_rows == 0:
        raise UserError(f"dataset {source.path} has no data rows; add rows below the header")
    return table


def write_splits(parts: dict[str, pd.DataFrame], out: Location, part: int) -> dict[str, int]:
    """Each split's processed rows of one partition -> out/<split>/part-<n>.parquet.
    Every split gets a file, empty or not, so readers always find a schema."""
    for split, frame in parts.items():
        table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)
        out.join(split).write_parquet(table, f"part-{part:05d}.parquet")
    return {split: len(frame) for split, frame in parts.items()}


def require_ray(processor: str):
    from runner.backends.ray import ensure_ray

    try:
        return ensure_ray(f"processor={processor}")
    except UserError:
        raise UserError(
            f"processor={processor} runs on Ray; add backend=ray (or use processor=pandas for a local run)"
        ) from None


def current_node() -> str:
    """The Ray node this code runs on ("local" outside Ray)."""
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return ray.get_runtime_context().get_node_id()
    return "local"


def process_partition(
    part: pd.DataFrame, offset: int, index: int, fn: PartitionFn, out: Location
) -> dict:
    """Transform and write one partition where it lives; report rows per split and the node."""
    return {"rows": write_splits(fn(part, offset), out, index), "node": current_node()}


def merge_reports(reports: list[dict]) -> dict:
    rows: dict[str, int] = {}
    for report in reports:
        for split, count in report["rows"].items():
            rows[split] = rows.get(split, 0) + count
    return {"rows": rows, "nodes": sorted({r["node"] for r in reports}), "partitions": len(reports)}


def offsets_of(lengths: list[int], label: str) -> list[int]:
    """Global row number of each partition's first row."""
    if sum(lengths) == 0:
        raise UserError(f"dataset {label} has no data rows; add rows below the header")
    offsets, total = [], 0
    for n in lengths:
        offsets.append(total)
        total += int(n)
    return offsets


class PandasProcessor:
    """The whole table in memory as one partition."""

    name = "pandas"

    def read(self, source: DataSource, numbers: set[str] = frozenset()) -> pd.DataFrame:
        if source.is_synthetic:
            return make_synthetic(source.synthetic_rows, source.synthetic_seed)
        return read_arrow(source, numbers).to_pandas()

    def column_names(self, frame: pd.DataFrame) -> list[str]:
        return list(frame.columns)

    def select(self, frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
        return frame[columns]

    def map_collect(self, frame: pd.DataFrame, fn: PartitionFn) -> list[Any]:
        return [fn(frame, 0)]

    def map_write(self, frame: pd.DataFrame, fn: PartitionFn, out: Location) -> dict:
        """fn returns {split name: processed frame}; each is written under out/<split>/."""
        return merge_reports([process_partition(frame, 0, 0, fn, out)])
