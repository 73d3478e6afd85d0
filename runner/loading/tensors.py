"""Processed Arrow data -> grouped torch tensors, without per-row Python."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import torch

from runner.model.layout import CATEGORY, NUMERIC, Layout, text_key
from runner.processing.columns import FIRST_TOKEN_ID, ROW_ID

# Arrow's fixed-width number types (by type id: extension types need not hash), and the numpy
# dtype their data buffer holds.
_FIXED_WIDTH = {
    t().id: np.dtype(t().to_pandas_dtype())
    for t in (
        pa.int8,
        pa.int16,
        pa.int32,
        pa.int64,
        pa.uint8,
        pa.uint16,
        pa.uint32,
        pa.uint64,
        pa.float16,
        pa.float32,
        pa.float64,
    )
}


def as_numpy(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An Arrow array as numpy: a column of numbers without nulls read from its data buffers,
    read-only (as Arrow's own views are: the table's memory is not the caller's to write).

    pyarrow's to_numpy imports pandas on its first call, even for a zero-copy view: 0.2-0.6 s
    of a fresh Ray actor's start, before its first step (the actors' import profile). A
    fixed-width column without nulls is its data buffer alone, so numpy reads that; anything
    else (nulls, booleans, dates, strings, extension types) goes through to_numpy."""
    dtype = _FIXED_WIDTH.get(array.type.id)
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    if dtype is None or any(c.null_count for c in chunks):
        return array.to_numpy(zero_copy_only=False)
    parts = [
        np.frombuffer(c.buffers()[1], dtype=dtype, count=len(c), offset=c.offset * dtype.itemsize)
        for c in chunks
    ]
    if len(parts) != 1:
        return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
    parts[0].setflags(write=False)
    return parts[0]


def _column(table: pa.Table, name: str, dtype) -> np.ndarray:
    values = as_numpy(table.column(name)).astype(dtype, copy=False)
    # Arrow's buffers are read-only here; tensors are never written in place, but they must
    # not share memory with a table the caller still holds.
    return values if values.flags.writeable else values.copy()


def _matrices(layout: Layout, rows: int, column) -> dict[str, torch.Tensor]:
    """The numbers' float32 matrix and the category codes' int64 matrix, in layout order;
    column(name, dtype) gives one processed column."""
    inputs: dict[str, torch.Tensor] = {}
    groups = (
        (NUMERIC, list(layout.numeric), np.float32),
        (CATEGORY, [name for name, *_ in layout.categories], np.int64),
    )
    for key, names, dtype in groups:
        if names:
            matrix = np.empty((rows, len(names)), dtype=dtype)
            for i, name in enumerate(names):
                matrix[:, i] = column(name, dtype)
            inputs[key] = torch.from_numpy(matrix)
    return inputs


def _padded_tokens(array: pa.ChunkedArray) -> np.ndarray:
    """list<int32> -> [rows, longest list] int64 matrix, zero-padded (vectorised via offsets)."""
    lists = array.combine_chunks()
    offsets = as_numpy(lists.offsets)
    offsets = offsets - offsets[0]
    lengths = np.diff(offsets)
    values = as_numpy(lists.flatten())
    out = np.zeros((len(lists), max(int(lengths.max(initial=0)), 1)), dtype=np.int64)
    rows = np.repeat(np.arange(len(lists)), lengths)
    positions = np.arange(len(values)) - np.repeat(offsets[:-1], lengths)
    out[rows, positions] = values
    return out


def _multi_hot(array: pa.ChunkedArray, size: int) -> np.ndarray:
    """A set output's member ids (list<int32>, FIRST_ID and up) -> [rows, size] 0/1 float32."""
    lists = array.combine_chunks()
    offsets = as_numpy(lists.offsets)
    lengths = np.diff(offsets - offsets[0])
    out = np.zeros((len(lists), size), dtype=np.float32)
    rows = np.repeat(np.arange(len(lists)), lengths)
    out[rows, as_numpy(lists.flatten()) - FIRST_TOKEN_ID] = 1.0
    return out


@dataclass
class TensorTable:
    """One split (or shard) as tensors: inputs grouped as the network expects, targets per output."""

    inputs: dict[str, torch.Tensor]
    targets: dict[str, torch.Tensor]
    row_ids: torch.Tensor

    @classmethod
    def from_arrow(
        cls, table: pa.Table, layout: Layout, with_targets: bool = True, exact: bool = False
    ) -> TensorTable:
        """`exact`: number targets as float64 (scoring: the true values a prediction file
        shows); training reads them as float32."""
        inputs = _matrices(layout, table.num_rows, lambda name, dtype: _column(table, name, dtype))
        for name, *_ in layout.texts:
            inputs[text_key(name)] = torch.from_numpy(_padded_tokens(table.column(name)))
        targets = {}
        if with_targets:
            for spec in layout.outputs:
                targets[spec.name] = torch.from_numpy(
                    _multi_hot(table.column(spec.name), spec.size)
                    if spec.head.multi_hot
                    else _column(table, spec.name, spec.head.target_dtype(exact))
                )
        row_ids = (
            torch.from_numpy(_column(table, ROW_ID, np.int64))
            if ROW_ID in table.column_names
            else torch.arange(table.num_rows)
        )
        return cls(inputs, targets, row_ids)

    @classmethod
    def from_columns(cls, columns: dict[str, np.ndarray], layout: Layout) -> TensorTable:
        """Rows to score from processed numpy columns (numbers and category codes: a request
        read without pandas, Predictor.answer_records), no targets."""
        assert not layout.texts, "a text input's tokens come through from_arrow"
        inputs = _matrices(layout, len(columns[ROW_ID]), lambda name, dtype: columns[name])
        return cls(inputs, {}, torch.from_numpy(np.asarray(columns[ROW_ID], dtype=np.int64)))

    @classmethod
    def concat(cls, tables: list[TensorTable]) -> TensorTable:
        """The tables' rows one after the other (at least one table)."""
        if len(tables) == 1:
            return tables[0]
        first = tables[0]
        return cls(
            {k: torch.cat([t.inputs[k] for t in tables]) for k in first.inputs},
            {k: torch.cat([t.targets[k] for t in tables]) for k in first.targets},
            torch.cat([t.row_ids for t in tables]),
        )

    def __len__(self) -> int:
        return len(self.row_ids)

    def take(self, index: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        return (
            {k: v.index_select(0, index) for k, v in self.inputs.items()},
            {k: v.index_select(0, index) for k, v in self.targets.items()},
        )

    def slice(
        self, start: int, stop: int
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        return (
            {k: v[start:stop] for k, v in self.inputs.items()},
            {k: v[start:stop] for k, v in self.targets.items()},
        )

    def chunks(self, size: int) -> Iterator[TensorTable]:
        """Consecutive slices of at most `size` rows, in order (for evaluation)."""
        for start in range(0, len(self), size):
            stop = min(start + size, len(self))
            inputs, targets = self.slice(start, stop)
            yield TensorTable(inputs, targets, self.row_ids[start:stop])

    def batches(
        self, batch_size: int, shuffle: bool = False, drop_last: bool = False, seed: int = 0
    ) -> Iterator[tuple[dict, dict]]:
        n = len(self)
        stop = n - n % batch_size if drop_last else n
        if not shuffle:
            for start in range(0, stop, batch_size):
                yield self.slice(start, min(start + batch_size, stop))
            return
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
        for start in range(0, stop, batch_size):
            yield self.take(order[start : min(start + batch_size, stop)])
