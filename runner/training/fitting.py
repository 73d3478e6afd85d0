"""How each model family fits from the cached splits (model.family).

network: the one training loop, run by the trainer (local, Horovod, DDP) on the backend.
gbm: LightGBM (runner/training/tree_fit.py), here or data-parallel on Ray Train.
ensemble: both on the same splits, then greedy ensemble weights on the validation split
(runner/training/ensemble_fit.py). Every family returns a TrainingResult whose model is a
ScoringModel; the train and validation metrics of a tree or an ensemble come from the one
scoring path (runner/training/fitted.py), as a network's validation metrics do.
"""

from __future__ import annotations

from runner.config import ModelConfig
from runner.storage import Location
from runner.training.ensemble_fit import fit_ensemble
from runner.training.tree_fit import fit_gbm


def fit_family(
    model: ModelConfig, fit_network, splits: Location, meta: dict, trainer, backend, loader
):
    """The family's TrainingResult. `fit_network()` runs the trainer (the network's loop)."""
    if model.family == "network":
        return fit_network()
    if model.family == "gbm":
        return fit_gbm(model, splits, meta, trainer, backend, loader)
    return fit_ensemble(model, fit_network, splits, meta, trainer, backend, loader)
