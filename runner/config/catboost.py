"""model.catboost: CatBoost's settings."""

from __future__ import annotations

from dataclasses import dataclass

from runner.config.checks import _require


@dataclass
class CatBoostConfig:
    """model.family=catboost: CatBoost on the preprocessing cache (CatBoost's own defaults)."""

    # Boosting rounds at most; early stopping on the validation split picks how many count.
    iterations: int = 1000
    early_stopping_rounds: int = 50
    # null: CatBoost picks it from the rows and the rounds
    learning_rate: float | None = None
    depth: int = 6
    l2_leaf_reg: float = 3.0
    # Threads CatBoost trains and predicts with; null: the cores the process may use.
    num_threads: int | None = None

    def __post_init__(self):
        _require(self.iterations >= 1, "model.catboost.iterations", "at least 1", self.iterations)
        _require(
            self.early_stopping_rounds >= 0,
            "model.catboost.early_stopping_rounds",
            "0 or more (0: off)",
            self.early_stopping_rounds,
        )
        _require(
            self.learning_rate is None or self.learning_rate > 0,
            "model.catboost.learning_rate",
            "above 0, or null",
            self.learning_rate,
        )
        _require(1 <= self.depth <= 16, "model.catboost.depth", "in 1..16", self.depth)
