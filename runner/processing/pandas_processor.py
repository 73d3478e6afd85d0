"""processor=pandas: the whole table in memory as one partition; the reference processor."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

import pandas as pd

from runner.processing.base import PartitionFn
from runner.processing.partitions import (
    merge_reports,
    numbered,
    offsets_of,
    process_partition,
    require_ray,
)
from runner.processing.reading import read_arrow
from runner.processing.source import DataSource
from runner.processing.synthetic import make_synthetic
from runner.storage import Location

BLOCK_ROWS = 100_000  # rows per block handed to Ray (pandas on Ray)


class PandasProcessor:
    """The whole table in memory as one partition."""

    name = "pandas"
    requires_ray = False

    def read(self, source: DataSource, numbers: AbstractSet[str] = frozenset()) -> pd.DataFrame:
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

    def ray_blocks(self, frame: pd.DataFrame, row_column: str) -> list:
        """Blocks of BLOCK_ROWS rows put into the object store, so that several actors share
        the work."""
        import ray

        require_ray("pandas")
        offsets_of([len(frame)], "the data")
        return [
            ray.put(numbered(frame.iloc[start : start + BLOCK_ROWS], start, row_column))
            for start in range(0, len(frame), BLOCK_ROWS)
        ]
