"""The local loader: reads a cached split with pyarrow into tensors and serves shuffled batches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from runner.loading.tensors import TensorTable
from runner.model.layout import Layout
from runner.storage import Location


@dataclass
class LocalShard:
    split: Location
    rank: int
    world_size: int


class LocalLoader:
    name = "local"
    requires_ray = False
    reshardable = True

    def __init__(self, batch_size: int, shuffle: bool, drop_last: bool, eval_batch_size: int):
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.eval_batch_size = int(eval_batch_size)

    def shards(self, split: Location, world_size: int, equal: bool) -> list[LocalShard]:
        """One handle per worker (made on the driver, opened on the worker)."""
        return [LocalShard(split, rank, world_size) for rank in range(world_size)]

    def open(self, shard: LocalShard, layout: Layout, equal: bool = False) -> TensorTable:
        """Every world_size-th row from rank on; with equal, all workers get the same count."""
        table = shard.split.read_table()
        if shard.world_size > 1:
            stop = table.num_rows - table.num_rows % shard.world_size if equal else table.num_rows
            table = table.take(pa.array(np.arange(shard.rank, stop, shard.world_size)))
        return TensorTable.from_arrow(table, layout)

    def train_batches(
        self, data: TensorTable, epoch: int, seed: int
    ) -> Iterator[tuple[dict, dict]]:
        # The permutation depends on (seed, epoch) only, so a resumed run sees the same order.
        return data.batches(
            self.batch_size, self.shuffle, self.drop_last, seed=seed * 100003 + epoch
        )

    def eval_batches(self, data: TensorTable) -> Iterator[TensorTable]:
        return data.chunks(self.eval_batch_size)

    def table(self, data: TensorTable) -> TensorTable:
        return data
