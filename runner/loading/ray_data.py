"""loader=ray: each training worker reads its own shard of the cache's Parquet splits.

fully_executed (default): a worker whose share of the split is under HEAP_SHARD_BYTES
reads its contiguous rows straight from the cache's Parquet row groups (found from the
footers), turns them into tensors once and reshuffles them every epoch in-process, as
loader=local does. No Ray Data execution, task or actor: profiled at 100k rows, each
split's read_parquet().materialize() cost 1.2-2.7 s of Ray Data start-up for one block,
and a Tune trial's placement group has no CPU to spare for split tasks. A larger share is
read and materialized by Ray Data into the object store and iterated from there every
epoch (a streaming_split between the workers).

window_size_bytes (or fully_executed=false): the share is never held whole. Every epoch
the worker reads its row groups in a new order, a window of about window_size_bytes at a
time (the next window read by a thread while this one trains), and shuffles the rows of
each window: only about two windows occupy memory, whatever the data's size. This is not
Ray Data's streaming read: profiled on the 4M-row streaming bench, Ray Data 2.60's executor
thread spun at 96% of a core in the training process for the whole epoch (its scheduling
loop does not sleep while its only read task is held back by a slow consumer), doubling
the epoch; its 32 footer-reading actors grew with the files, and its 128 MiB read units
grew with the split until they spilled a small object store.
(Ray 2.60 has no Dataset.window(); this is the window, without the executor.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from runner.loading.heap import release_free_pages
from runner.loading.row_spans import read_spans, row_groups, spans_of
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
    # A ray.data.Dataset (one worker) or a DataIterator from streaming_split; None when the
    # worker reads its share's spans itself.
    source: Any
    rows: int  # rows this worker sees (about, for unequal shards)
    bytes_per_row: float
    layout: Layout | None = None
    split: Location | None = None  # a share held in the heap: read from here, by
    spans: list | None = None  # (file, row group, first row, end row) in the row group
    table: TensorTable | None = None  # those rows as tensors, once opened
    streamed: bool = False  # the spans are read a window at a time, every epoch

    def __len__(self) -> int:
        return self.rows


class RayDataLoader:
    name = "ray"
    requires_ray = True
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
    ):
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.eval_batch_size = int(eval_batch_size)
        self.window_size_bytes = int(window_size_bytes) if window_size_bytes else None
        # A window only makes sense when streaming: it wins over fully_executed.
        self.fully_executed = bool(fully_executed) and self.window_size_bytes is None
        self.prefetch_batches = int(prefetch_batches)

    def shards(self, split: Location, world_size: int, equal: bool) -> list[RayShard]:
        require_ray("loader=ray")
        groups = row_groups(split)
        rows = sum(g[2] for g in groups)
        bytes_per_row = sum(g[3] for g in groups) / rows if rows else 1.0
        share = rows // world_size if equal else -(-rows // world_size)
        streamed = not self.fully_executed
        if streamed or share * bytes_per_row < HEAP_SHARD_BYTES:
            return [
                RayShard(
                    None, end - start, bytes_per_row, split=split, spans=spans, streamed=streamed
                )
                for spans, (start, end) in _shares(groups, rows, world_size, equal)
            ]
        import ray.data

        dataset = ray.data.read_parquet(split.path, filesystem=split.arrow_filesystem())
        dataset = dataset.materialize()
        if equal and self.shuffle:  # training shards are the equal ones
            dataset = dataset.randomize_block_order()
        if world_size == 1:
            return [RayShard(dataset, rows, bytes_per_row)]
        return [
            RayShard(it, share, bytes_per_row)
            for it in dataset.streaming_split(world_size, equal=equal)
        ]

    def open(self, shard: RayShard, layout: Layout, equal: bool = False) -> RayShard:
        shard.layout = layout
        if shard.spans is not None and shard.table is None and not shard.streamed:
            assert shard.split is not None  # a share's spans come with their split
            shard.table = TensorTable.from_arrow(read_spans(shard.split, shard.spans), layout)
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
        if shard.streamed:
            yield from self._streamed_batches(shard, seed * 100003 + epoch)
            return
        # Arrow -> tensors once per chunk of CHUNK_BATCHES batches, not once per batch. A chunk
        # is a whole number of batches, so workers with equal rows take equal numbers of steps.
        layout = shard.layout
        assert layout is not None  # open() set it
        chunks = shard.source.iter_batches(
            batch_size=self.batch_size * CHUNK_BATCHES,
            batch_format="pyarrow",
            prefetch_batches=self.prefetch_batches,
            local_shuffle_buffer_size=self._buffer_rows(shard) if self.shuffle else None,
            local_shuffle_seed=(seed * 100003 + epoch) if self.shuffle else None,
        )
        for i, chunk in enumerate(chunks):
            table = TensorTable.from_arrow(chunk, layout)
            yield from table.batches(
                self.batch_size, self.shuffle, self.drop_last, seed=seed * 100003 + epoch * 7919 + i
            )

    def _streamed_batches(self, shard: RayShard, seed: int) -> Iterator[tuple[dict, dict]]:
        """A window at a time: its rows shuffled, then cut into whole batches. The rows left
        over (fewer than a batch) join the next window, so the epoch has the batches the heap
        path has, and workers with equal shares take equal numbers of steps."""
        split, layout = shard.split, shard.layout
        assert split is not None and shard.spans is not None  # a streamed share has both
        assert layout is not None  # open() set it
        rng = np.random.default_rng(seed)
        spans = list(shard.spans)
        if self.shuffle:  # a new order of the row groups every epoch
            spans = [spans[i] for i in rng.permutation(len(spans))]
        carry = None
        for table in read_ahead(split, windows(spans, self._buffer_rows(shard))):
            if carry is not None:
                table = pa.concat_tables([carry, table])
            n = table.num_rows
            order = rng.permutation(n) if self.shuffle else np.arange(n)
            full = n - n % self.batch_size
            carry = table.take(order[full:]) if full < n else None
            tensors = TensorTable.from_arrow(table, layout)
            index = torch.from_numpy(order[:full])
            for start in range(0, full, self.batch_size):
                yield tensors.take(index[start : start + self.batch_size])
        if carry is not None and not self.drop_last:
            yield TensorTable.from_arrow(carry, layout).slice(0, carry.num_rows)

    def eval_batches(self, shard: RayShard) -> Iterator[TensorTable]:
        if shard.table is not None:
            yield from shard.table.chunks(self.eval_batch_size)
            return
        layout = shard.layout
        assert layout is not None  # open() set it
        if shard.streamed:
            assert shard.split is not None and shard.spans is not None  # a streamed share has both
            rows = max(self.eval_batch_size, self._buffer_rows(shard))
            for table in read_ahead(shard.split, windows(shard.spans, rows)):
                yield from TensorTable.from_arrow(table, layout).chunks(self.eval_batch_size)
            return
        for batch in shard.source.iter_batches(
            batch_size=self.eval_batch_size,
            batch_format="pyarrow",
            prefetch_batches=self.prefetch_batches,
        ):
            yield TensorTable.from_arrow(batch, layout)

    def table(self, shard: RayShard) -> TensorTable:
        if shard.table is not None:
            return shard.table
        return TensorTable.concat(list(self.eval_batches(shard)))


def windows(spans: list, rows: int) -> Iterator[list]:
    """Consecutive spans grouped into windows of at least `rows` rows (the last: the rest)."""
    window, count = [], 0
    for span in spans:
        window.append(span)
        count += span[3] - span[2]
        if count >= rows:
            yield window
            window, count = [], 0
    if window:
        yield window


def read_ahead(split: Location, groups: Iterable[list]) -> Iterator[pa.Table]:
    """read_spans of each group in turn, the next one read by a thread while the caller
    works on this one (Arrow's reads and decoding release the GIL). Before each, the heaps'
    free pages go back to the system: the last window's arrays, freed but kept by glibc."""
    with ThreadPoolExecutor(1, thread_name_prefix="read-ahead") as pool:
        pending = None
        for spans in groups:
            future = pool.submit(read_spans, split, spans)
            if pending is not None:
                release_free_pages()
                yield pending.result()
            pending = future
        if pending is not None:
            release_free_pages()
            yield pending.result()


def _shares(groups: list, rows: int, world_size: int, equal: bool) -> list[tuple[list, tuple]]:
    """Each worker's contiguous rows as spans. equal: every worker the same count (the rest
    dropped, as streaming_split(equal=True) does); else every row once."""
    per = rows // world_size
    bounds = [
        (r * per, (r + 1) * per)
        if equal
        else (rows * r // world_size, rows * (r + 1) // world_size)
        for r in range(world_size)
    ]
    return [(spans_of(groups, start, end), (start, end)) for start, end in bounds]
