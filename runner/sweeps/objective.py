"""The sweep objective: which metric a trial returns to Hydra (for optimizing sweepers) and the report."""

from __future__ import annotations

import math

from runner.errors import UserError
from runner.scoring.metrics import higher_is_better

SPLITS = {"train": "train", "val": "validation", "validation": "validation", "test": "test"}


def objective_value(metrics: dict, objective: str) -> float:
    """metrics.json-style dict + "val/roc_auc" (or "validation/label/roc_auc", "test/loss") -> value.
    A bare metric name refers to the first output that has it."""
    split, _, name = objective.partition("/")
    if split not in SPLITS or not name:
        raise UserError(
            f"sweep.objective={objective} must be <split>/<metric> with split train, val or test, "
            "e.g. val/roc_auc or validation/label/accuracy"
        )
    values = metrics.get(SPLITS[split]) or {}
    if name in values:
        return float(values[name])
    matches = [key for key in values if key.split("/")[-1] == name]
    if not matches:
        known = ", ".join(sorted(values)) or "none (that split was not evaluated)"
        raise UserError(
            f"sweep.objective={objective} is not a metric of this run; known {SPLITS[split]} metrics: {known}"
        )
    return float(values[matches[0]])


def maximizing(objective: str, direction: str) -> bool:
    if direction in ("maximize", "max"):
        return True
    if direction in ("minimize", "min"):
        return False
    if direction != "auto":
        raise UserError(f"sweep.direction={direction} is unknown; use maximize, minimize or auto")
    return higher_is_better(objective)


def sort_key(value: float | None, maximize: bool) -> float:
    """Best first; failed trials (no value) last."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.inf
    return -value if maximize else value
