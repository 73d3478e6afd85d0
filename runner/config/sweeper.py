"""hydra/sweeper=tune: the Tune sweeper's settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.config.checks import _one_of, _require

TUNE_SEARCHES = ("random", "grid", "optuna")


TUNE_SCHEDULERS = ("asha", "none")


@dataclass
class TuneSweeperConfig:
    """hydra/sweeper=tune (conf/hydra/sweeper/tune.yaml; the sweep in runner/sweeps/tune/).
    Checked when the sweep starts, so a bad value is one error line, not a Hydra trace."""

    _target_: str = "hydra_plugins.tabular_runner_launchers.sweepers.TuneSweeper"
    num_samples: int = 8  # trials (a grid: repeats of it)
    search: str = "random"  # random | grid | optuna (Optuna's TPE through Ray Tune)
    scheduler: str = "asha"  # asha | none
    grace_period: int = 1  # epochs every trial runs before ASHA may stop it
    reduction_factor: float = 2.0  # ASHA keeps the best 1/reduction_factor at each rung
    max_concurrent: int | None = None  # trials at once; null: as many as the cluster places
    resume: bool = False  # continue the experiment kept in <sweep dir>/.tune
    seed: int | None = None  # of the random search
    num_cpus: float | None = None  # a local Ray the sweep starts (null: every core)
    params: dict[str, Any] = field(default_factory=dict)  # key -> sweep syntax, like optuna's

    def __post_init__(self):
        _one_of(self.search, TUNE_SEARCHES, "hydra.sweeper.search")
        _one_of(self.scheduler, TUNE_SCHEDULERS, "hydra.sweeper.scheduler")
        _require(self.num_samples >= 1, "hydra.sweeper.num_samples", "at least 1", self.num_samples)
        _require(
            self.grace_period >= 1, "hydra.sweeper.grace_period", "at least 1", self.grace_period
        )
        _require(
            self.reduction_factor > 1,
            "hydra.sweeper.reduction_factor",
            "more than 1",
            self.reduction_factor,
        )
        _require(
            self.max_concurrent is None or self.max_concurrent >= 1,
            "hydra.sweeper.max_concurrent",
            "at least 1, or null",
            self.max_concurrent,
        )
        _require(
            self.num_cpus is None or (self.num_cpus >= 1 and float(self.num_cpus).is_integer()),
            "hydra.sweeper.num_cpus",
            "a whole number, at least 1, or null",
            self.num_cpus,
        )
        self.params = dict(self.params or {})
