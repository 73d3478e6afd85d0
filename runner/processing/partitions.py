"""What every processor does with a partition: transform it, write its splits where it
lives, and report; and the bookkeeping of partitions (offsets, merged reports)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from runner.errors import UserError
from runner.processing.base import PartitionFn
from runner.runtime import current_node
from runner.runtime import require_ray as runtime_ray
from runner.storage import Location


def write_splits(parts: dict[str, pd.DataFrame], out: Location, part: int) -> dict[str, int]:
    """Each split's processed rows of one partition -> out/<split>/part-<n>.parquet.
    Every split gets a file, empty or not, so readers always find a schema."""
    for split, frame in parts.items():
        table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)
        out.join(split).write_parquet(table, f"part-{part:05d}.parquet")
    return {split: len(frame) for split, frame in parts.items()}


def process_partition(
    part: pd.DataFrame, offset: int, index: int, fn: PartitionFn, out: Location
) -> dict:
    """Transform and write one partition where it lives; report rows per split and the node."""
    return {"rows": write_splits(fn(part, offset), out, index), "node": current_node()}


def numbered(part: pd.DataFrame, offset: int, row_column: str) -> pd.DataFrame:
    """The partition with its rows' global row numbers (for scoring on Ray)."""
    part = part.reset_index(drop=True)
    part[row_column] = np.arange(offset, offset + len(part), dtype=np.int64)
    return part


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


def require_ray(processor: str):
    """The ray module for a processor that runs on Ray, or the error that says so."""
    return runtime_ray(
        f"processor={processor}", "add backend=ray (or use processor=pandas for a local run)"
    )
