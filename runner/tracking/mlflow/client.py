"""A run in MLflow, through MlflowClient only (no global active run, so a
sweep's trials in one process never log into each other).

The driver (rank 0 under horovodrun) opens the run with the resolved config as params and
the run's facts as tags; rank 0 of training logs each epoch's metrics into it (EpochLog
travels to the worker with the TrainingJob); the driver closes it with the test metrics,
the artifacts and the model as an mlflow.pyfunc model, FINISHED or FAILED.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from runner.config import MlflowConfig
from runner.redact import redact, redact_uri
from runner.tracking.base import SweepTrial

log = logging.getLogger(__name__)

MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param value
BATCH_PARAMS = 100  # log_batch's limit per call
SWEEP_DIR_TAG = "runner.sweep_dir"  # a trial's run: the sweep it belongs to
SWEEP_PARENT_TAG = "runner.sweep"  # a sweep's parent run: its sweep dir (found again on resume)
TRIAL_TAG = "runner.trial"


def default_tracking_uri(path: str | Path) -> str:
    """MLFLOW_TRACKING_URI, else a SQLite store in Hydra's output root: the nearest folder
    called `outputs` above the run (or sweep) dir, else the dir's parent."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    path = Path(path).resolve()
    root = next((p for p in path.parents if p.name == "outputs"), path.parent)
    return f"sqlite:///{root / 'mlflow.db'}"


def tracking_uri(settings: MlflowConfig, path: str | Path) -> str:
    return settings.tracking_uri or default_tracking_uri(path)


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    # MLflow prints each finished run's URL itself, credentials and all: the summary prints
    # ours, masked.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    return MlflowClient(tracking_uri=uri)


def experiment_id(uri: str, name: str) -> str:
    """The experiment's id, created when new (beside a SQLite store, its artifacts go to
    mlartifacts/ next to the database; a server decides for itself)."""
    from mlflow.exceptions import MlflowException

    client = _client(uri)
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    location = None
    if uri.startswith("sqlite:///"):
        location = (Path(uri[len("sqlite:///") :]).parent / "mlartifacts").as_uri()
    try:
        return client.create_experiment(name, artifact_location=location)
    except MlflowException:  # another process created it meanwhile
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def flatten(config: dict, prefix: str = "") -> dict[str, str]:
    """Nested config -> {"trainer.learning_rate": "0.003", ...}; lists as JSON."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{name}."))
        else:
            text = json.dumps(value) if isinstance(value, list | dict) else str(value)
            out[name] = text[:MAX_PARAM_LENGTH]
    return out


def git_commit(where: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _metrics(values: dict[str, float], step: int, prefix: str = ""):
    import math

    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    return [
        Metric(f"{prefix}{key}", float(value), now, step)
        for key, value in values.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ]


@dataclass
class EpochLog:
    """Rank 0's handle on the run: plain data, so it pickles to a remote training worker."""

    tracking_uri: str
    run_id: str

    def log_epoch(self, record: dict) -> None:
        step = record["epoch"]
        metrics = []
        for split in ("train", "validation"):
            metrics += _metrics(record[split], step, f"{split}/")
        metrics += _metrics({"learning_rate": record["learning_rate"]}, step)
        try:
            _client(self.tracking_uri).log_batch(self.run_id, metrics=metrics)
        except Exception as error:  # a tracking hiccup must not end the training
            log.warning("mlflow: epoch %d not logged (%s)", step, error)

    def close(self) -> None:
        pass  # the driver closes the run


def trial_key(trial: SweepTrial) -> dict[str, str]:
    """The tags that find a trial's run again (a resumed sweep, a failed trial)."""
    return {SWEEP_DIR_TAG: trial.sweep_dir, TRIAL_TAG: str(trial.number)}


def trial_tags(trial: SweepTrial, parent_run_id: str | None) -> dict[str, str]:
    tags = {**trial_key(trial), "runner.overrides": " ".join(redact(trial.overrides))}
    if parent_run_id:
        tags["mlflow.parentRunId"] = parent_run_id
    return tags


def trial_params(trial: SweepTrial):
    """The trial's overrides as params, credentials masked."""
    from mlflow.entities import Param

    pairs = (redact(o).split("=", 1) for o in trial.overrides if "=" in o)
    return [Param(key.lstrip("+~"), value) for key, value in pairs]


def _find_run(client, experiment: str, tags: dict[str, str]):
    """The newest run of the experiment with these tags (a sweep's parent, a trial's child)."""
    clauses = [f"tags.`{k}` = '{v}'" for k, v in tags.items()]
    runs = client.search_runs(
        [experiment], " and ".join(clauses), max_results=1, order_by=["attributes.start_time DESC"]
    )
    return runs[0] if runs else None


def _base_tags(settings: MlflowConfig, tags: dict) -> dict[str, str]:
    all_tags = {"mlflow.source.name": "run.py", **tags, **settings.tags}
    commit = git_commit(Path.cwd())
    if commit:
        all_tags["mlflow.source.git.commit"] = commit
    return {k: redact(str(v)) for k, v in all_tags.items()}


