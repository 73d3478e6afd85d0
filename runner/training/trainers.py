"""Trainer objects (conf/trainer): how the one training loop is run."""

from __future__ import annotations

from runner.training.loop import TrainingJob, TrainingResult, run_training
from runner.training.strategy import LocalStrategy


class LocalTrainer:
    """The loop in this process."""

    def __init__(self, **settings):
        self.settings = settings

    def fit(self, job: TrainingJob, backend) -> TrainingResult:
        return run_training(job, LocalStrategy())
