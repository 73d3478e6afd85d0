"""model.gbm: LightGBM's settings."""

from __future__ import annotations

from dataclasses import dataclass

from runner.config.checks import _require


@dataclass
class GBMConfig:
    """model.family=gbm (and the ensemble's trees): LightGBM on the preprocessing cache."""

    # Boosting rounds at most; early stopping on the validation split picks how many count.
    num_boost_round: int = 2000
    early_stopping_rounds: int = 50
    learning_rate: float = 0.05
    num_leaves: int = 31
    min_data_in_leaf: int = 20
    feature_fraction: float = 0.9
    bagging_fraction: float = 1.0
    lambda_l2: float = 0.0
    # Threads LightGBM trains and predicts with; null: the cores the process may use.
    num_threads: int | None = None
    # On a backend with Ray and a distributed trainer, the trees train data-parallel on Ray
    # Train's workers from this many training rows; below, in the run's process, where a
    # worker group's start and LightGBM's sockets cost more than they save (200k rows on
    # 2 cores: 21 s of boosting on 2 workers, 12 s in one process, before the group's start).
    # 0: always on Ray Train.
    ray_from_rows: int = 1_000_000

    def __post_init__(self):
        _require(
            self.num_boost_round >= 1,
            "model.gbm.num_boost_round",
            "at least 1",
            self.num_boost_round,
        )
        _require(
            self.early_stopping_rounds >= 0,
            "model.gbm.early_stopping_rounds",
            "0 or more (0: off)",
            self.early_stopping_rounds,
        )
        _require(self.learning_rate > 0, "model.gbm.learning_rate", "above 0", self.learning_rate)
        _require(self.num_leaves >= 2, "model.gbm.num_leaves", "at least 2", self.num_leaves)
        _require(
            self.ray_from_rows >= 0, "model.gbm.ray_from_rows", "0 or more", self.ray_from_rows
        )
        for name in ("feature_fraction", "bagging_fraction"):
            value = getattr(self, name)
            _require(0 < value <= 1, f"model.gbm.{name}", "in (0, 1]", value)
