"""model.family=gbm: one LightGBM booster on the training split, early-stopped on the
validation split, here or data-parallel on Ray Train's workers, each reading its own rows
through the Loader (the network's shards)."""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from runner.config import ModelConfig, TrainerConfig
from runner.errors import UserError
from runner.fast_start import import_lightgbm
from runner.loading.tensors import TensorTable
from runner.model.gbm import GBMFamily, TreeModel
from runner.model.layout import Layout
from runner.model.tree_features import (
    categorical_indices,
    feature_matrix,
    feature_names,
    tree_threads,
)
from runner.scoring.decoding import Decoders, compute_metrics
from runner.storage import Location
from runner.training import time_limit
from runner.training.advice import Knobs
from runner.training.fit_job import FitJob
from runner.training.fitted import (
    CURVE_POINTS,
    TRAIN_METRIC_ROWS,
    fitted_result,
    read_split,
    read_spread,
)
from runner.training.job import TrainingResult
from runner.training.reporting import listening, report_epoch, stopped_by_scheduler

log = logging.getLogger(__name__)


def fit_gbm(job: FitJob) -> TrainingResult:
    """gbm's TrainingResult: its trees train data-parallel on Ray with the trainer's workers
    where it has more than one and the training split has model.gbm.ray_from_rows rows, each
    worker reading its own rows through the job's loader (the network's shards)."""
    model, layout = job.model, job.layout
    check_tree_inputs(layout, model.family)
    workers = tree_workers(job.trainer, job.backend, model, layout)
    return fit_trees(job.splits, job.meta, model, job.trainer.settings, workers, loader=job.loader)


def tree_knobs(model: ModelConfig) -> tuple[int, Knobs]:
    """The trees' curve for the training advice: their rounds and settings."""
    gbm = model.gbm
    knobs = Knobs(
        "model.gbm.learning_rate", "model.gbm.early_stopping_rounds", "round", gbm.learning_rate
    )
    return gbm.early_stopping_rounds, knobs


class Stopped(Exception):
    """The trees' thread was told to stop (the network's training failed)."""


class StopWhenSet:
    """A LightGBM callback that ends boosting with Stopped once `event` is set."""

    def __init__(self, event: threading.Event):
        self.order = 10  # before anything records the round
        self.event = event

    def __call__(self, env) -> None:
        if self.event.is_set():
            raise Stopped


def tree_inputs(layout: Layout) -> int:
    """The columns trees split on: the numeric ones and the category codes."""
    return len(layout.numeric) + len(layout.categories)


def no_tree_inputs(layout: Layout) -> str:
    names = ", ".join(name for name, *_ in layout.texts)
    return (
        f"the inputs ({names}) reach trees only as a text's components or target score, and "
        "these have neither"
    )


def tree_workers(trainer, backend, model: ModelConfig, layout: Layout) -> tuple[int, dict]:
    """(workers, resources each): the trainer's on a backend with Ray from
    model.gbm.ray_from_rows training rows, else one here."""
    if not trainer.distributed or not backend.offers_ray:
        return 1, {}
    least, rows = model.gbm.ray_from_rows, layout.train_rows or 0
    if rows < least:
        log.info(
            "trees: %d training rows train in this process, not on Ray Train's workers "
            "(below model.gbm.ray_from_rows=%d: a worker group would cost more than it saves)",
            rows,
            least,
        )
        return 1, {}
    return trainer.world_size(backend), trainer.resources


def check_tree_inputs(layout: Layout, family: str) -> None:
    if not tree_inputs(layout):
        raise UserError(
            f"model.family={family} has no input trees can split on: {no_tree_inputs(layout)}; "
            "use model.family=network or ensemble"
        )


def check_tree_outputs(layout: Layout, family: str) -> None:
    outputs = layout.outputs
    if len(outputs) != 1 or not outputs[0].head.trees:
        kinds = ", ".join(f"{o.name} ({o.type})" for o in outputs)
        raise UserError(
            f"model.family={family} trains trees for one binary, category or number output; "
            f"this model has {kinds}: use model.family=network or one such output"
        )


