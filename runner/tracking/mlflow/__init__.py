"""logger=mlflow: each run in MLflow, a sweep as a parent run with a child per trial.

The run's calls go to the run's background process (sidecar.py), which imports MLflow and
logs while the driver works; client.py is what that process runs (MlflowClient only); the
model goes in as an mlflow.pyfunc model (pyfunc.py). Nothing here imports MLflow itself, so
run.py can ask for the early start before Hydra composes the config.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from runner.config import MlflowConfig, component_settings
from runner.tracking.base import RunStart, SweepTrial

# What a tracked run sends besides its metrics (those that exist).
RUN_ARTIFACTS = [
    "metrics.json",
    "learning_curves.png",
    "plots",
    "report.html",
    "model.yaml",
    "model",
]
# The sweep report's files (runner/sweeps/report.py), logged with the parent run.
SWEEP_ARTIFACTS = [
    "sweep_report.md",
    "sweep_report.csv",
    "sweep_report.png",
    "sweep_epochs.png",
    "report.html",
]


class MlflowTracker:
    name = "mlflow"
    background = True  # logs from the run's background process

    def __init__(self, **keys):
        self.settings = component_settings(keys, MlflowConfig)
        self._sidecar: Any = None
        self._trial: SweepTrial | None = None
        self._sweep: Any = None  # the sweep's parent run (MlflowRun), in the sweep's driver

    @staticmethod
    def start_early(args: list[str]) -> None:
        """The background process that will log the run starts now and imports MLflow
        (about 2.5 CPU-seconds) while Hydra composes the config, not only while the run
        assembles (measured in docs/results.md)."""
        import os

        from runner.backends.horovod import launched_rank

        if launched_rank() not in (None, 0):
            return  # horovodrun's other ranks log nothing
        from runner.background import start_early

        given = [a.split("=", 1)[1] for a in args if a.startswith("logger.mlflow.tracking_uri=")]
        uri = given[-1] if given else os.environ.get("MLFLOW_TRACKING_URI", "sqlite:")
        start_early("runner.tracking.mlflow.sidecar:warm_up", uri)  # the default: SQLite

    def prepare(self, run_dir: Path, child) -> None:
        """The process that will log the run starts its imports; no run is opened until the
        command starts (a config error logs nothing)."""
        from runner.tracking.mlflow.client import tracking_uri
        from runner.tracking.mlflow.sidecar import MlflowSidecar

        trial = SweepTrial.current()
        uri = tracking_uri(self.settings, trial.sweep_dir if trial else run_dir)
        self._sidecar = MlflowSidecar(str(uri), child)

    def start(self, run: RunStart) -> None:
        self._trial = run.trial
        self._sidecar.start(self.settings, run.run_dir, run.config, run.tags, run.trial)

    def epochs(self):
        return self._sidecar.epochs()

    def log_model(self, model_dir: Path) -> None:
        if self.settings.log_model:  # as an mlflow.pyfunc model, built meanwhile
            self._sidecar.log_model(model_dir)

    def log_results(self, run_dir: Path, metrics: dict, extra: dict) -> None:
        """Metrics, the training report's figures and the run's files."""
        training = {k: v for k, v in extra.get("training", {}).items() if k != "resumed_at_epoch"}
        # The epochs' own train/ and validation/ series are logged as they run; the best
        # epoch's values go under best/ (MLflow's table shows a series' last step, not its best).
        final = {
            (f"best/{k}" if k in ("train", "validation") else k): v for k, v in metrics.items()
        }
        self._sidecar.log_metrics({**final, "training": training})
        self._sidecar.log_artifacts(run_dir, RUN_ARTIFACTS)

    def finish(self, status: str) -> None:
        if self._trial is not None:
            self._sidecar.set_tags({"runner.trial_status": status})
        self._sidecar.finish(failed=status == "failed")

    def location(self) -> str | None:
        return self._sidecar.ui_hint() if self._sidecar is not None else None

    def open_sweep(self, sweep_dir: Path, tags: dict[str, str]) -> None:
        """The sweep's parent run, opened before any trial starts (parallel trials then never
        race to create it); each trial's run finds it by the sweep dir."""
        from runner.tracking.mlflow.client import open_sweep

        self._sweep = open_sweep(self.settings, sweep_dir, tags)

    def close_sweep(self, sweep_dir: Path, table: Any, objective: str, failed: bool) -> None:
        """The trials' counts, the best objective, a child run for each trial that failed
        before it could log, the report's files; the parent FINISHED (FAILED)."""
        parent = self._sweep
        if table is not None:
            import pandas as pd

            done = table[table["status"].isin(["completed", "pruned"])]
            values = pd.to_numeric(done["objective"], errors="coerce").dropna()
            counts = table["status"].value_counts().to_dict()
            metrics = {f"trials_{k}": float(v) for k, v in counts.items()}
            if len(values):  # the table is sorted best first
                metrics[f"best/{objective}"] = float(values.iloc[0])
            parent.log_metrics({"sweep": {k: v for k, v in metrics.items() if math.isfinite(v)}})
            _record_failures(parent, Path(sweep_dir), table)
        parent.log_artifacts(Path(sweep_dir), SWEEP_ARTIFACTS)
        parent.finish(failed)


def _record_failures(parent, sweep_dir: Path, table) -> None:
    from runner.tracking.mlflow.client import record_failed_trial

    for _, row in table[table["status"] == "failed"].iterrows():
        overrides, error = row.get("overrides"), row.get("error")
        trial = SweepTrial(
            str(sweep_dir.resolve()),
            int(row["trial"]),
            overrides.split() if isinstance(overrides, str) else [],
        )
        record_failed_trial(parent, trial, error if isinstance(error, str) else "")
