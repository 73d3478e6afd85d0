"""How each model family fits from the cached splits (model.family), one entry per built-in
family in FITS; a family of one's own fits itself (its `fit(job)`, runner.model.registry).

network: the one training loop, run by the trainer (local, Horovod, DDP) on the backend.
gbm: LightGBM (runner/training/tree_fit.py), here or data-parallel on Ray Train.
ensemble: both on the same splits, then greedy ensemble weights on the validation split
(runner/training/ensemble_fit.py).
catboost: CatBoost (runner/training/catboost_fit.py), here.
bagged: a portfolio of those over k folds, weighted out of fold (runner/training/bagged_fit.py). Every family returns a TrainingResult whose model is a
ScoringModel; the train and validation metrics of a tree or an ensemble come from the one
scoring path (runner/training/fitted.py), as a network's validation metrics do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runner.config import ModelConfig
from runner.model.catboost import CatBoostFamily
from runner.model.ensemble import BaggedFamily, EnsembleFamily
from runner.model.gbm import GBMFamily
from runner.model.network import NetworkFamily
from runner.model.registry import family
from runner.training.advice import Knobs
from runner.training.bagged_fit import fit_bagged
from runner.training.catboost_fit import catboost_knobs, fit_catboost
from runner.training.ensemble_fit import fit_ensemble
from runner.training.fit_job import FitJob
from runner.training.job import TrainingResult
from runner.training.tree_fit import fit_gbm, tree_knobs


@dataclass(frozen=True)
class Fit:
    fit: Callable[[FitJob], TrainingResult | None]  # None: horovodrun's ranks other than 0
    # (patience, knobs) the training advice names for the family's curve; None: the network's
    # epochs (trainer.early_stopping.patience, trainer.learning_rate)
    knobs: Callable[[ModelConfig], tuple[int, Knobs]] | None = None


FITS: dict[str, Fit] = {
    NetworkFamily.name: Fit(FitJob.fit_network),
    GBMFamily.name: Fit(fit_gbm, tree_knobs),
    EnsembleFamily.name: Fit(fit_ensemble),
    CatBoostFamily.name: Fit(fit_catboost, catboost_knobs),
    BaggedFamily.name: Fit(fit_bagged),
}


def fit_of(name: str) -> Fit:
    """How model.family=`name` fits: a built-in family's entry, else the family's own fit."""
    return FITS.get(name) or Fit(family(name).fit)  # type: ignore[attr-defined]


def fit_family(job: FitJob) -> TrainingResult | None:
    """The family's TrainingResult."""
    return fit_of(job.model.family).fit(job)
