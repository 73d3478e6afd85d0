"""logger=mlflow for a `--multirun` sweep: one parent run per sweep, opened by the sweep's
driver (launcher or Tune sweeper) before its trials start; each trial's run finds it by the
sweep dir and logs itself as its child (runner/tracking/mlflow_run.py)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

# The sweep report's files (runner/sweeps/report.py), logged with the parent run.
SWEEP_ARTIFACTS = [
    "sweep_report.md",
    "sweep_report.csv",
    "sweep_report.png",
    "sweep_epochs.png",
    "report.html",
]


def _settings(config: DictConfig):
    from runner.config import MlflowConfig

    node = OmegaConf.select(config, "logger.mlflow")
    if node is None:
        return None
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(MlflowConfig), node))


@contextmanager
def tracked_sweep(config: DictConfig, sweep_dir: Path, driver: str) -> Iterator:
    """The sweep's parent run around the driver's launch (nothing without logger=mlflow);
    after it, the sweep report's files and best objective go to the parent."""
    settings = _settings(config)
    if settings is None:
        yield None
        return
    from runner.tracking.mlflow_run import open_sweep

    tags = {"runner.command": "sweep", "runner.sweep_driver": driver}
    parent = open_sweep(settings, sweep_dir, tags)
    failed = True
    try:
        yield parent
        failed = False
    finally:
        _close(parent, Path(sweep_dir), str(config.sweep.objective), failed)


def _close(parent, sweep_dir: Path, objective: str, failed: bool) -> None:
    import pandas as pd

    report = sweep_dir / "sweep_report.csv"
    if report.exists():
        table = pd.read_csv(report)
        done = table[table["status"].isin(["completed", "pruned"])]
        values = pd.to_numeric(done["objective"], errors="coerce").dropna()
        counts = table["status"].value_counts().to_dict()
        metrics = {f"trials_{k}": float(v) for k, v in counts.items()}
        if len(values):  # the table is sorted best first
            metrics[f"best/{objective}"] = float(values.iloc[0])
        parent.log_metrics({"sweep": {k: v for k, v in metrics.items() if math.isfinite(v)}})
        _record_failures(parent, sweep_dir, table)
    parent.log_artifacts(sweep_dir, SWEEP_ARTIFACTS)
    parent.finish(failed)


def _record_failures(parent, sweep_dir: Path, table) -> None:
    from runner.tracking.mlflow_run import SweepTrial, record_failed_trial

    for _, row in table[table["status"] == "failed"].iterrows():
        overrides, error = row.get("overrides"), row.get("error")
        trial = SweepTrial(
            str(sweep_dir.resolve()),
            int(row["trial"]),
            overrides.split() if isinstance(overrides, str) else [],
        )
        record_failed_trial(parent, trial, error if isinstance(error, str) else "")
