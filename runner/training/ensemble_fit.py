"""model.family=ensemble: the network and the trees on the same splits, then greedy ensemble
weights on the validation split (runner.model.ensemble). On Ray, the network on the
distributed trainer and the trees on Ray Train; here, side by side on big tables (each on a
share of the cores) or one after the other."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

import numpy as np
import torch

from runner.config import ModelConfig
from runner.fast_start import import_lightgbm
from runner.loading.tensors import TensorTable
from runner.model.ensemble import EnsembleFamily, EnsembleModel, select_weights
from runner.model.gbm import GBMFamily, TreeModel
from runner.model.layout import Layout
from runner.model.network import NetworkFamily
from runner.scoring.decoding import Decoders, compute_metrics
from runner.training import thread_share
from runner.training.fit_job import FitJob
from runner.training.fitted import (
    TRAIN_METRIC_ROWS,
    model_logits,
    read_split,
    read_spread,
    spread,
)
from runner.training.job import TrainingResult
from runner.training.tree_fit import (
    check_tree_outputs,
    fit_trees,
    no_tree_inputs,
    tree_inputs,
    tree_workers,
)

log = logging.getLogger(__name__)

NETWORK, GBM = NetworkFamily.name, GBMFamily.name  # its members, named by their families


def fit_ensemble(job: FitJob) -> TrainingResult | None:
    """The ensemble's TrainingResult. Its trees follow its network: on Ray Train where the
    network trained on Ray's workers (from as many rows, outside a sweep trial's placement
    group), else here, beside the network or after it."""
    model, meta, splits, trainer, layout = job.model, job.meta, job.splits, job.trainer, job.layout
    fit_network, backend, loader = job.fit_network, job.backend, job.loader
    if not tree_inputs(layout):
        network = fit_network()
        if network is None:  # under horovodrun, the ranks other than 0
            return None
        log.info(
            "ensemble: the network alone (no input trees can split on: %s)", no_tree_inputs(layout)
        )
        alone = EnsembleModel({NETWORK: network.model}, {NETWORK: 1.0}, layout)
        return replace(network, model=alone, family={"ensemble_weights": {NETWORK: 1.0}})
    split = thread_split(model, trainer, layout.train_rows)
    if split is None:
        network = fit_network()
        if network is None:
            return None
        workers = tree_workers(trainer, backend, model, layout)
        if workers[0] > 1 and outside_trial_group():
            # The trees on Ray Train with the network's workers' resources, each reading its
            # own rows; the driver reads what the weights and metrics need.
            tables = (
                read_spread(splits, "train", layout, TRAIN_METRIC_ROWS),
                read_split(splits, "validation", layout),
            )
            trees = fit_trees(
                splits, meta, model, trainer.settings, workers, tables, False, loader=loader
            )
        else:
            tables = read_split(splits, "train", layout), read_split(splits, "validation", layout)
            trees = fit_trees(splits, meta, model, trainer.settings, (1, {}), tables, False)
        return combine(network, trees, tables, meta, model)
    started = time.perf_counter()
    tables = read_split(splits, "train", layout), read_split(splits, "validation", layout)
    train, validation = tables

    def trees_and_scores(threads: int, failed: threading.Event, training: threading.Event):
        trees = fit_trees(
            splits, meta, model, trainer.settings, (1, {}), tables, False, threads, failed
        )
        scorer = TreeModel(trees.model.booster, layout, threads)
        sample = spread(train, TRAIN_METRIC_ROWS)
        scored = score_while(scorer, {"validation": validation, "train": sample}, training)
        return trees, scored

    # The trees' cores go to the network once they are done, unless trainer.num_threads is set.
    hand_over = trainer.settings.num_threads is None
    network, (trees, scored) = side_by_side(fit_network, trees_and_scores, *split, hand_over)
    return combine(network, trees, tables, meta, model, time.perf_counter() - started, scored)


def thread_split(model: ModelConfig, trainer, train_rows: int | None) -> tuple[int, int] | None:
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


def side_by_side(
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


def score_while(trees: TreeModel, tables: dict[str, TensorTable], training: threading.Event):
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


def outside_trial_group() -> bool:
    """Not inside a sweep trial's placement group, whose CPUs the trial's own workers hold
    (Ray Train's would wait for them forever; there the ensemble's trees train in this
    process). Asked once the network has trained: Ray is up by then, started by the runner."""
    import ray

    return ray.util.get_current_placement_group() is None


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
    them ready (score_while)."""
    layout = Layout.from_meta(meta, model)
    check_tree_outputs(layout, EnsembleFamily.name)
    spec = layout.outputs[0]
    members = {NETWORK: network.model, GBM: trees.model}
    ready = {f"{GBM}/{split}": logits for split, logits in (scored or {}).items()}
    train, validation = tables
    sample = spread(train, TRAIN_METRIC_ROWS)

    def space(name: str, split: str, table: TensorTable) -> np.ndarray:
        logits = ready.get(f"{name}/{split}")
        if logits is None:
            logits = model_logits(members[name], layout, table)[spec.name]
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
        weights, rounds = {NETWORK: 0.5, GBM: 0.5}, []
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
