"""loader=ray: the cache read with Ray Data; each training worker iterates its own shard.

fully_executed (default): the split is read once and materialized in the object
store; every epoch iterates it from memory.

window_size_bytes: the split is never materialized. Every epoch streams the
Parquet files in a new order (the file shuffle is reseeded after each pass),
and a local shuffle buffer of about window_size_bytes mixes the rows of the
files in flight: a window. Only the window and the blocks in flight occupy
memory, so a split larger than the object store trains without spilling.
(Ray 2.60 has no Dataset.window(); this is its streaming equivalent.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow.parquet as pq

from runner.loading.tensors import TensorTable
from runner.model.layout import Layout
from runner.runtime import require_ray
from runner.storage import Location

log = logging.getLogger(__name__)
UNWINDOWED_SHUFFLE_ROWS = 100_000
CHUNK_BATCHES = 32


@dataclass
class RayShard:
    source: object  # a ray.data.Dataset (one worker) or a DataIterator from streaming_split
    rows: int  # rows this worker sees (about, for unequal shards)
    bytes_per_row: float
    layout: Layout | None = None

    def __len__(self) -> int:
        return self.rows


def split_size(split: Location) -> tuple[int, float]:
    """(rows, uncompressed bytes per row) from the Parquet footers alone."""
    filesystem = split.arrow_filesystem()
    rows, size = 0, 0
    for path in split.files():
        meta = pq.read_metadata(path, filesystem=filesystem)
        rows += meta.num_rows
        size += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return rows, (size / rows if rows else 1.0)


class RayDataLoader:
    runs_on_ray = True
    reshardable = False  # streaming_split shards are fixed for the run

    def __init__(
        self,
        batch_size: int,
        shuffle: bool,
        drop_last: bool,
        eval_batch_size: int,
        fully_executed: bool,
        window_size_bytes: int | None,
        prefetch_batches: int,
        seed: int,
    ):
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.eval_batch_size = int(eval_batch_size)
        self.window_size_bytes = int(window_size_bytes) if window_size_bytes else None
        # A window only makes sense when streaming: it wins over fully_executed.
        self.fully_executed = bool(fully_executed) and self.window_size_bytes is None
        self.prefetch_batches = int(prefetch_batches)
        self.seed = int(seed)

    def shards(self, split: Location, world_size: int, equal: bool) -> list[RayShard]:
        require_ray("loader=ray")
        import ray.data

        rows, bytes_per_row = split_size(split)
        training = equal  # training shards are the equal ones
        shuffle_files = (
            ray.data.FileShuffleConfig(seed=self.seed)
            if training and self.shuffle and self.window_size_bytes
            else None
        )
        dataset = ray.data.read_parquet(
            split.path, filesystem=split.arrow_filesystem(), shuffle=shuffle_files
        )
        if self.fully_executed:
            dataset = dataset.materialize()
        if training and self.shuffle and self.fully_executed:
            dataset = dataset.randomize_block_order()
        if world_size == 1:
            return [RayShard(dataset, rows, bytes_per_row)]
        per_worker = rows // world_size if equal else -(-rows // world_size)
        return [
            RayShard(it, per_worker, bytes_per_row)
            for it in dataset.streaming_split(world_size, equal=equal)
        ]

    def open(self, shard: RayShard, layout: Layout, equal: bool = False) -> RayShard:
        shard.layout = layout
        return shard

    def _buffer_rows(self, shard: RayShard) -> int:
        chunk = self.batch_size * CHUNK_BATCHES
        if self.window_size_bytes:
            return max(chunk, int(self.window_size_bytes / max(shard.bytes_per_row, 1.0)))
        return max(chunk, min(shard.rows, UNWINDOWED_SHUFFLE_ROWS))

    def train_batches(self, shard: RayShard, epoch: int, seed: int) -> Iterator[tuple[dict, dict]]:
        # Arrow -> tensors once per chunk of CHUNK_BATCHES batches, not once per batch. A chunk
        # is a whole number of batches, so workers with equal rows take equal numbers of steps.
        chunks = shard.source.iter_batches(
            batch_size=self.batch_size * CHUNK_BATCHES,
            batch_format="pyarrow",
            prefetch_batches=self.prefetch_batches,
            local_shuffle_buffer_size=self._buffer_rows(shard) if self.shuffle else None,
            local_shuffle_seed=(seed * 100003 + epoch) if self.shuffle else None,
        )
        for i, chunk in enumerate(chunks):
            table = TensorTable.from_arrow(chunk, shard.layout)
            yield from table.batches(
                self.batch_size, self.shuffle, self.drop_last, seed=seed * 100003 + epoch * 7919 + i
            )

    def eval_batches(self, shard: RayShard) -> Iterator[TensorTable]:
        for batch in shard.source.iter_batches(
            batch_size=self.eval_batch_size,
            batch_format="pyarrow",
            prefetch_batches=self.prefetch_batches,
        ):
            yield TensorTable.from_arrow(batch, shard.layout)
