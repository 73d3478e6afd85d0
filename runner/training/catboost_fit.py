"""model.family=catboost: one CatBoost model on the training split, early-stopped on the
validation split, in the run's process (CatBoost's own threads)."""

from __future__ import annotations

import logging
import time

import numpy as np

from runner.config import ModelConfig
from runner.model.catboost import CatBoostModel, catboost_pool
from runner.model.layout import Layout
from runner.model.tree_features import feature_matrix, tree_threads
from runner.storage import Location
from runner.training import time_limit
from runner.training.advice import Knobs
from runner.training.fit_job import FitJob
from runner.training.fitted import CURVE_POINTS, fitted_result, read_split
from runner.training.job import TrainingResult
from runner.training.tree_fit import check_tree_inputs, check_tree_outputs

log = logging.getLogger(__name__)

# CatBoost's loss for each output type the trees fit.
LOSSES = {"binary": "Logloss", "category": "MultiClass", "number": "RMSE"}


def fit_catboost(job: FitJob) -> TrainingResult:
    """CatBoost's TrainingResult: the model at its best validation round."""
    return catboost_on(job.splits, job.meta, job.model, job.trainer.settings.seed)


def catboost_on(splits: Location, meta: dict, model: ModelConfig, seed: int) -> TrainingResult:
    """CatBoost on the splits of a cache entry (a run's, or a bagged portfolio's fold, perhaps
    in a Ray task)."""
    from catboost import CatBoost

    started = time.perf_counter()
    layout = Layout.from_meta(meta, model)
    check_tree_outputs(layout, model.family)
    check_tree_inputs(layout, model.family)
    train, validation = (
        read_split(splits, "train", layout),
        read_split(splits, "validation", layout),
    )
    settings = model.catboost
    params = {
        "loss_function": LOSSES[layout.outputs[0].type],
        "iterations": settings.iterations,
        "depth": settings.depth,
        "l2_leaf_reg": settings.l2_leaf_reg,
        "thread_count": tree_threads(settings.num_threads),
        "random_seed": seed,
        "allow_writing_files": False,
        "verbose": 0,
        **({"learning_rate": settings.learning_rate} if settings.learning_rate else {}),
    }
    booster = CatBoost(params)
    fitting = time.perf_counter()
    booster.fit(
        _pool(train, layout),
        eval_set=_pool(validation, layout) if len(validation) else None,
        early_stopping_rounds=settings.early_stopping_rounds or None,
        # time_limit=: the best round so far at the limit
        callbacks=[time_limit.CatBoostDeadline(at)] if (at := time_limit.deadline()) else None,
    )
    fit_seconds = time.perf_counter() - fitting
    evals = _curves(booster.get_evals_result())
    rounds = booster.tree_count_  # early stopping keeps the best round's trees
    log.info(
        "catboost: %d rounds kept of %d run (model.catboost.early_stopping_rounds=%d on the "
        "validation split), learning rate %.4g, %.2fs",
        rounds,
        len(next(iter(evals["validation"].values()), [])) or rounds,
        settings.early_stopping_rounds,
        booster.learning_rate_,
        fit_seconds,
    )
    fitted = CatBoostModel(booster, layout, settings.num_threads)
    # The training split is in memory already: fitted_result takes its metrics from a spread.
    result = fitted_result(fitted, layout, meta, train, validation, evals, rounds)
    result.train_seconds = time.perf_counter() - started
    result.step_seconds = fit_seconds
    result.samples_seen = (layout.train_rows or len(train)) * rounds
    result.family = {"catboost_rounds": rounds, "catboost_learning_rate": booster.learning_rate_}
    return result


def catboost_knobs(model: ModelConfig) -> tuple[int, Knobs]:
    """CatBoost's curve for the training advice: its rounds and settings."""
    settings = model.catboost
    knobs = Knobs(
        "model.catboost.learning_rate",
        "model.catboost.early_stopping_rounds",
        "round",
        settings.learning_rate or 0.0,
    )
    return settings.early_stopping_rounds, knobs


def _pool(table, layout: Layout):
    spec = layout.outputs[0]
    target = table.targets[spec.name].numpy()
    weight = None  # model.class_weights, on the validation rows too (early stopping's loss)
    if spec.class_weights is not None:
        weight = np.asarray(spec.class_weights)[target.astype(np.int64)]
    return catboost_pool(feature_matrix(table.inputs, layout), layout, target, weight)


def _curves(results: dict) -> dict:
    """CatBoost's losses per round as fitted_result reads LightGBM's: {"validation": {metric:
    [loss per round]}, "train_rounds": {round: loss}} (the training loss at most CURVE_POINTS
    times)."""
    learn: list = next(iter(results.get("learn", {}).values()), [])
    every = max(1, -(-len(learn) // CURVE_POINTS)) if learn else 1
    return {
        "validation": dict(results.get("validation", {})),
        "train_rounds": {i + 1: float(v) for i, v in enumerate(learn) if (i + 1) % every == 0},
    }
