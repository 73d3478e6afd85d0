"""The training seams.

Strategy: what the one training loop asks of its surroundings inside a worker
(rank, world size, device, wrapping model and optimizer, gathering predictions).
The loop never knows whether it runs alone, under Horovod or under DDP.

Trainer: how the loop is run for a command: in this process, or as N workers
(Horovod on Ray, under horovodrun, or DDP on Ray Train), with retries after a
lost worker. Every trainer takes the same settings (runner.config.TrainerConfig).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from runner.backends.base import Backend
from runner.config import TrainerConfig
from runner.training.job import TrainingJob, TrainingResult

if TYPE_CHECKING:  # torch: imported by what trains, not by what only checks a config
    import numpy as np
    import torch

# make_job(world_size) -> a job whose shards are cut for that many workers; a retried
# attempt calls it again for fresh shards.
JobFactory = Callable[[int], TrainingJob]


@runtime_checkable
class Strategy(Protocol):
    name: str
    device: torch.device

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    @property
    def local_size(self) -> int:
        """Workers of this run on this machine (they share its cores)."""

    @property
    def is_main(self) -> bool: ...

    def prepare(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer):
        """(model, optimizer) wrapped for distribution; rank 0's state reaches every worker."""

    def gather(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Per-worker arrays (predictions, targets) concatenated in rank order, on every worker."""

    def run_epochs(self, epochs) -> None:
        """Runs the loop's epochs; elastic strategies re-enter them after a change of workers."""


@runtime_checkable
class Trainer(Protocol):
    name: str
    settings: TrainerConfig
    distributed: bool  # trains in worker processes (its data comes as per-worker shards)

    def world_size(self, backend: Backend) -> int: ...

    def fit(self, make_job: JobFactory, backend: Backend) -> TrainingResult | None:
        """The result; None on the ranks other than 0 under horovodrun."""
