"""Early stopping on a validation metric; its state is part of every checkpoint."""

from __future__ import annotations

import numpy as np

from runner.scoring.metrics import higher_is_better


class EarlyStopping:
    def __init__(self, metric: str, patience: int):
        self.metric = metric
        self.patience = patience
        self.maximize = higher_is_better(metric)
        self.best_value = float("nan")
        self.best_epoch = -1
        self.bad_epochs = 0

    def update(self, value: float, epoch: int) -> bool:
        """True when this epoch is the best so far."""
        better = self.best_epoch < 0 or (
            value > self.best_value if self.maximize else value < self.best_value
        )
        if better and not np.isnan(value):
            self.best_value, self.best_epoch, self.bad_epochs = value, epoch, 0
            return True
        self.bad_epochs += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.patience > 0 and self.bad_epochs >= self.patience

    def state(self) -> dict:
        return {
            "best_value": self.best_value,
            "best_epoch": self.best_epoch,
            "bad_epochs": self.bad_epochs,
        }

    def load(self, state: dict) -> None:
        self.best_value, self.best_epoch, self.bad_epochs = (
            state["best_value"],
            state["best_epoch"],
            state["bad_epochs"],
        )
