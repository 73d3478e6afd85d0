"""The root schema: one run's whole config, every group beneath it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.command_table import COMMANDS
from runner.config.checks import MISSING, _one_of, _require
from runner.config.commands import (
    ExplainConfig,
    ExportConfig,
    InitConfig,
    PredictConfig,
    ReportConfig,
    ServeConfig,
    SweepConfig,
)
from runner.config.dataset import DatasetConfig
from runner.config.model import ModelConfig
from runner.errors import UserError


@dataclass
class RunConfig:
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    backend: Any = MISSING
    processor: Any = MISSING
    trainer: Any = MISSING
    loader: Any = MISSING
    command: str = "experiment"  # experiment | preprocess | train | evaluate | predict
    # k_fold=N (command=experiment): N runs, each validating on another Nth of the training
    # and validation rows (the test split held out), and the metrics' mean and standard error.
    k_fold: int | None = None
    # Seconds the command may take from its start (command=experiment or train; with k_fold,
    # all its folds): fitting stops in time for the rest to end within it
    # (runner/training/time_limit.py). null: no limit.
    time_limit: float | None = None
    seed: int = 42
    # Where processed splits live, keyed by a checksum of data + preprocessing config.
    cache_dir: str = "${oc.env:TABULAR_RUNNER_CACHE,'~/.cache/tabular-runner'}"
    # Storage options for an object-storage cache_dir: a mapping (key, secret,
    # endpoint_url, ...) or the path of a JSON file holding one. Never logged.
    cache_credentials: Any = None
    sweep: SweepConfig = field(default_factory=SweepConfig)
    # A trained model's directory (<run>/model) for command=predict|evaluate|serve|export.
    model_dir: str | None = None
    predict: PredictConfig = field(default_factory=PredictConfig)
    explain: ExplainConfig = field(default_factory=ExplainConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    init: InitConfig = field(default_factory=InitConfig)
    # The run's trackers by name, each a node with its `_target_` (conf/logger/; typed by its
    # schema where it has one): logger=tensorboard (the default) sets `tensorboard`,
    # logger=mlflow both (runner/tracking/base.py).
    logger: dict[str, Any] = field(default_factory=dict)
    report: ReportConfig = field(default_factory=ReportConfig)

    def __post_init__(self):
        _one_of(self.command, tuple(COMMANDS), "command")
        if self.time_limit is not None:
            _require(self.time_limit > 0, "time_limit", "seconds above 0, or null", self.time_limit)
            if self.command not in ("experiment", "train"):
                raise UserError(
                    f"time_limit={self.time_limit:g} bounds command=experiment or train, not "
                    f"command={self.command}; drop time_limit"
                )
        method = self.dataset.split.method
        if self.model.family == "bagged" and method in ("group", "time"):
            raise UserError(
                f"model.family=bagged (preset=best) cuts its folds by row, which would mix "
                f"dataset.split.method={method}'s {method}s across them; use preset=default "
                "or dataset.split.method=random"
            )
        if self.k_fold is not None:
            _require(self.k_fold >= 2, "k_fold", "at least 2", self.k_fold)
            if self.command != "experiment":
                raise UserError(
                    f"k_fold={self.k_fold} cross-validates command=experiment, not "
                    f"command={self.command}; drop k_fold or use command=experiment"
                )
            if self.dataset.split.method not in ("random", "group", "time"):
                raise UserError(
                    f"k_fold={self.k_fold} cuts random, grouped or timed splits into folds; "
                    f"dataset.split.method={self.dataset.split.method} fixes each row's split: "
                    "use dataset.split.method=random, group or time"
                )
