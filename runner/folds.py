"""k_fold=N: cross-validation of command=experiment. The training and validation rows are cut
into N parts by the split's own row hash (runner/processing/split.py; the test rows stay
held out); run i holds part i out and trains on the rest, as a whole experiment of its own
under <run dir>/folds/fold-<i> (its own preprocessing: statistics of its training rows only,
in a cache entry of its own). Its validation split (early stopping, ensemble weights, the
decision threshold) is a cut of those training rows, so part i shapes nothing: it is scored
once the model is saved, as the `holdout` split. Then every metric's mean over the folds, its
standard error (naive, and corrected for the folds' shared training rows) and each fold's
value, for the held-out parts and for the test split.

On Ray (backend=ray, or auto where the run would use Ray) the folds run side by side as Ray
tasks, as the Ray launcher runs sweep trials: a fold's driver holds no CPU, its workers do,
and as many folds run at once as the cluster holds their workers; elsewhere one after
another in this process."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

from omegaconf import DictConfig, open_dict

log = logging.getLogger(__name__)
SPLITS = ("holdout", "test")


def cross_validate(
    cfg: DictConfig, settings, run_dir: Path, run_command, started: float | None = None
) -> dict:
    """Runs the folds through `run_command` (runner.commands'), on the run's backend;
    `settings`: cfg checked (k_fold set); `started`: when the command began (time_limit
    counts from it). Returns the folds' mean metrics, keyed like one run's (a sweep's
    objective reads validation/<metric>)."""
    from runner import outputs
    from runner.backends.early import decide_backend
    from runner.backends.ray import RayBackend

    folds = settings.k_fold
    begun = time.time() if started is None else started
    ends = None if settings.time_limit is None else begun + settings.time_limit
    runs = []
    for fold in range(folds):
        fold_cfg = cfg.copy()
        with open_dict(fold_cfg):
            fold_cfg.k_fold = None
            fold_cfg.dataset.split.folds = folds
            fold_cfg.dataset.split.fold = fold
        runs.append((fold_cfg, run_dir / "folds" / f"fold-{fold}"))
    backend = decide_backend(cfg, settings)
    if isinstance(backend, RayBackend):
        with backend:
            fold_metrics = _side_by_side(backend, runs, settings.trainer, run_command, ends)
    else:
        fold_metrics = []
        for fold, (fold_cfg, fold_dir) in enumerate(runs):
            log.info("k_fold: fold %d of %d", fold + 1, folds)
            _share_time(fold_cfg, ends, folds - fold)
            fold_metrics.append(run_command(fold_cfg, fold_dir))
    fold_dirs = [str(fold_dir) for _, fold_dir in runs]
    summary = {split: summarize([m.get(split, {}) for m in fold_metrics]) for split in SPLITS}
    # validation: the held-out parts' means, what a sweep's objective reads (validation/<metric>)
    means = {
        "validation": {k: v["mean"] for k, v in summary["holdout"].items()},
        "test": {k: v["mean"] for k, v in summary["test"].items()},
    }
    outputs.write_json(
        run_dir / "metrics.json",
        {
            "k_fold": folds,
            "cross_validation": summary["holdout"],
            "cross_validation_test": summary["test"],
            **means,
            "folds": fold_dirs,
        },
    )
    print(format_summary(summary, folds, run_dir))
    return means


def _share_time(fold_cfg: DictConfig, ends: float | None, rounds: int) -> None:
    """time_limit=: a fold's share of what is left, with `rounds` of folds still to run."""
    if ends is not None:
        with open_dict(fold_cfg):
            fold_cfg.time_limit = max(1.0, (ends - time.time()) / rounds)


def _side_by_side(backend, runs: list, trainer, run_command, ends=None) -> list[dict]:
    """The folds as Ray tasks on the backend's cluster, at most as many at once as it holds
    their workers; their metrics in fold order. `ends`: when time_limit runs out."""
    ray = backend.runtime.start()
    workers = trainer.num_workers or 1
    bundle = {k: float(v) for k, v in trainer.resources_per_worker.items()} or {"CPU": 1.0}
    cluster = ray.cluster_resources()
    at_once = max(
        1,
        int(
            min(
                (cluster.get(k, 0.0) // (v * workers) for k, v in bundle.items() if v > 0),
                default=1,
            )
        ),
    )
    log.info("k_fold: %d folds on Ray, %d at once", len(runs), min(at_once, len(runs)))
    # A fold's driver holds no CPU (its workers do); max_calls=0 keeps the worker process,
    # so a later fold skips the imports.
    task = ray.remote(num_cpus=0, max_calls=0)(_run_fold)
    pending = list(enumerate(runs))
    running: dict = {}
    done: dict[int, dict] = {}
    while pending or running:
        while pending and len(running) < at_once:
            fold, (fold_cfg, fold_dir) = pending.pop(0)
            # the rounds left: this fold, those waiting and those running
            _share_time(fold_cfg, ends, -(-(len(pending) + 1 + len(running)) // at_once))
            running[task.remote(run_command, fold_cfg, str(fold_dir))] = fold
        ready, _ = ray.wait(list(running), num_returns=1)
        for ref in ready:
            done[running.pop(ref)] = ray.get(ref)
    return [done[fold] for fold in range(len(runs))]


def _run_fold(run_command, fold_cfg: DictConfig, fold_dir: str) -> dict:
    """One fold in a Ray worker: the run attaches to the Ray this worker belongs to."""
    return run_command(fold_cfg, Path(fold_dir))


def summarize(per_fold: list[dict]) -> dict:
    """{metric: {mean, se, se_corrected, folds}} over the folds that have the metric. se: the
    sample standard deviation over sqrt(folds), as if the folds were independent; they share
    training rows, so it is too small. se_corrected: Nadeau and Bengio's (2003) corrected
    resampled estimate, the variance times 1/k + held-out rows / training rows (1/(k - 1)
    for k folds)."""
    names = list(dict.fromkeys(name for metrics in per_fold for name in metrics))
    summary = {}
    for name in names:
        values = [float(m[name]) for m in per_fold if name in m]
        mean = sum(values) / len(values)
        spread = (
            math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
            if len(values) > 1
            else math.nan
        )
        k = len(values)
        corrected = spread * math.sqrt(1 / k + 1 / (k - 1)) if k > 1 else math.nan
        summary[name] = {
            "mean": mean,
            "se": spread / math.sqrt(k),
            "se_corrected": corrected,
            "folds": values,
        }
    return summary


def format_summary(summary: dict, folds: int, run_dir: Path) -> str:
    width = max([len(name) for split in SPLITS for name in summary[split]] + [6])
    lines = [
        "",
        f"{'metric'.ljust(width)}  {folds}-fold held-out (mean ± corrected SE)    test (mean ± SE)",
    ]
    for name in summary["holdout"]:
        held = summary["holdout"][name]
        test = summary["test"].get(name)
        cells = f"{held['mean']:12.4f} ± {held['se_corrected']:.4f}"
        if test:
            cells += f"      {test['mean']:12.4f} ± {test['se']:.4f}"
        lines.append(f"{name.ljust(width)}  {cells}")
    lines += [
        "",
        f"{'metrics':<12} {run_dir / 'metrics.json'}",
        f"{'folds':<12} {run_dir / 'folds'}",
    ]
    return "\n".join(lines)
