"""loader=ray: the cache read with Ray Data; each training worker iterates its own shard.

fully_executed (default): a worker whose share of the split is under HEAP_SHARD_BYTES
reads its contiguous rows straight from the cache's Parquet row groups (found from the
footers), turns them into tensors once and reshuffles them every epoch in-process, as
loader=local does. No Ray Data execution, task or actor: profiled at 100k rows, each
split's read_parquet().materialize() cost 1.2-2.7 s of Ray Data start-up for one block,
and a Tune trial's placement group has no CPU to spare for split tasks. A larger share is
read and materialized by Ray Data into the object store and iterated from there every
epoch (a streaming_split between the workers).

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

import pyarrow as pa
import pyarrow.parquet as pq

from runner.loading.tensors import TensorTable
from runner.model.layout import Layout
from runner.runtime import require_ray
from runner.storage import Location

log = logging.getLogger(__name__)
UNWINDOWED_SHUFFLE_ROWS = 100_000
CHUNK_BATCHES = 32
HEAP_SHARD_BYTES = 1 << 30  # a share under this is held in the worker's heap as tensors


@dataclass
class RayShard:
    source: object  # a ray.data.Dataset (one worker) or a DataIterator from streaming_split
    rows: int  # rows this worker sees (about, for unequal shards)
    bytes_per_row: float
    layout: Layout | None = None
    split: Location | None = None  # a share held in the heap: read from here, by
    pieces: list | None = None  # (file, row group, first row, end row) in the row group
    table: TensorTable | None = None  # those rows as tensors, once opened

    def __len__(self) -> int:
        return self.rows


def row_groups(split: Location) -> list[tuple[str, int, int, int]]:
    """(file, row group, rows, uncompressed bytes) of every row group, from the footers."""
    filesystem = split.arrow_filesystem()
    groups = []
    for path in split.files():
        meta = pq.read_metadata(path, filesystem=filesystem)
        for i in range(meta.num_row_groups):
            group = meta.row_group(i)
            groups.append((path, i, group.num_rows, group.total_byte_size))
    return groups


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
        groups = row_groups(split)
        rows = sum(g[2] for g in groups)
        bytes_per_row = sum(g[3] for g in groups) / rows if rows else 1.0
        share = rows // world_size if equal else -(-rows // world_size)
        if self.fully_executed and share * bytes_per_row < HEAP_SHARD_BYTES:
            return [
                RayShard(None, end - start, bytes_per_row, split=split, pieces=pieces)
                for pieces, (start, end) in _shares(groups, rows, world_size, equal)
            ]
        import ray.data

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
        return [
            RayShard(it, share, bytes_per_row)
            for it in dataset.streaming_split(world_size, equal=equal)
        ]

    def open(self, shard: RayShard, layout: Layout, equal: bool = False) -> RayShard:
        shard.layout = layout
        if shard.pieces is not None and shard.table is None:
            shard.table = TensorTable.from_arrow(read_pieces(shard.split, shard.pieces), layout)
        return shard

    def _buffer_rows(self, shard: RayShard) -> int:
        chunk = self.batch_size * CHUNK_BATCHES
        if self.window_size_bytes:
            return max(chunk, int(self.window_size_bytes / max(shard.bytes_per_row, 1.0)))
        return max(chunk, min(shard.rows, UNWINDOWED_SHUFFLE_ROWS))

    def train_batches(self, shard: RayShard, epoch: int, seed: int) -> Iterator[tuple[dict, dict]]:
        if shard.table is not None:  # reshuffled in the heap every epoch, as loader=local does
            yield from shard.table.batches(
                self.batch_size, self.shuffle, self.drop_last, seed=seed * 100003 + epoch
            )
            return
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
        if shard.table is not None:
            yield from shard.table.chunks(self.eval_batch_size)
            return
        for batch in shard.source.iter_batches(
            batch_size=self.eval_batch_size,
            batch_format="pyarrow",
            prefetch_batches=self.prefetch_batches,
        ):
            yield TensorTable.from_arrow(batch, shard.layout)


def pieces_of(groups: list, start: int, end: int) -> list[tuple[str, int, int, int]]:
    """Rows [start, end) of a split as (file, row group, first, end) pieces of its row groups."""
    pieces, offset = [], 0
    for path, index, count, _ in groups:
        lo, hi = max(start, offset), min(end, offset + count)
        if lo < hi:
            pieces.append((path, index, lo - offset, hi - offset))
        offset += count
    return pieces


def read_pieces(split: Location, pieces: list) -> pa.Table:
    """The rows of those pieces, in order (an empty table of the split's schema for none)."""
    filesystem, files, parts = split.arrow_filesystem(), {}, []
    for path, group, first, end in pieces:
        if path not in files:
            files[path] = pq.ParquetFile(path, filesystem=filesystem)
        parts.append(files[path].read_row_group(group).slice(first, end - first))
    if not parts:  # fewer rows than workers: this one has none
        path = split.files()[0]
        parts = [pq.ParquetFile(path, filesystem=filesystem).schema_arrow.empty_table()]
    return pa.concat_tables(parts)


def _shares(groups: list, rows: int, world_size: int, equal: bool) -> list[tuple[list, tuple]]:
    """Each worker's contiguous rows as pieces. equal: every worker the same count (the rest
    dropped, as streaming_split(equal=True) does); else every row once."""
    per = rows // world_size
    bounds = [
        (r * per, (r + 1) * per)
        if equal
        else (rows * r // world_size, rows * (r + 1) // world_size)
        for r in range(world_size)
    ]
    return [(pieces_of(groups, start, end), (start, end)) for start, end in bounds]
