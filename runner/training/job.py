"""What a training worker receives (TrainingJob) and what the loop returns (TrainingResult)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.config import ModelConfig, TrainerConfig
from runner.loading.base import Loader
from runner.storage import Location
from runner.training import time_limit


@dataclass
class TrainingJob:
    """Everything a worker needs to train; plain data, so it pickles to remote workers."""

    meta: dict
    model: ModelConfig
    settings: TrainerConfig
    loader: Loader
    run_dir: str
    train_shards: list  # one loader handle per worker
    validation_shards: list
    splits: Location | None = None  # for re-sharding when an elastic run changes size
    # Facts of this run, decided by the trainer (not settings a user gives):
    use_gpu: bool = False
    run_id: str | None = None  # its checkpoints carry it; only they are resumed automatically
    resume_if_present: bool = False  # a retried attempt continues from this run's checkpoint
    epoch_reporter: Any = None  # rank 0 of remote workers reports epochs through it (sweeps)
    epoch_logs: list = field(default_factory=list)  # the trackers' EpochLogs, rank 0 logs into
    deadline: float | None = None  # time_limit=: no epoch starts after it (time.time())

    @classmethod
    def create(
        cls,
        splits: Location,
        meta: dict,
        model: ModelConfig,
        settings: TrainerConfig,
        loader: Loader,
        run_dir: str,
        world_size: int = 1,
    ) -> TrainingJob:
        # Training shards hold equal row counts (every worker takes the same number of
        # steps); validation shards cover every row once.
        return cls(
            meta,
            model,
            settings,
            loader,
            run_dir,
            loader.shards(splits.join("train"), world_size, equal=True),
            loader.shards(splits.join("validation"), world_size, equal=False),
            splits,
            deadline=time_limit.deadline(),
        )


@dataclass
class TrainingResult:
    history: list[dict] = field(default_factory=list)
    best_epoch: int = -1
    best_value: float = float("nan")
    monitor: str = "loss"
    stopped_early: bool = False
    stopped_by_scheduler: bool = False  # a sweep's scheduler (ASHA) ended it
    stopped_at_time_limit: bool = False  # time_limit= ended it (runner/training/time_limit.py)
    resumed_at_epoch: int | None = None
    train_seconds: float = 0.0  # the epoch loop, validation and checkpoints included
    step_seconds: float = 0.0  # training steps alone (what a bare loop would spend)
    samples_seen: int = 0  # by all workers
    world_size: int = 1
    precision: str = "32"  # the training steps' (trainer.precision, auto made concrete)
    # The mean/majority baseline's metrics on the validation split (constant predictions).
    validation_baseline: dict = field(default_factory=dict)
    model: Any = None  # any family's ScoringModel (a network: best weights, unwrapped)
    # (logits, targets) by output of the rows its validation metrics come from, where these
    # are not the validation split's (a bagged portfolio's out-of-fold rows): what the
    # decision threshold is picked on.
    validation_scores: tuple[dict, dict] | None = None
    family: dict = field(default_factory=dict)  # what the family reports (ensemble weights)