class MlflowRun:
    """The driver's side of one run."""

    def __init__(self, uri: str, experiment_id: str, run_id: str, settings: MlflowConfig):
        self.uri, self.experiment_id, self.run_id, self.settings = (
            uri,
            experiment_id,
            run_id,
            settings,
        )
        self.client = _client(uri)

    @classmethod
    def start(
        cls,
        settings: MlflowConfig,
        run_dir: Path,
        config: dict,
        tags: dict,
        trial: SweepTrial | None = None,
    ) -> MlflowRun:
        """A new run with the config (redacted, flattened) as params and the tags given. A
        sweep's trial is a child of the sweep's run; a trial that runs again (a resumed
        sweep) continues its own child run instead of logging a second one."""
        from mlflow.entities import Param

        uri = tracking_uri(settings, trial.sweep_dir if trial else run_dir)
        experiment = experiment_id(uri, settings.experiment_name)
        client = _client(uri)
        all_tags = {"runner.run_dir": str(run_dir), **tags}
        name = settings.run_name or run_dir.name
        existing = None
        if trial is not None:
            parent = settings.parent_run_id or _sweep_parent_id(client, experiment, trial.sweep_dir)
            all_tags.update(trial_tags(trial, parent))
            name = settings.run_name or f"trial {trial.number}"
            existing = _find_run(client, experiment, trial_key(trial))
        elif settings.parent_run_id:
            all_tags["mlflow.parentRunId"] = settings.parent_run_id
        all_tags["runner.tracking_uri"] = uri
        if existing is not None:
            assert trial is not None  # only a trial's run is found again
            run_id = existing.info.run_id
            client.update_run(run_id, status="RUNNING")
            log.info("mlflow: trial %d continues its run %s", trial.number, run_id)
        else:
            run = client.create_run(experiment, tags=_base_tags(settings, all_tags), run_name=name)
            run_id = run.info.run_id
            params = [Param(k, v) for k, v in flatten(redact(config)).items()]
            for i in range(0, len(params), BATCH_PARAMS):
                client.log_batch(run_id, params=params[i : i + BATCH_PARAMS])
        log.info(
            "mlflow: run %s in experiment %r at %s",
            run_id,
            settings.experiment_name,
            redact_uri(uri),
        )
        return cls(uri, experiment, run_id, settings)

    def epochs(self) -> EpochLog:
        return EpochLog(self.uri, self.run_id)

    def set_tags(self, tags: dict) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(
            self.run_id, tags=[RunTag(k, redact(str(v))) for k, v in tags.items()]
        )

    def log_metrics(self, metrics: dict[str, dict], step: int = 0) -> None:
        """{"test": {"label/roc_auc": ...}, ...} as test/label/roc_auc, ..."""
        batch = []
        for split, values in metrics.items():
            if isinstance(values, dict):
                batch += _metrics(values, step, f"{split}/")
        for i in range(0, len(batch), 1000):
            self.client.log_batch(self.run_id, metrics=batch[i : i + 1000])

    def log_artifacts(self, run_dir: Path, names: list[str]) -> None:
        for name in names:
            path = run_dir / name
            if path.is_dir():
                self.client.log_artifacts(self.run_id, str(path), name)
            elif path.is_file():
                self.client.log_artifact(self.run_id, str(path))

    def log_model(self, model_dir: Path) -> None:
        """The model as an mlflow.pyfunc model under artifacts/pyfunc:
        mlflow.pyfunc.load_model(f"runs:/{run_id}/pyfunc").predict(frame)."""
        import tempfile

        from runner.tracking.mlflow.pyfunc import save_pyfunc

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "pyfunc"
            save_pyfunc(model_dir, path)
            self.client.log_artifacts(self.run_id, str(path), "pyfunc")

    def finish(self, failed: bool = False) -> None:
        self.client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")


def record_failed_trial(parent: MlflowRun, trial: SweepTrial, error: str) -> None:
    """A child run for a trial that failed before its own run could log (a bad value in its
    overrides, a process killed at start), so the sweep's page lists every trial; nothing
    when the trial's run exists."""
    client = parent.client
    if _find_run(client, parent.experiment_id, trial_key(trial)):
        return
    tags = {
        **trial_tags(trial, parent.run_id),
        "runner.trial_status": "failed",
        "runner.error": error[:5000],  # MLflow's limit on a tag's value is 8000
    }
    run = client.create_run(
        parent.experiment_id,
        tags=_base_tags(parent.settings, tags),
        run_name=f"trial {trial.number}",
    )
    params = trial_params(trial)
    if params:
        client.log_batch(run.info.run_id, params=params)
    client.set_terminated(run.info.run_id, "FAILED")


def ui_hint(uri: str, experiment_id: str, run_id: str) -> str:
    """Where to look: the run's page on a server, the UI command for a local store."""
    if uri.startswith(("http://", "https://")):
        return f"{redact_uri(uri).rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    return f"run {run_id}; see it with: mlflow ui --backend-store-uri {redact_uri(uri)}"


def _sweep_parent_id(client, experiment: str, sweep_dir: str) -> str | None:
    # Its own tag: the children's sweep-dir tag would bury it under as many trials.
    found = _find_run(client, experiment, {SWEEP_PARENT_TAG: sweep_dir})
    return found.info.run_id if found is not None else None


def open_sweep(settings: MlflowConfig, sweep_dir: Path, tags: dict) -> MlflowRun:
    """The sweep's parent run, made by the sweep's driver before any trial starts (parallel
    trials then never race to create the store, the experiment or the parent); found again
    when the sweep resumes or an optimizing sweeper launches its next batch."""
    sweep_dir = Path(sweep_dir).resolve()
    uri = tracking_uri(settings, sweep_dir)
    experiment = experiment_id(uri, settings.experiment_name)
    client = _client(uri)
    found = _sweep_parent_id(client, experiment, str(sweep_dir))
    if found:
        client.update_run(found, status="RUNNING")
        return MlflowRun(uri, experiment, found, settings)
    all_tags = {SWEEP_PARENT_TAG: str(sweep_dir), "runner.tracking_uri": uri, **tags}
    run = client.create_run(
        experiment,
        tags=_base_tags(settings, all_tags),
        run_name=settings.run_name or f"sweep {sweep_dir.name}",
    )
    log.info("mlflow: sweep run %s at %s", run.info.run_id, redact_uri(uri))
    return MlflowRun(uri, experiment, run.info.run_id, settings)
