"""How each model family fits from the cached splits (model.family).

network: the one training loop, run by the trainer (local, Horovod, DDP) on the backend.
gbm: LightGBM on the training split, early-stopped on the validation split, in this process.
ensemble: both on the same splits, then greedy ensemble weights on the validation split
(runner.model.ensemble); on Ray, the network on the distributed trainer and the trees on
Ray Train. Every family returns a TrainingResult whose model is a ScoringModel;
the train and validation metrics of a tree or an ensemble come from the one scoring path, as a
network's validation metrics do.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch

from runner.config import ModelConfig, TrainerConfig
from runner.errors import UserError
from runner.fast_start import import_lightgbm
from runner.loading.row_spans import read_spans, row_groups
from runner.loading.tensors import TensorTable
from runner.model.ensemble import EnsembleModel, select_weights
from runner.model.gbm import (
    TreeModel,
    categorical_indices,
    feature_matrix,
    feature_names,
    tree_threads,
)
from runner.model.layout import Layout
from runner.scoring.decoding import Decoders, compute_metrics, constant_logits
from runner.storage import Location
from runner.training import thread_share
from runner.training.job import TrainingResult
from runner.training.reporting import listening, report_epoch, stopped_by_scheduler

log = logging.getLogger(__name__)


def fit_family(
    model: ModelConfig, fit_network, splits: Location, meta: dict, trainer, backend, loader
):
    """The family's TrainingResult. `fit_network()` runs the trainer (the network's loop); gbm's
    trees train data-parallel on Ray with the trainer's workers where it has more than one and
    the training split has model.gbm.ray_from_rows rows, each worker reading its own rows
    through `loader` (the network's shards). The ensemble's trees follow its network: on Ray
    Train where the network trained on Ray's workers (from as many rows, outside a sweep
    trial's placement group), else here, beside the network or after it."""
    if model.family == "network":
        return fit_network()
    layout = Layout.from_meta(meta, model)
    if model.family == "gbm":
        if not tree_inputs(layout):
            raise UserError(
                f"model.family=gbm has no input trees can split on: {_no_tree_inputs(layout)}; "
                "use model.family=network or ensemble"
            )
        workers = _tree_workers(trainer, backend, model, layout)
        return fit_trees(splits, meta, model, trainer.settings, workers, loader=loader)
    if not tree_inputs(layout):
        network = fit_network()
        if network is None:  # under horovodrun, the ranks other than 0
            return None
        log.info(
            "ensemble: the network alone (no input trees can split on: %s)", _no_tree_inputs(layout)
        )
        alone = EnsembleModel({"network": network.model}, {"network": 1.0}, layout)
        return replace(network, model=alone, family={"ensemble_weights": {"network": 1.0}})
    split = _thread_split(model, trainer, layout.train_rows)
    if split is None:
        network = fit_network()
        if network is None:
            return None
        workers = _tree_workers(trainer, backend, model, layout)
        if workers[0] > 1 and _outside_trial_group():
            # The trees on Ray Train with the network's workers' resources, each reading its
            # own rows; the driver reads what the weights and metrics need.
            tables = (
                _read_spread(splits, "train", layout, TRAIN_METRIC_ROWS),
                _read(splits, "validation", layout),
            )
            trees = fit_trees(
                splits, meta, model, trainer.settings, workers, tables, False, loader=loader
            )
        else:
            tables = _read(splits, "train", layout), _read(splits, "validation", layout)
            trees = fit_trees(splits, meta, model, trainer.settings, (1, {}), tables, False)
        return combine(network, trees, tables, meta, model)
    started = time.perf_counter()
    tables = _read(splits, "train", layout), _read(splits, "validation", layout)
    train, validation = tables

    def trees_and_scores(threads: int, failed: threading.Event, training: threading.Event):
        trees = fit_trees(
            splits, meta, model, trainer.settings, (1, {}), tables, False, threads, failed
        )
        scorer = TreeModel(trees.model.booster, layout, threads)
        sample = _spread(train, TRAIN_METRIC_ROWS)
        scored = _score_while(scorer, {"validation": validation, "train": sample}, training)
        return trees, scored

    # The trees' cores go to the network once they are done, unless trainer.num_threads is set.
    hand_over = trainer.settings.num_threads is None
    network, (trees, scored) = _side_by_side(fit_network, trees_and_scores, *split, hand_over)
    return combine(network, trees, tables, meta, model, time.perf_counter() - started, scored)


def _thread_split(model: ModelConfig, trainer, train_rows: int | None) -> tuple[int, int] | None:
    """(network threads, tree threads) when the ensemble's members train side by side: from
    model.ensemble_side_by_side_rows training rows, with the network in this process (the
    local trainer) and at least two cores in the process's share (torch's count: Ray's, a
    trial's or the scoring pool's OMP_NUM_THREADS where one is set). The trees get half
    unless model.gbm.num_threads says, the network the rest unless trainer.num_threads says.
    None: one after the other, each on every core."""
    least = model.ensemble_side_by_side_rows
    cores = torch.get_num_threads()
    if least is None or (train_rows or 0) < least or trainer.distributed or cores < 2:
        return None
    trees = model.gbm.num_threads or cores // 2
    return trainer.settings.num_threads or max(1, cores - trees), trees


def _side_by_side(
    fit_network, fit_trees_on, network_threads: int, tree_threads: int, hand_over: bool = True
):
    """(network's TrainingResult, what fit_trees_on returned), trained at once: the trees in a
    thread (LightGBM releases the GIL while it boosts) on `tree_threads`, the network here on
    the rest. The network gains little from its last cores and the trees nearly their count,
    so the two overlap for less than they add up to; once the trees are done (and have scored
    what the weights need), the network takes every core from its next epoch
    (runner/training/thread_share.py) where `hand_over`. fit_trees_on(threads, failed, training):
    `failed` is set if the network fails, `training` while it trains. The trees keep their
    thread count to the end: a booster's reset_parameter half-way changed the trees after it
    (tried), and LightGBM sets OpenMP's count again on every call."""
    import_lightgbm()  # here: imported in the thread, it would hold the network's start

    failed, training = threading.Event(), threading.Event()
    outcome: dict = {}

    def trees() -> None:
        try:
            outcome["trees"] = fit_trees_on(tree_threads, failed, training)
            if hand_over and training.is_set():  # the network: every core from its next epoch
                thread_share.offer(cores)
        except BaseException as error:  # raised here once the network is done
            outcome["error"] = error

    log.info(
        "ensemble: the network (%d threads) and the trees (%d) train side by side "
        "(model.ensemble_side_by_side_rows)",
        network_threads,
        tree_threads,
    )
    cores = torch.get_num_threads()
    training.set()
    thread = threading.Thread(target=trees, name="ensemble-trees", daemon=True)
    thread.start()
    torch.set_num_threads(network_threads)  # the local trainer keeps it (trainer.num_threads)
    try:
        network = fit_network()
    except BaseException:
        failed.set()
        raise
    finally:
        training.clear()
        thread.join()
        thread_share.take()  # an offer the network no longer took
        torch.set_num_threads(cores)
    if "error" in outcome:
        raise outcome["error"]
    return network, outcome["trees"]


# The trees score in their thread in chunks this big, so that a network that finishes takes
# the rest with every core after at most one chunk's wait.
SCORE_WHILE_ROWS = 16384


def _score_while(trees: TreeModel, tables: dict[str, TensorTable], training: threading.Event):
    """{table: the trees' logits of its rows}, scored while `training` is set: the ensemble's
    trees, done before the network, score the validation split and the training sample the
    weights and metrics need on the cores they have. A table not done when it clears is left
    to combine(), with every core."""
    name = trees.layout.outputs[0].name
    done: dict[str, np.ndarray] = {}
    for split, table in tables.items():
        parts = []
        for chunk in table.chunks(SCORE_WHILE_ROWS):
            if not training.is_set():
                return done
            parts.append(trees.raw_scores(chunk.inputs)[name])
        if parts:
            done[split] = np.concatenate(parts)
    if done:
        log.info("trees: scored %s beside the network", " and ".join(done))
    return done


class _Stopped(Exception):
    """The trees' thread was told to stop (the network's training failed)."""


class _StopWhenSet:
    """A LightGBM callback that ends boosting with _Stopped once `event` is set."""

    def __init__(self, event: threading.Event):
        self.order = 10  # before anything records the round
        self.event = event

    def __call__(self, env) -> None:
        if self.event.is_set():
            raise _Stopped


def tree_inputs(layout: Layout) -> int:
    """The columns trees split on: the numeric ones and the category codes."""
    return len(layout.numeric) + len(layout.categories)


def _no_tree_inputs(layout: Layout) -> str:
    names = ", ".join(name for name, *_ in layout.texts)
    return (
        f"the inputs ({names}) reach trees only as a text's components or target score, and "
        "these have neither"
    )


def _outside_trial_group() -> bool:
    """Not inside a sweep trial's placement group, whose CPUs the trial's own workers hold
    (Ray Train's would wait for them forever; there the ensemble's trees train in this
    process). Asked once the network has trained: Ray is up by then, started by the runner."""
    import ray

    return ray.util.get_current_placement_group() is None


def _tree_workers(trainer, backend, model: ModelConfig, layout: Layout) -> tuple[int, dict]:
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


def check_tree_outputs(layout: Layout, family: str) -> None:
    outputs = layout.outputs
    if len(outputs) != 1 or not outputs[0].head.trees:
        kinds = ", ".join(f"{o.name} ({o.type})" for o in outputs)
        raise UserError(
            f"model.family={family} trains trees for one binary, category or number output; "
            f"this model has {kinds}: use model.family=network or one such output"
        )


def _read(splits: Location, split: str, layout: Layout):
    """A split's rows as the batch's input groups."""
    return TensorTable.from_arrow(splits.join(split).read_table(), layout)


def _read_spread(splits: Location, split: str, layout: Layout, most: int) -> TensorTable:
    """At most `most` of a split's rows, evenly spaced (as _spread picks them), read a row group
    at a time: the driver of trees trained on Ray never holds the whole split."""
    groups = row_groups(splits.join(split))
    rows = sum(g[2] for g in groups)
    if rows <= most:
        return _read(splits, split, layout)
    wanted = _spread_index(rows, most).numpy()
    parts, offset = [], 0
    for path, index, count, _ in groups:
        local = wanted[(wanted >= offset) & (wanted < offset + count)] - offset
        if len(local):
            table = read_spans(splits.join(split), [(path, index, 0, count)])
            parts.append(table.take(pa.array(local)))
        offset += count
    return TensorTable.from_arrow(pa.concat_tables(parts), layout)


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
        train = _read_spread(splits, "train", layout, TRAIN_METRIC_ROWS)
        validation = _read(splits, "validation", layout)
    tree = TreeModel(booster, layout, model.gbm.num_threads)
    result = _result(tree, layout, meta, train, validation, evals, rounds, scored)
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
        _read(splits, "train", layout),
        _read(splits, "validation", layout),
    )
    names, categorical = feature_names(layout), categorical_indices(layout)

    def dataset(table: TensorTable, reference=None):
        target = table.targets[spec.name].numpy()
        return lgb.Dataset(
            feature_matrix(table.inputs, layout),
            target,
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
        callbacks.append(_StopWhenSet(stop))
    valid_sets: list = []
    valid_names: list[str] = []
    if len(validation):
        valid_sets.append(dataset(validation, reference=train_set))
        valid_names.append("validation")
        if settings.early_stopping_rounds:
            callbacks.append(lgb.early_stopping(settings.early_stopping_rounds, verbose=False))
        # A sweep's scheduler (ASHA) hears gbm's rounds; an ensemble's trial is its network's
        # epochs, which it heard already.
        if network is None and model.family == "gbm" and listening():
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
    validation = _read(config["splits"], "validation", layout)
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


def _result(model, layout, meta, train, validation, evals, best, scored=True) -> TrainingResult:
    """A TrainingResult for a model fitted outside the loop: the loss curve at the rounds the
    training loss was recorded (at most CURVE_POINTS), and the scoring path's metrics on
    train and validation at the kept round, as the entry of that round."""
    decoders = Decoders(meta)
    metrics: dict[str, dict] = {"train": {}, "validation": {}}
    if scored:
        tables = (("train", _spread(train, TRAIN_METRIC_ROWS)), ("validation", validation))
        metrics = {name: _metrics(model, layout, decoders, t) for name, t in tables}
    train_losses: dict[int, float] = evals.get("train_rounds", {})
    validation_losses: list = next(iter(evals.get("validation", {}).values()), [])
    history = []
    for i in sorted({*train_losses, best}):
        entry: dict = {"epoch": i, "train": {}, "validation": {}}
        if i in train_losses:
            entry["train"] = {"loss": train_losses[i]}
        if i <= len(validation_losses):
            entry["validation"] = {"loss": float(validation_losses[i - 1])}
        history.append({"epoch": i, **metrics} if i == best else entry)
    baseline = {}
    if len(validation):
        targets = {k: v.numpy() for k, v in validation.targets.items()}
        constants = constant_logits(layout, decoders, len(validation))
        baseline = compute_metrics(layout, decoders, constants, targets)
    return TrainingResult(
        history=history,
        best_epoch=best,
        best_value=metrics["validation"].get("loss", float("nan")),
        stopped_early=best < len(validation_losses),
        validation_baseline=baseline,
        model=model,
    )


# A model fitted outside the loop (trees, the ensemble) records its training loss about this
# many times, and its training metrics from at most TRAIN_METRIC_ROWS training rows, evenly
# spaced: scoring 700k rows with 1,700 trees took 46 of the 80 s between boosting and the
# test split at 1M rows (the network's come from its epochs' running sums). Validation and
# test are scored whole.
CURVE_POINTS = 100
TRAIN_METRIC_ROWS = 100_000


def _spread_index(rows: int, most: int) -> torch.Tensor:
    """The positions of `most` evenly spaced rows of `rows` (the first and the last among them)."""
    return torch.linspace(0, rows - 1, most).round().long()


def _spread(table: TensorTable, most: int) -> TensorTable:
    """At most `most` rows of `table`, evenly spaced (all when fewer)."""
    if len(table) <= most:
        return table
    index = _spread_index(len(table), most)
    inputs, targets = table.take(index)
    return TensorTable(inputs, targets, table.row_ids.index_select(0, index))


def _metrics(model, layout: Layout, decoders: Decoders, table: TensorTable) -> dict[str, float]:
    if not len(table):
        return {}
    logits = _logits(model, layout, table)
    targets = {k: v.numpy() for k, v in table.targets.items()}
    return compute_metrics(layout, decoders, logits, targets)


def _logits(model, layout: Layout, table: TensorTable) -> dict[str, np.ndarray]:
    from runner.scoring.forward import score

    return score(model, table.chunks(65536), layout).logits


def combine(
    network: TrainingResult,
    trees: TrainingResult,
    tables,
    meta,
    model,
    seconds: float | None = None,
    scored: dict[str, np.ndarray] | None = None,
) -> TrainingResult:
    """The ensemble: its weights from the members' validation predictions; its metrics from
    the one scoring path. `tables`: the (train, validation) splits, read once for both;
    `seconds`: the members' training wall where they trained side by side; `scored`: the
    trees' logits of the validation split and the training sample, where their thread had
    them ready (_score_while)."""
    layout = Layout.from_meta(meta, model)
    check_tree_outputs(layout, "ensemble")
    spec = layout.outputs[0]
    members = {"network": network.model, "gbm": trees.model}
    ready = {f"gbm/{split}": logits for split, logits in (scored or {}).items()}
    train, validation = tables
    sample = _spread(train, TRAIN_METRIC_ROWS)

    def space(name: str, split: str, table: TensorTable) -> np.ndarray:
        logits = ready.get(f"{name}/{split}")
        if logits is None:
            logits = _logits(members[name], layout, table)[spec.name]
        return spec.head.to_space(logits)

    decoders = Decoders(meta)
    figures: dict[str, dict] = {}  # each member's validation metrics, which the weights follow
    if len(validation):
        predictions = {name: space(name, "validation", validation) for name in members}
        target = validation.targets[spec.name].numpy()
        weights, rounds = select_weights(spec, predictions, target)
        targets = {k: v.numpy() for k, v in validation.targets.items()}
        for name, prediction in predictions.items():
            logits = {spec.name: spec.head.to_logits(prediction).astype(np.float32)}
            figures[name] = compute_metrics(layout, decoders, logits, targets)
    else:
        weights, rounds = {"network": 0.5, "gbm": 0.5}, []
    metric = f"{spec.name}/{spec.head.metrics[0]}"
    log.info(
        "ensemble weights from the validation split (%d greedy rounds): %s",
        len(rounds),
        ", ".join(
            f"{name} {w:.2f}"
            + (
                f" ({metric} {figures[name][metric]:.4f})"
                if metric in figures.get(name, {})
                else ""
            )
            for name, w in weights.items()
        ),
    )
    ensemble = EnsembleModel(members, weights, layout)
    metrics: dict[str, dict] = {"train": {}, "validation": {}}
    # The same figures as scoring the ensemble itself: it averages its members' predictions.
    if len(sample):
        spaces = {n: space(n, "train", sample) for n in members if weights[n] > 0}
        logits = {spec.name: ensemble.logits_from(spec, spaces)}
        targets = {k: v.numpy() for k, v in sample.targets.items()}
        metrics["train"] = compute_metrics(layout, decoders, logits, targets)
    if len(validation):  # from the members' predictions the weights were chosen on
        logits = {spec.name: ensemble.logits_from(spec, predictions)}
        targets = {k: v.numpy() for k, v in validation.targets.items()}
        metrics["validation"] = compute_metrics(layout, decoders, logits, targets)
        if metric in metrics["validation"]:
            log.info(
                "ensemble: %s %.4f on the validation split", metric, metrics["validation"][metric]
            )
    history = [dict(h) for h in network.history]
    best = network.best_epoch
    for entry in history:
        if entry["epoch"] == best:
            entry.update(metrics)
    return replace(
        network,
        history=history,
        model=ensemble,
        train_seconds=seconds or network.train_seconds + trees.train_seconds,
        family={
            "ensemble_weights": weights,
            "gbm_rounds": trees.best_epoch,
            # Each member's validation metrics: what the weights were chosen from.
            "ensemble_members_validation": figures,
            **(
                {"gbm_workers": trees.family["gbm_workers"]}
                if "gbm_workers" in trees.family
                else {}
            ),
        },
    )