def fit_trees(
    splits: Location,
    meta: dict,
    model: ModelConfig,
    trainer: TrainerConfig,
    workers: tuple[int, dict] = (1, {}),
    tables: tuple[TensorTable, TensorTable] | None = None,
    scored: bool = True,
    threads: int | None = None,
    stop: threading.Event | None = None,
    loader=None,
) -> TrainingResult:
    """One booster on the training split, early-stopped on the validation split: here, or
    data-parallel on Ray Train's LightGBMTrainer with `workers` = (count, resources each),
    each worker reading its share of the training rows through `loader`.
    `scored`: with its train and validation metrics (an ensemble's member goes without: the
    ensemble's own are what count). `threads`, `stop`: an ensemble's trees training beside its
    network (their thread count; the event that ends them)."""
    started = time.perf_counter()
    layout = Layout.from_meta(meta, model)
    check_tree_outputs(layout, model.family)
    skipped = [name for name, *_ in layout.texts]
    if skipped:
        log.info(
            "trees: %s enter as their numbers only (components, target score), not as tokens",
            ", ".join(skipped),
        )
    count, resources = workers
    if count > 1:
        log.info(
            "trees: LightGBM data-parallel on Ray Train, %d workers, %s each", count, resources
        )
        booster, evals, fit_seconds = _fit_on_ray(
            splits, meta, model, trainer, count, resources, loader
        )
    else:
        booster, evals, fit_seconds = _boost(
            splits, meta, model, trainer, tables=tables, threads=threads, stop=stop
        )
    run = len(next(iter(evals.get("validation", {}).values()), [])) or model.gbm.num_boost_round
    rounds = booster.best_iteration if booster.best_iteration > 0 else run
    log.info(
        "trees: %d boosting rounds kept of %d run (model.gbm.early_stopping_rounds=%d on the "
        "validation split), %.2fs",
        rounds,
        run,
        model.gbm.early_stopping_rounds,
        fit_seconds,
    )
    if tables is not None:
        train, validation = tables
    else:  # the training rows only as many as its metrics take (TRAIN_METRIC_ROWS)
        train = read_spread(splits, "train", layout, TRAIN_METRIC_ROWS)
        validation = read_split(splits, "validation", layout)
    tree = TreeModel(booster, layout, model.gbm.num_threads)
    result = fitted_result(tree, layout, meta, train, validation, evals, rounds, scored)
    result.train_seconds = time.perf_counter() - started
    result.step_seconds = fit_seconds
    result.samples_seen = (layout.train_rows or len(train)) * rounds
    result.world_size = count
    result.stopped_by_scheduler = stopped_by_scheduler()
    result.family = {"gbm_rounds": rounds, "gbm_rounds_run": run}
    if "workers" in evals:  # on Ray: each worker's rows and threads
        result.family["gbm_workers"] = evals["workers"]
    return result


