"""Checkpoint files: written atomically (a crash never leaves a torn file), and
complete enough to resume exactly: model, optimizer, epoch, RNG states, early
stopping state and history."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np

from runner.errors import UserError

# torch is imported in the functions that use it: the trainers name LAST before torch loads.

LAST = "last.pt"
BEST = "best.pt"


def save(state: dict, path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load(path: Path) -> dict:
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def rng_state() -> dict:
    import torch

    return {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }


def restore_rng(state: dict) -> None:
    import torch

    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def resolve_resume(path: str) -> Path:
    """A run dir, its checkpoints dir, or a checkpoint file -> the checkpoint file."""
    given = Path(os.path.expanduser(path))
    for candidate in (given, given / LAST, given / "checkpoints" / LAST):
        if candidate.is_file():
            return candidate
    raise UserError(
        f"trainer.resume_from={path} holds no checkpoint ({LAST}); pass a run dir that has checkpoints/{LAST}"
    )
