"""model.bagging: the bagged portfolio's settings (model.family=bagged, preset=best)."""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.config.checks import _require
from runner.errors import UserError

# The families a portfolio may hold, cheapest first: the order they train in, so that a
# time limit cuts the dearest.
BAGGED_MEMBERS = ("gbm", "catboost", "network")


@dataclass
class BaggingConfig:
    """model.family=bagged: each member family trained on `folds` folds of the training and
    validation rows, each fold early-stopped on the part it leaves out; the members weighted on
    their out-of-fold predictions (runner/training/bagged_fit.py)."""

    folds: int = 5
    # Trained in this order within time_limit; trees leave out outputs they cannot fit.
    members: list[str] = field(default_factory=lambda: list(BAGGED_MEMBERS))
    # The row hash's seed for the folds (the split's own seed is used for train/validation/test).
    seed: int = 1

    def __post_init__(self):
        _require(2 <= self.folds <= 20, "model.bagging.folds", "in 2..20", self.folds)
        members = list(self.members)
        if not members:
            raise UserError(
                f"model.bagging.members is empty; name one or more of {', '.join(BAGGED_MEMBERS)}"
            )
        for name in members:
            if name not in BAGGED_MEMBERS:
                raise UserError(
                    f"model.bagging.members has {name!r}; its members are families of "
                    f"{', '.join(BAGGED_MEMBERS)}"
                )
        if len(set(members)) != len(members):
            raise UserError(f"model.bagging.members names a family twice: {members}")
