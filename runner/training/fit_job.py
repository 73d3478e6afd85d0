"""What a model family fits from: the one argument of every family's fit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.config import ModelConfig
from runner.loading.tensors import TensorTable
from runner.model.layout import Layout
from runner.storage import Location
from runner.training.fitted import read_split
from runner.training.job import TrainingResult


@dataclass
class FitJob:
    model: ModelConfig  # model.family made concrete
    splits: Location  # the cache entry: its train, validation and test splits
    meta: dict  # the cache's meta.json (the encodings, the outputs)
    trainer: Any  # the Trainer (settings, distributed, world_size(backend), resources)
    backend: Any  # the Backend (offers_ray, is_main)
    loader: Any  # the Loader: a worker's own rows (shards, open, table)
    # The trainer running the network's one loop on (splits, meta, model, run dir): the
    # network family's fit, the ensemble's network, a bagged portfolio's folds. It returns
    # None under horovodrun's ranks other than 0.
    train_network: Callable[[Location, dict, ModelConfig, str], TrainingResult | None]
    run_dir: str  # the network's checkpoints go below it

    @property
    def layout(self) -> Layout:
        return Layout.from_meta(self.meta, self.model)

    def fit_network(self) -> TrainingResult | None:
        """The network on this job's splits."""
        return self.train_network(self.splits, self.meta, self.model, self.run_dir)

    def read(self, split: str) -> TensorTable:
        """A split's rows whole, as the batch's input groups."""
        return read_split(self.splits, split, self.layout)
