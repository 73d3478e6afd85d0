"""model.family=bagged (preset=best): a portfolio of families (model.bagging.members: LightGBM,
CatBoost, the network), each trained on k folds of the training and validation rows and
early-stopped on the fold it leaves out. Every row thus has an out-of-fold prediction from
each family; the families are weighted on those by greedy ensemble selection (Caruana, as the
ensemble family does on its validation split), and the model averages each family's fold
models, then the families by weight: one EnsembleModel of the fold models
(runner.model.ensemble BaggedFamily). The test split is scored only once it is saved.

The folds are cache entries of their own inside the run's (`bagging/<build>/fold-<i>`: its
train and validation parquet, the build named by `bagging/k<k>-s<seed>.json`), cut by a hash of
each row's id, so every family, the network's loaders included, fits a fold as it fits a run;
they are derived from the entry's rows alone, so a later run reuses them.

time_limit=: the members train cheapest first, each given an even share of the time left and
each fold its share of that: boosting and epochs stop at a fold's deadline. A member whose first
fold overran its slot by more than OVERRUN (a network whose one epoch is longer than the slot)
is left out, as is one that starts with no time left; metrics.json's training.bagging says
which, and why."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute

from runner.config import ModelConfig
from runner.errors import UserError
from runner.loading.tensors import TensorTable
from runner.model.ensemble import EnsembleModel, select_weights, weighted_logits
from runner.model.layout import Layout
from runner.processing.columns import ROW_ID
from runner.processing.row_hash import uniform_from_ids
from runner.scoring.decoding import Decoders, compute_metrics, constant_logits
from runner.storage import Location, machine_lock
from runner.training import time_limit
from runner.training.catboost_fit import catboost_on
from runner.training.ensemble_fit import outside_trial_group
from runner.training.fit_job import FitJob
from runner.training.fitted import model_logits, read_split
from runner.training.job import TrainingResult
from runner.training.reporting import report_epoch, silenced
from runner.training.tree_fit import fit_trees, tree_inputs

log = logging.getLogger(__name__)

TREES = ("gbm", "catboost")


# A member whose first fold took more than this many times its slot is left out.
OVERRUN = 2.0
# Ray retries a fold task whose worker died this many times (the other folds go on).
FOLD_RETRIES = 3
PART = "part-00000.parquet"


def fit_bagged(job: FitJob) -> TrainingResult:
    """The portfolio's TrainingResult: its validation metrics are the out-of-fold ones, over
    every training and validation row."""
    started = time.perf_counter()
    model, layout, settings = job.model, job.layout, job.model.bagging
    if getattr(job.backend, "launched_ranks", False):
        raise UserError(
            "model.family=bagged trains its folds one after another from one process; "
            "use backend=local or backend=ray, not horovodrun's ranks"
        )
    members, skipped = _members(model, layout)
    folds = _fold_entries(job, settings.folds, settings.seed)
    targets = {k: v.numpy() for k, v in folds.pool_targets.items()}
    decoders = Decoders(job.meta)
    with silenced():  # a sweep's scheduler hears the portfolio once, not each fold's epochs
        fitted = _fit_members(job, members, folds, skipped)
    for member, why in skipped.items():
        log.info("bagged: %s left out: %s", member, why)
    if not fitted:
        why = "; ".join(f"{member}: {reason}" for member, reason in skipped.items())
        raise UserError(
            f"model.family=bagged fitted no member ({why}); raise time_limit or change "
            "model.bagging.members"
        )
    fold_models = {member: models for member, (models, _, _) in fitted.items()}
    oof = {member: logits for member, (_, logits, _) in fitted.items()}
    report = {member: facts for member, (_, _, facts) in fitted.items()}
    for member in fitted:
        report[member]["out_of_fold"] = compute_metrics(layout, decoders, oof[member], targets)
    weights = _weights(layout, oof, targets)
    combined = _combined(layout, oof, weights)
    metrics = compute_metrics(layout, decoders, combined, targets)
    for member, weight in weights.items():
        report[member]["weight"] = weight
    _log_weights(layout, weights, report, metrics, settings.folds)
    by_name, fold_weights, families = {}, {}, {}
    for member, models in fold_models.items():
        for fold, fold_model in enumerate(models):
            name = f"{member}-{fold + 1}"
            by_name[name], families[name] = fold_model, member
            fold_weights[name] = weights[member] / len(models)
    ensemble = EnsembleModel(by_name, fold_weights, layout, families)
    baseline = compute_metrics(
        layout, decoders, constant_logits(layout, decoders, len(folds.parts)), targets
    )
    record = {"epoch": 1, "train": {}, "validation": metrics}
    report_epoch(record, final=True)
    return TrainingResult(
        history=[record],
        best_epoch=1,
        best_value=metrics.get("loss", float("nan")),
        validation_baseline=baseline,
        model=ensemble,
        train_seconds=time.perf_counter() - started,
        validation_scores=(combined, targets),
        family={
            "ensemble_weights": weights,
            "bagging": {
                "folds": settings.folds,
                "out_of_fold_rows": len(folds.parts),
                "members": report,
                "skipped": skipped,
            },
        },
    )


def _fit_members(job: FitJob, members: list[str], folds: _Folds, skipped: dict) -> dict:
    """{member: (its fold models, its out-of-fold logits, its report)}, in order, each given an
    even share of what time_limit leaves; a member left out goes into `skipped` with why."""
    fitted = {}
    for position, member in enumerate(members):
        left = time_limit.left()
        if left is not None and left < 1.0:
            skipped[member] = "no time left within time_limit"
            continue
        share = None if left is None else left / (len(members) - position)
        outcome = _fit_member(job, member, folds, share)
        if outcome is None:
            skipped[member] = (
                f"its first fold overran its share of time_limit ({share:.1f} s for "
                f"{len(folds.entries)} folds) more than {OVERRUN:g}x"
            )
            continue
        fitted[member] = outcome
    return fitted


def _members(model: ModelConfig, layout: Layout) -> tuple[list[str], dict[str, str]]:
    """The members that fit this table, in model.bagging.members' order, and why any other
    is left out."""
    members, skipped = [], {}
    for name in model.bagging.members:
        if name in TREES and not model.trees_fit(model.output_features or []):
            skipped[name] = "trees predict one binary, category or number output"
        elif name in TREES and not tree_inputs(layout):
            skipped[name] = "no input trees can split on"
        else:
            members.append(name)
    return members, skipped


class _Folds:
    """The folds' cache entries and metas, each pooled row's fold, and the pooled targets."""

    def __init__(self, entries: list[Location], metas: list[dict], parts: np.ndarray, targets):
        self.entries, self.metas, self.parts, self.pool_targets = entries, metas, parts, targets


def _fold_entries(job: FitJob, folds: int, seed: int) -> _Folds:
    """The training and validation rows pooled and cut into `folds` parts by their row ids'
    hash; fold i trains on the others and validates on part i. Written once per cache entry."""
    pool = pa.concat_tables(
        [job.splits.join(split).read_table() for split in ("train", "validation")],
        promote_options="default",
    )
    ids = (
        pool.column(ROW_ID).to_numpy().astype(np.int64)
        if ROW_ID in pool.column_names
        else np.arange(len(pool))
    )
    parts = np.minimum((uniform_from_ids(ids, seed) * folds).astype(np.int64), folds - 1)
    sizes = np.bincount(parts, minlength=folds)
    if sizes.min() == 0:
        raise UserError(
            f"model.bagging.folds={folds} leaves a fold without rows ({len(pool)} training and "
            "validation rows); lower model.bagging.folds or use preset=default"
        )
    home = _fold_home(job.splits.join("bagging"), f"k{folds}-s{seed}", pool, parts)
    entries, metas = [], []
    for fold in range(folds):
        rows = {"train": int(len(pool) - sizes[fold]), "validation": int(sizes[fold]), "test": 0}
        entries.append(home.join(f"fold-{fold + 1}"))
        metas.append({**job.meta, "rows": rows})
    return _Folds(entries, metas, parts, TensorTable.from_arrow(pool, job.layout).targets)


def _fold_home(root: Location, name: str, pool: pa.Table, parts: np.ndarray) -> Location:
    """The folds' directory: the build that `<name>.json` names, else one written whole by
    this run before that file (one small write, atomic on any filesystem) names it; builds on
    this machine wait for each other (sweep trials on one entry build once)."""
    pointer = f"{root.path}/{name}.json"
    digest = hashlib.sha256(root.url.encode()).hexdigest()[:16]
    locks = os.path.join(tempfile.gettempdir(), "tabular-runner-locks")
    with machine_lock(locks, f"bagging-{digest}"):
        if root.fs.exists(pointer):
            return root.join(json.loads(root.fs.cat_file(pointer))["build"])
        build = f"{name}-{uuid.uuid4().hex[:12]}"
        for fold in range(int(parts.max()) + 1):
            entry = root.join(build, f"fold-{fold + 1}")
            held = pa.array(parts == fold)
            entry.join("train").write_parquet(pool.filter(pa.compute.invert(held)), PART)
            entry.join("validation").write_parquet(pool.filter(held), PART)
        root.write_atomic(f"{name}.json", json.dumps({"build": build}).encode())
        return root.join(build)


def _member_settings(model: ModelConfig, member: str, layout: Layout) -> ModelConfig:
    """The model settings a member fits with. The network's members (ensemble_size) are fixed
    at what the whole training split gives, which is what loading the saved model computes."""
    settings = replace(model, family=member)
    if member == "network" and model.ensemble_size is None:
        settings = replace(settings, ensemble_size=model.ensemble_members(layout.train_rows)[0])
    return settings


def _fit_member(job: FitJob, member: str, folds: _Folds, share: float | None):
    """(its fold models, its out-of-fold logits by output, its report), or None when its first
    fold overran its slot. `share`: its seconds within time_limit (None: no limit). A tree
    member's folds run as Ray tasks where the run has Ray (_tree_folds_on_ray), else here one
    after another."""
    settings = _member_settings(job.model, member, job.layout)
    count = len(folds.entries)
    ends = None if share is None else time.time() + share
    on_ray = member in TREES and _tasks_on_ray(job)
    if on_ray:
        outcomes, placed = _tree_folds_on_ray(job, member, settings, folds, ends)
    else:
        outcomes, placed = [], {}
        for fold in range(count):
            at = None if ends is None else time.time() + (ends - time.time()) / (count - fold)
            outcome = _fold_here(job, member, settings, folds, fold, at)
            if at is not None and fold == 0 and outcome.seconds > OVERRUN * outcome.slot:
                return None
            outcomes.append(outcome)
    oof: dict[str, np.ndarray] = {}
    for fold, outcome in enumerate(outcomes):
        for name, values in outcome.logits.items():
            if name not in oof:
                oof[name] = np.zeros((len(folds.parts), *values.shape[1:]), dtype=np.float32)
            oof[name][folds.parts == fold] = values
    seconds = [o.seconds for o in outcomes]
    log.info(
        "bagged: %s on %d folds%s, %.1f s (%s)",
        member,
        count,
        f" as Ray tasks ({placed['cpus_each']:g} CPUs each)" if on_ray else "",
        sum(seconds),
        ", ".join(f"{s:.1f}" for s in seconds),
    )
    report = {
        "folds": count,
        "seconds": sum(seconds),
        "folds_cut_at_time_limit": sum(o.cut for o in outcomes),
        **({"ray_tasks": placed} if on_ray else {}),
    }
    return [o.model for o in outcomes], oof, report


@dataclass
class _Outcome:
    """One fold of a member: its model, its logits of the rows it left out, its seconds, its
    slot within time_limit (inf: none), and whether its deadline cut it."""

    model: Any
    logits: dict[str, np.ndarray]
    seconds: float
    slot: float
    cut: bool
    pid: int = 0  # the process that fitted it


def _fold_here(job: FitJob, member, settings, folds: _Folds, fold: int, at) -> _Outcome:
    """A fold fitted in this process, as its family fits a run (the network by the trainer)."""
    entry, meta = folds.entries[fold], folds.metas[fold]
    if member in TREES:
        return _tree_fold(member, entry, meta, settings, job.trainer.settings, None, at)
    fold_job = replace(
        job,
        model=settings,
        splits=entry,
        meta=meta,
        run_dir=str(Path(job.run_dir) / "bagging" / f"{member}-{fold + 1}"),
    )
    begun = time.time()
    with time_limit.until(at) if at is not None else nullcontext():
        result = fold_job.fit_network()
    if result is None:  # not on this rank (refused in fit_bagged)
        raise UserError("model.family=bagged: a fold returned no model on this rank")
    return _scored(result.model, entry, meta, settings, begun, at)


def _tree_fold(
    member, entry: Location, meta: dict, settings, trainer, slot: float | None, at: float | None
) -> _Outcome:
    """A tree member's fold: here, or in a Ray task (which starts its `slot` seconds when it
    starts, ending by `at` at the latest)."""
    begun = time.time()
    if slot is not None:
        at = begun + slot if at is None else min(at, begun + slot)
    # In a task, its own deadline outright: the worker's process has no command of its own.
    with time_limit.until(at, outright=slot is not None) if at is not None else nullcontext():
        if member == "gbm":
            result = fit_trees(entry, meta, settings, trainer, scored=False)
        else:
            result = catboost_on(entry, meta, settings, trainer.seed)
    return _scored(result.model, entry, meta, settings, begun, at)


def _scored(model, entry: Location, meta: dict, settings, begun: float, at) -> _Outcome:
    """The fold's outcome: its model's logits of the rows it left out (its validation split)."""
    took = time.time() - begun
    layout = Layout.from_meta(meta, settings)
    logits = model_logits(model, layout, read_split(entry, "validation", layout))
    slot = math.inf if at is None else at - begun
    return _Outcome(model, logits, took, slot, at is not None and begun + took >= at, os.getpid())


def _tasks_on_ray(job: FitJob) -> bool:
    """The run has Ray (backend=ray) and is not inside a sweep trial's placement group, whose
    CPUs the trial holds."""
    if not job.backend.offers_ray:
        return False
    job.backend.runtime.start()  # started (or attached) here if not yet
    return outside_trial_group()


def _tree_folds_on_ray(job: FitJob, member, settings, folds: _Folds, ends):
    """A tree member's folds as Ray tasks, each with an even share of the cluster's CPUs (at
    least one) as its threads; Ray retries a task whose worker dies, the others go on.
    (outcomes in fold order, how they were placed)."""
    import ray

    count = len(folds.entries)
    cpus = ray.cluster_resources().get("CPU", 1.0)
    # An even share of the cluster, but no more than its largest node holds.
    largest = max((n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n["Alive"]), default=1)
    each = max(1, min(int(cpus // count), int(largest)))
    at_once = max(1, min(count, int(cpus // each)))
    rounds = -(-count // at_once)
    slot = None if ends is None else max(0.0, ends - time.time()) / rounds
    threaded = replace(
        settings,
        gbm=replace(settings.gbm, num_threads=each),
        catboost=replace(settings.catboost, num_threads=each),
    )
    task = ray.remote(num_cpus=each, max_retries=FOLD_RETRIES)(_tree_fold)
    refs = [
        task.options(name=f"bagged-{member}-fold-{fold + 1}").remote(
            member, entry, meta, threaded, job.trainer.settings, slot, ends
        )
        for fold, (entry, meta) in enumerate(zip(folds.entries, folds.metas, strict=True))
    ]
    outcomes = ray.get(refs)
    placed = {
        "tasks": count,
        "cpus_each": each,
        "at_once": at_once,
        "processes": len({o.pid for o in outcomes}),
    }
    return outcomes, placed


def _weights(layout: Layout, oof: dict, targets: dict) -> dict[str, float]:
    """Greedy ensemble weights on the out-of-fold predictions of the one output trees fit;
    one member (or several outputs: the network alone) weighs 1."""
    if len(oof) == 1:
        return {name: 1.0 for name in oof}
    spec = layout.outputs[0]
    spaces = {name: spec.head.to_space(logits[spec.name]) for name, logits in oof.items()}
    weights, _ = select_weights(spec, spaces, targets[spec.name])
    return weights


def _combined(layout: Layout, oof: dict, weights: dict[str, float]) -> dict[str, np.ndarray]:
    """The portfolio's out-of-fold logits by output: its members' weighted average."""
    if len(oof) == 1:
        return next(iter(oof.values()))
    spec = layout.outputs[0]
    spaces = {n: spec.head.to_space(logits[spec.name]) for n, logits in oof.items() if weights[n]}
    return {spec.name: weighted_logits(spec, weights, spaces)}


def _log_weights(layout, weights: dict, report: dict, metrics: dict, folds: int) -> None:
    spec = layout.outputs[0]
    metric = f"{spec.name}/{spec.head.metrics[0]}"
    log.info(
        "bagged: weights from the out-of-fold predictions (%d folds): %s; the portfolio's "
        "out-of-fold %s %.4f",
        folds,
        ", ".join(
            f"{name} {w:.2f} ({metric} {report[name]['out_of_fold'].get(metric, float('nan')):.4f})"
            for name, w in weights.items()
        ),
        metric,
        metrics.get(metric, float("nan")),
    )
