"""Distribution strategies: what the one training loop asks of its surroundings.

The loop never knows whether it runs alone, under Horovod or under DDP: it asks
the strategy for rank, world size and device, lets it wrap model and optimizer
(broadcast of rank 0's initial state, gradient averaging), and has it gather
predictions so that reported metrics cover every worker's rows.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {}


def pick_device(use_gpu: bool, local_rank: int = 0) -> torch.device:
    if use_gpu and torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


class LocalStrategy:
    """One process: every collective is the identity."""

    name = "local"

    def __init__(self, use_gpu: bool):
        self.device = pick_device(use_gpu)

    # Read-only properties: a subclass may ask its library each time (elastic Horovod).
    @property
    def rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 1

    @property
    def local_size(self) -> int:
        """Workers of this run on this machine."""
        return 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def prepare(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer):
        return model, optimizer

    def gather(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Concatenate per-worker arrays (predictions, targets) in rank order."""
        return arrays

    def run_epochs(self, epochs) -> None:
        """Runs the loop's epochs (an _Epochs); elastic strategies re-enter it after resets."""
        epochs.run()


class HorovodStrategy(LocalStrategy):
    """Horovod: ring-allreduce of gradients (optionally fp16-compressed)."""

    name = "horovod"

    def __init__(self, use_gpu: bool, compression: str):
        import horovod.torch as hvd

        hvd.init()
        self.hvd = hvd
        self.compression = compression
        self.device = pick_device(use_gpu, hvd.local_rank())

    # Asked each time: an elastic run changes them.
    @property
    def rank(self) -> int:
        return self.hvd.rank()

    @property
    def world_size(self) -> int:
        return self.hvd.size()

    @property
    def local_size(self) -> int:
        return self.hvd.local_size()

    def prepare(self, model, optimizer):
        hvd = self.hvd
        self._broadcast_initial_state(model, optimizer)
        compression = hvd.Compression.fp16 if self.compression == "fp16" else hvd.Compression.none
        optimizer = hvd.DistributedOptimizer(
            optimizer, named_parameters=model.named_parameters(), compression=compression
        )
        return model, optimizer

    def _broadcast_initial_state(self, model, optimizer) -> None:
        self.hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        self.hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    def gather(self, arrays):
        return _concat(self.hvd.allgather_object(arrays))


class DDPStrategy(LocalStrategy):
    """torch DistributedDataParallel in a process group Ray Train set up (gloo on CPU, NCCL on GPU)."""

    name = "ddp"

    def __init__(self, use_gpu: bool, compression: str):
        import torch.distributed as dist

        self.dist = dist
        self._rank = dist.get_rank()
        self._world_size = dist.get_world_size()
        self._local_size = int(os.environ.get("LOCAL_WORLD_SIZE", self._world_size))
        self.compression = compression
        self.device = pick_device(use_gpu, int(os.environ.get("LOCAL_RANK", 0)))

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world_size

    @property
    def local_size(self) -> int:
        return self._local_size

    def prepare(self, model, optimizer):
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device.type == "cuda" else None
        wrapped = DistributedDataParallel(model, device_ids=ids)  # broadcasts rank 0's parameters
        if self.compression == "fp16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            wrapped.register_comm_hook(None, default_hooks.fp16_compress_hook)
        return wrapped, optimizer

    def gather(self, arrays):
        parts: list[Any] = [None] * self.world_size  # all_gather_object fills it
        self.dist.all_gather_object(parts, arrays)
        return _concat(parts)


class ElasticHorovodStrategy(HorovodStrategy):
    """Elastic Horovod: when workers are lost (or added) the survivors roll back to the
    last epoch's commit, take their new rank and shard, and go on with the new world size."""

    name = "horovod-elastic"

    def _broadcast_initial_state(self, model, optimizer) -> None:
        """Not here: the elastic run's state.sync() broadcasts, and it is the first collective
        of every worker, including one that joins a running job (which must not call extra ones)."""

    def run_epochs(self, epochs) -> None:
        hvd = self.hvd
        state = hvd.elastic.TorchState(
            model=getattr(epochs.model, "module", epochs.model),
            optimizer=epochs.optimizer,
            epoch=epochs.epoch,
            history=list(epochs.result.history),
            early=epochs.monitor.state(),
            best=epochs.best_state,
            average=epochs.average_state(),
        )

        def commit() -> None:
            state.epoch, state.history = epochs.epoch, list(epochs.result.history)
            state.early, state.best = epochs.monitor.state(), epochs.best_state
            state.average = epochs.average_state()
            state.commit()

        epochs.commit = commit

        @hvd.elastic.run
        def train(state) -> None:
            # Entered at the start and after every reset, once state holds the last commit
            # (restored, then synced from rank 0): this worker's rank and shard may have changed.
            epochs.reopen_shards()
            epochs.epoch, epochs.result.history = state.epoch, list(state.history)
            epochs.monitor.load(state.early)
            epochs.best_state = state.best
            epochs.load_average(state.average)
            epochs.run()

        train(state)