def _boost(splits, meta, model, trainer, network=None, tables=None, threads=None, stop=None):
    """lightgbm.train on the splits, or on `tables` (train, validation) already read: (booster,
    the losses of each round, seconds). `network`: LightGBM's distributed settings (Ray
    Train's), with `tables` a worker's own training rows; `threads`, `stop`: fit_trees'."""
    lgb = import_lightgbm()

    layout = Layout.from_meta(meta, model)
    spec = layout.outputs[0]
    settings = model.gbm
    train, validation = tables or (
        read_split(splits, "train", layout),
        read_split(splits, "validation", layout),
    )
    names, categorical = feature_names(layout), categorical_indices(layout)

    def dataset(table: TensorTable, reference=None):
        target = table.targets[spec.name].numpy()
        weight = None  # model.class_weights, on the validation rows too (early stopping's loss)
        if spec.class_weights is not None:
            weight = np.asarray(spec.class_weights)[target.astype(np.int64)]
        return lgb.Dataset(
            feature_matrix(table.inputs, layout),
            target,
            weight=weight,
            feature_name=names,
            categorical_feature=categorical,
            reference=reference,
            free_raw_data=True,
            params={"verbosity": -1, "max_bin": 255},
        )

    train_set = dataset(train)
    params = {
        **spec.head.tree_objective(spec),
        "learning_rate": settings.learning_rate,
        "num_leaves": settings.num_leaves,
        "min_data_in_leaf": settings.min_data_in_leaf,
        "feature_fraction": settings.feature_fraction,
        "bagging_fraction": settings.bagging_fraction,
        "bagging_freq": 1 if settings.bagging_fraction < 1 else 0,
        "lambda_l2": settings.lambda_l2,
        "num_threads": threads or tree_threads(settings.num_threads),
        "seed": trainer.seed,
        "deterministic": True,
        "verbosity": -1,
        **(network or {}),
    }
    evals: dict = {}
    curve = _TrainCurve(settings.num_boost_round)
    callbacks: list = [lgb.record_evaluation(evals), curve]
    if stop is not None:
        callbacks.append(StopWhenSet(stop))
    deadline = time_limit.deadline()
    if deadline is not None:  # time_limit=: the best round so far at the limit
        callbacks.append(time_limit.LightGBMDeadline(deadline, evals))
    valid_sets: list = []
    valid_names: list[str] = []
    if len(validation):
        valid_sets.append(dataset(validation, reference=train_set))
        valid_names.append("validation")
        if settings.early_stopping_rounds:
            callbacks.append(lgb.early_stopping(settings.early_stopping_rounds, verbose=False))
        # A sweep's scheduler (ASHA) hears gbm's rounds; an ensemble's trial is its network's
        # epochs, which it heard already.
        if network is None and model.family == GBMFamily.name and listening():
            reports = _SchedulerReports(layout, meta, validation, settings, trainer, evals)
            callbacks.append(reports)
    started = time.perf_counter()
    booster = lgb.train(
        params,
        train_set,
        num_boost_round=settings.num_boost_round,
        valid_sets=valid_sets,
        valid_names=valid_names,
        callbacks=callbacks,
    )
    # Beside record_evaluation's, not in it: it empties its dict at the first round.
    evals["train_rounds"] = curve.losses
    return booster, evals, time.perf_counter() - started


