"""The processor seam: the dataframe library that reads the raw table and maps the
feature transforms over its partitions.

Engines differ only in how they read and partition; every decision (splits,
statistics, transforms) is made by processing/pipeline.py and processing/features/, so all
processors produce the same cache entry. The interface stays this narrow on purpose.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from runner.processing.source import DataSource
from runner.storage import Location

# fn(partition, offset of its first row in the whole table) -> anything
PartitionFn = Callable[[pd.DataFrame, int], Any]


@runtime_checkable
class Processor(Protocol):
    name: str
    requires_ray: bool  # needs the Ray backend (Dask / Modin on Ray)

    def read(self, source: DataSource, numbers: AbstractSet[str] = frozenset()) -> Any:
        """The processor's frame of the raw table; `numbers` may be parsed as floats while reading."""

    def column_names(self, frame) -> list[str]: ...

    def select(self, frame, columns: list[str]) -> Any: ...

    def map_collect(self, frame, fn: PartitionFn) -> list[Any]:
        """fn over every partition; the (small) results, in partition order."""

    def map_write(self, frame, fn: PartitionFn, out: Location) -> dict:
        """fn returns {split: processed frame} per partition, written where the partition
        lives under out/<split>/; returns {"rows": {split: n}, "nodes": [...], "partitions": n}."""

    def ray_blocks(self, frame, row_column: str) -> list:
        """The frame's partitions as Ray object refs (DataFrames) for Ray Data, each with its
        rows' global row numbers in row_column; no partition passes through the driver
        (except pandas', which is already there)."""
