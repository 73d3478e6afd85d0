"""A `--multirun` sweep's record in the run's trackers (runner/tracking/base.py): each tracker
opens the sweep before the driver (launcher or Tune sweeper) starts its trials and closes it
with the sweep report's rows after them (MLflow: a parent run that the trials' runs find by
the sweep dir; TensorBoard: the trials' hparams)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from omegaconf import DictConfig


@contextmanager
def tracked_sweep(config: DictConfig, sweep_dir: Path, driver: str) -> Iterator[None]:
    from runner.tracking.base import Trackers

    trackers = Trackers.from_config(config.get("logger"))
    trackers.open_sweep(Path(sweep_dir), {"runner.command": "sweep", "runner.sweep_driver": driver})
    failed = True
    try:
        yield
        failed = False
    finally:
        report = Path(sweep_dir) / "sweep_report.csv"
        table = None
        if report.exists():
            import pandas as pd

            table = pd.read_csv(report)
        trackers.close_sweep(Path(sweep_dir), table, str(config.sweep.objective), failed)
