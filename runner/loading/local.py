"""The local loader: reads a cached split with pyarrow and serves shuffled torch batches."""

from __future__ import annotations

from collections.abc import Iterator

from runner.loading.tensors import TensorTable
from runner.model.layout import Layout
from runner.storage import Location


class LocalLoader:
    def __init__(self, batch_size: int = 256, shuffle: bool = True, drop_last: bool = False, eval_batch_size: int = 4096):
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.eval_batch_size = int(eval_batch_size)

    def load(self, split: Location, layout: Layout, rank: int = 0, world_size: int = 1) -> TensorTable:
        """A split's rows for this worker: every world_size-th row, starting at rank."""
        table = split.read_table()
        if world_size > 1:
            import numpy as np
            import pyarrow.compute as pc

            table = table.take(pc.cast(np.arange(rank, table.num_rows, world_size), "int64"))
        return TensorTable.from_arrow(table, layout)

    def train_batches(self, data: TensorTable, epoch: int, seed: int) -> Iterator[tuple[dict, dict]]:
        # The permutation depends on (seed, epoch) only, so a resumed run sees the same order.
        return data.batches(self.batch_size, self.shuffle, self.drop_last, seed=seed * 100003 + epoch)

    def eval_batches(self, data: TensorTable) -> Iterator[tuple[dict, dict]]:
        return data.batches(self.eval_batch_size)
