"""The loader seam: from a cached split to torch batches.

The driver cuts a split into one shard handle per worker (`shards`); each worker
opens its own (`open`) and iterates training batches and evaluation chunks, or takes
its rows whole (`table`: the trees). The local Arrow reader and Ray Data differ only
behind these five calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from runner.storage import Location

if TYPE_CHECKING:  # torch: imported by what trains, not by what only checks a config
    from runner.loading.tensors import TensorTable
    from runner.model.layout import Layout


@runtime_checkable
class Loader(Protocol):
    name: str  # as in loader=<name>
    requires_ray: bool  # shards are Ray Data streams (needs the Ray backend)
    reshardable: bool  # shards can be cut again mid-run (elastic training)
    batch_size: int
    eval_batch_size: int

    def shards(self, split: Location, world_size: int, equal: bool) -> list[Any]:
        """One handle per worker, made on the driver. equal: the same row count for every
        worker (training); otherwise every row exactly once (validation, test)."""

    def open(self, shard, layout: Layout, equal: bool = False) -> Any:
        """The worker's data for its handle."""

    def train_batches(self, data, epoch: int, seed: int) -> Iterator[tuple[dict, dict]]:
        """(inputs, targets) batches of one epoch, shuffled by (seed, epoch) when asked."""

    def eval_batches(self, data) -> Iterator[TensorTable]:
        """Chunks in order, for evaluation and scoring."""

    def table(self, data) -> TensorTable:
        """Every row of an opened shard as one table (trees fit from it whole)."""