class _TrainCurve:
    """A LightGBM callback that records the training loss ({round: loss}) at the first round
    and then every rounds / CURVE_POINTS (at most CURVE_POINTS + 1 points): the training split
    as a valid set is scored every round, 22 of 75 s of boosting at 700k rows."""

    def __init__(self, rounds: int):
        # An instance attribute: lgb.train gives callbacks without one an order of its own.
        self.order = 21  # after record_evaluation (20), before early stopping (30)
        self.losses: dict[int, float] = {}
        self.every = max(1, -(-rounds // CURVE_POINTS))
        self.rounds = rounds

    def __call__(self, env) -> None:
        done = env.iteration + 1
        if done % self.every == 0 or done in (1, self.rounds):
            self.losses[done] = float(env.model.eval_train()[0][2])


class _SchedulerReports:
    """A LightGBM callback that reports every num_boost_round / trainer.epochs rounds to the
    sweep's scheduler as one epoch (ASHA's rungs count trainer.epochs), with the validation
    metrics the objective names; a stop ends boosting at the best round so far."""

    def __init__(self, layout, meta, validation: TensorTable, settings, trainer, evals: dict):
        # An instance attribute: lgb.train gives callbacks without one an order of its own.
        self.order = 31  # after record_evaluation (20) and early stopping (30)
        self.evals = evals  # record_evaluation's, filled before this runs (order)
        self.every = max(1, -(-settings.num_boost_round // trainer.epochs))
        self.epochs = trainer.epochs
        self.layout, self.decoders = layout, Decoders(meta)
        self.matrix = feature_matrix(validation.inputs, layout)
        self.targets = {k: v.numpy() for k, v in validation.targets.items()}

    def __call__(self, env) -> None:
        lgb = import_lightgbm()

        done = env.iteration + 1
        if done % self.every and done != env.end_iteration:
            return
        spec = self.layout.outputs[0]
        z = env.model.predict(self.matrix, raw_score=True, num_iteration=done)
        z = np.asarray(z, dtype=np.float32).reshape(len(self.matrix), -1)
        logits = {spec.name: z}  # [rows, logits per row]
        epoch = -(-done // self.every)
        metrics = compute_metrics(self.layout, self.decoders, logits, self.targets)
        record = {"epoch": epoch, "train": {}, "validation": metrics}
        if not report_epoch(record, final=epoch >= self.epochs):
            # Stopped: the round of the lowest validation loss so far is kept, as early
            # stopping keeps its best (0-based, as LightGBM counts them).
            losses: list = next(iter(self.evals.get("validation", {}).values()), [])
            best = int(np.argmin(losses)) if losses else env.iteration
            raise lgb.callback.EarlyStopException(best, env.evaluation_result_list)


def _fit_on_ray(splits, meta, model, trainer, count: int, resources: dict, loader):
    """The booster `count` Ray Train workers train, each on its own share of the training rows
    (the loader's shards, as the network's workers read theirs; LightGBM's data-parallel tree
    learner sums histograms over the workers' network), with `resources` each; rank 0's."""
    import uuid

    lgb = import_lightgbm()
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.lightgbm import LightGBMTrainer
    from ray.util.queue import Queue

    from runner.training.ray_train import without_cleaner

    out = Path(tempfile.mkdtemp(prefix="trees-"))
    # Rank 0's booster, then every worker's facts (rank, rows, threads), on any node.
    results = Queue(maxsize=count + 1, actor_options={"num_cpus": 0})
    config = {
        "splits": splits,
        "meta": meta,
        "model": model,
        "trainer": trainer,
        "out": results,
        "loader": loader,
        "shards": loader.shards(splits.join("train"), count, equal=False),
        "threads": worker_threads(model.gbm.num_threads, resources),
    }
    try:
        without_cleaner(LightGBMTrainer)(
            _tree_worker,
            train_loop_config=config,
            scaling_config=ScalingConfig(num_workers=count, resources_per_worker=resources or None),
            run_config=RunConfig(
                name=f"trees-{uuid.uuid4().hex[:8]}",
                storage_path=str(out),
                failure_config=FailureConfig(max_failures=0),
            ),
        ).fit()
        replies = [results.get(timeout=60) for _ in range(count + 1)]
    finally:
        results.shutdown()
        shutil.rmtree(out, ignore_errors=True)
    text, best, evals, seconds = next(r[1] for r in replies if r[0] == "booster")
    workers = sorted(r[1] for r in replies if r[0] == "worker")
    log.info(
        "trees: %s",
        "; ".join(f"worker {r} read {n:,} training rows, {t} threads" for r, n, t in workers),
    )
    evals["workers"] = [{"rank": r, "train_rows": n, "threads": t} for r, n, t in workers]
    booster = lgb.Booster(model_str=text)  # its trees up to the best round
    booster.best_iteration = best
    return booster, evals, seconds


def worker_threads(num_threads: int | None, resources: dict) -> int:
    """A Ray worker's LightGBM threads: model.gbm.num_threads, else its whole CPUs of
    trainer.resources_per_worker (at least one)."""
    return num_threads or max(1, int(resources.get("CPU", 1)))


def _tree_worker(config: dict) -> None:
    import ray.train
    import ray.train.lightgbm

    context = ray.train.get_context()
    rank = context.get_world_rank()
    network = {
        **ray.train.lightgbm.get_network_params(),
        "tree_learner": "data",
        "pre_partition": True,  # each worker holds its own rows, not a copy of all of them
    }
    layout = Layout.from_meta(config["meta"], config["model"])
    loader = config["loader"]
    train = loader.table(loader.open(config["shards"][rank], layout))
    # The whole validation split on every worker: the same trees score the same rows, so every
    # worker's early stopping ends at the same round (stopping apart, they would wait forever).
    validation = read_split(config["splits"], "validation", layout)
    threads = config["threads"]
    booster, evals, seconds = _boost(
        config["splits"],
        config["meta"],
        config["model"],
        config["trainer"],
        network,
        (train, validation),
        threads,
    )
    config["out"].put(("worker", (rank, len(train), threads)))
    if rank == 0:
        config["out"].put(
            ("booster", (booster.model_to_string(), booster.best_iteration, evals, seconds))
        )
