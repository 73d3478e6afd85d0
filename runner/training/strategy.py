"""Distribution strategies: what the one training loop asks of its surroundings.

The loop never knows whether it runs alone, under Horovod or under DDP; it
asks the strategy for rank and size, lets it wrap model and optimizer, and
has it reduce metrics across workers.
"""

from __future__ import annotations

import numpy as np
import torch


class LocalStrategy:
    """One process: every collective is the identity."""

    rank = 0
    world_size = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def prepare(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer):
        return model, optimizer

    def sum(self, values: np.ndarray) -> np.ndarray:
        return values

    def gather(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Concatenate per-worker arrays (predictions, targets) in rank order."""
        return arrays
