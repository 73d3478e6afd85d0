"""The optimizer, the loss and the learning rate of each epoch."""

from __future__ import annotations

import math

import torch

from runner.config import TrainerConfig
from runner.model.layout import Layout

OPTIMIZERS = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}
FUSED = ("adamw", "adam")  # optimizers with a fused implementation on CPU and CUDA


def make_optimizer(settings: TrainerConfig, params) -> torch.optim.Optimizer:
    options = {"lr": settings.learning_rate, "weight_decay": settings.weight_decay}
    if settings.optimizer in FUSED:
        # One fused kernel updates every parameter. Profiled (py-spy, the 1M-row experiment):
        # torch's default on CPU, a Python loop over the parameters, was 36 % of the run;
        # fused, the step takes 58 us instead of 190 (the 2x256 MLP, side by side).
        options["fused"] = True
    return OPTIMIZERS[settings.optimizer](params, **options)


def output_loss(
    layout: Layout, logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]
) -> torch.Tensor:
    total = torch.zeros((), device=next(iter(logits.values())).device)
    for spec in layout.outputs:
        z, y = logits[spec.name], targets[spec.name]
        if z.dim() == 3:  # an ensemble's members [rows, k, size]: the mean of their losses
            y = y.repeat_interleave(z.shape[1], dim=0)
            z = z.reshape(-1, z.shape[2])
        if spec.class_weights is None:
            total = total + spec.head.loss(z, y)
        else:  # model.class_weights
            weights = torch.tensor(spec.class_weights, dtype=z.dtype, device=z.device)
            total = total + spec.head.loss(z, y, weights)
    return total


def scaled_learning_rate(settings: TrainerConfig, world_size: int, epoch: int) -> float:
    """Base rate scaled for the global batch (linear, sqrt or none), reached by a
    linear warm-up over trainer.warmup_epochs, then shaped by trainer.schedule."""
    base = settings.learning_rate * schedule_factor(settings.schedule, epoch, settings.epochs)
    factor = {"linear": world_size, "sqrt": world_size**0.5, "none": 1.0}[
        settings.learning_rate_scaling
    ]
    target = base * factor
    warmup = settings.warmup_epochs
    if world_size == 1 or warmup <= 0 or epoch >= warmup:
        return target
    return base + (target - base) * (epoch + 1) / (warmup + 1)


def schedule_factor(schedule: str, epoch: int, epochs: int) -> float:
    """The share of the rate epoch `epoch` (0-based) trains at: cosine goes from 1 at the first
    epoch to near 0 at the last, a half cosine over trainer.epochs (early stopping may end the
    run before it gets low)."""
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * epoch / max(1, epochs)))
    return 1.0
