"""k_fold=N: cross-validation of command=experiment. The training and validation rows are cut
into N parts by the split's own row hash (runner/processing/split.py; the test rows stay
held out); run i validates on part i and trains on the rest, as a whole experiment of its own
under <run dir>/folds/fold-<i> (its own preprocessing: statistics of its training rows only,
in a cache entry of its own). Then every metric's mean over the folds, its standard error
and each fold's value, for the held-out parts and for the test split."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from omegaconf import DictConfig, open_dict

log = logging.getLogger(__name__)
SPLITS = ("validation", "test")


def cross_validate(cfg: DictConfig, run_dir: Path, folds: int, run_command) -> dict:
    """Runs the folds one after another through `run_command` (runner.commands', on the run's
    backend); returns the folds' mean metrics, keyed like one run's (a sweep's objective
    reads validation/<metric>)."""
    from runner import outputs

    fold_metrics, fold_dirs = [], []
    for fold in range(folds):
        fold_cfg = cfg.copy()
        with open_dict(fold_cfg):
            fold_cfg.k_fold = None
            fold_cfg.dataset.split.folds = folds
            fold_cfg.dataset.split.fold = fold
        log.info("k_fold: fold %d of %d", fold + 1, folds)
        fold_dir = run_dir / "folds" / f"fold-{fold}"
        fold_metrics.append(run_command(fold_cfg, fold_dir))
        fold_dirs.append(str(fold_dir))
    summary = {split: summarize([m.get(split, {}) for m in fold_metrics]) for split in SPLITS}
    means = {split: {k: v["mean"] for k, v in summary[split].items()} for split in SPLITS}
    outputs.write_json(
        run_dir / "metrics.json",
        {
            "k_fold": folds,
            "cross_validation": summary["validation"],
            "cross_validation_test": summary["test"],
            **means,
            "folds": fold_dirs,
        },
    )
    print(format_summary(summary, folds, run_dir))
    return means


def summarize(per_fold: list[dict]) -> dict:
    """{metric: {mean, se, folds}} over the folds that have the metric (se: the sample
    standard deviation over sqrt(folds))."""
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
        summary[name] = {"mean": mean, "se": spread / math.sqrt(len(values)), "folds": values}
    return summary


def format_summary(summary: dict, folds: int, run_dir: Path) -> str:
    width = max([len(name) for split in SPLITS for name in summary[split]] + [6])
    lines = ["", f"{'metric'.ljust(width)}  {folds}-fold held-out (mean ± SE)    test (mean ± SE)"]
    for name in summary["validation"]:
        held = summary["validation"][name]
        test = summary["test"].get(name)
        cells = f"{held['mean']:12.4f} ± {held['se']:.4f}"
        if test:
            cells += f"      {test['mean']:12.4f} ± {test['se']:.4f}"
        lines.append(f"{name.ljust(width)}  {cells}")
    lines += [
        "",
        f"{'metrics':<12} {run_dir / 'metrics.json'}",
        f"{'folds':<12} {run_dir / 'folds'}",
    ]
    return "\n".join(lines)
