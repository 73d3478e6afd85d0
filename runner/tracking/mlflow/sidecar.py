"""MLflow off the run's critical path: a background process (runner/background.py)
imports MLflow (2.5 s of imports), opens the run and logs into it while the driver
preprocesses, trains and scores. The driver waits at most twice: for the run id when a
training worker in another process needs it, and at the end for what is still queued.

Bench section `results` (the default experiment, 10,000 rows): MLflow in the driver's own
process cost 1.56x the run's wall time; logged from here it costs the tail after report.html
(0.04 s on most runs).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path

from runner.background import Background, BackgroundError, Pending, at_end
from runner.config import MlflowConfig
from runner.errors import UserError
from runner.redact import redact_uri
from runner.tracking.base import SweepTrial
from runner.tracking.mlflow.client import EpochLog, ui_hint

log = logging.getLogger(__name__)
HERE = "runner.tracking.mlflow.sidecar"


class MlflowSidecar:
    """The driver's side of a run that a background process logs; MlflowRun's calls."""

    def __init__(self, uri: str, child: Background):
        """The child imports what logging into `uri` needs meanwhile."""
        self.uri = uri
        self.settings: MlflowConfig | None = None
        self._child = child
        self._child.call(f"{HERE}:warm_up", uri, reply=False)
        self._opened: Pending | None = None
        self._started: dict | None = None

    def start(
        self,
        settings: MlflowConfig,
        run_dir: Path,
        config: dict,
        tags: dict,
        trial: SweepTrial | None = None,
    ) -> None:
        """Opens the run (MlflowRun.start); nothing waits for it here."""
        self.settings = settings
        self._opened = self._child.call(
            f"{HERE}:open_run",
            asdict(settings),
            str(run_dir),
            config,
            tags,
            asdict(trial) if trial else None,
        )

    def _start_reply(self) -> dict:
        if self._started is None:
            assert self._opened is not None and self.settings is not None  # start() came first
            try:
                self._started = self._opened.result()
            except BackgroundError as error:
                raise UserError(
                    f"logger=mlflow could not open a run at {redact_uri(self.uri)}: "
                    f"{redact_uri(str(error))}; check logger.mlflow.tracking_uri "
                    "(or MLFLOW_TRACKING_URI), or drop logger=mlflow"
                ) from None
            log.info(
                "mlflow: run %s in experiment %r at %s",
                self._started["run_id"],
                self.settings.experiment_name,
                redact_uri(self.uri),
            )
        return self._started

    @property
    def run_id(self) -> str:
        return self._start_reply()["run_id"]

    def check(self) -> None:
        """Raises now if the run could not be opened, when that is known (no waiting)."""
        assert self._opened is not None  # start() came first
        if self._started is None and self._opened.ready():
            self._start_reply()

    def epochs(self) -> PipedEpochLog:
        return PipedEpochLog(self)

    def _send(self, name: str, *args) -> None:
        self._child.call(f"{HERE}:{name}", *args, reply=False)

    def set_tags(self, tags: dict) -> None:
        self._send("set_tags", tags)

    def log_metrics(self, metrics: dict[str, dict]) -> None:
        self._send("log_metrics", metrics)

    def log_artifacts(self, run_dir: Path, names: list[str]) -> None:
        self._send("log_artifacts", str(run_dir), names)

    def log_model(self, model_dir: Path) -> None:
        self._send("log_model", str(model_dir))

    def ui_hint(self) -> str:
        started = self._start_reply()
        return ui_hint(self.uri, started["experiment_id"], started["run_id"])

    def finish(self, failed: bool = False) -> None:
        """Waits for what is queued to be logged, then the run is closed FINISHED (FAILED)."""
        waited = time.perf_counter()
        self._send("finish", failed)
        problems = self._child.sync(HERE)
        if not failed:  # a failed command's own error is the one to report
            self._start_reply()
        for problem in problems:
            log.warning("mlflow: %s", redact_uri(problem))
        log.info("mlflow: logged; the run waited %.2fs for it", time.perf_counter() - waited)


class PipedEpochLog:
    """Rank 0's epochs when rank 0 is the driver: queued to the background process. A training
    worker in another process gets the plain EpochLog instead (pickling turns it into one)."""

    def __init__(self, sidecar: MlflowSidecar):
        self.sidecar = sidecar

    def log_epoch(self, record: dict) -> None:
        self.sidecar.check()  # a run that could not be opened ends the training with its error
        self.sidecar._send("log_epoch", record)

    def close(self) -> None:
        pass  # the run is closed by the tracker's finish

    def __reduce__(self):
        return EpochLog, (self.sidecar.uri, self.sidecar.run_id)


# --- in the background process --------------------------------------------------------------

_RUN: dict = {}  # this process's one run: {"run": MlflowRun}


def warm_up(uri: str) -> None:
    """MLflow's modules the run will need, imported before the driver asks for them."""
    import logging
    import warnings

    # Advice at pyfunc save (type hints, cloudpickle), not problems of this run: without this
    # it reaches the console (this process's stderr) on every run.
    warnings.filterwarnings("ignore", module="mlflow")
    logging.getLogger("mlflow.pyfunc").setLevel(logging.ERROR)
    import mlflow.pyfunc  # noqa: F401 - log_model
    import mlflow.tracking  # noqa: F401

    if uri.split(":", 1)[0].split("+", 1)[0] in ("sqlite", "postgresql", "mysql", "mssql"):
        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401

    import runner.tracking.mlflow.pyfunc  # noqa: F401


def open_run(settings: dict, run_dir: str, config: dict, tags: dict, trial: dict | None) -> dict:
    from runner.tracking.mlflow.client import MlflowRun

    run = MlflowRun.start(
        MlflowConfig(**settings),
        Path(run_dir),
        config,
        tags,
        SweepTrial(**trial) if trial else None,
    )
    _RUN["run"] = run
    at_end(_abandoned)
    return {"run_id": run.run_id, "experiment_id": run.experiment_id}


def _abandoned() -> None:
    """The driver's input ended before it said finish: it died, so did its run."""
    run = _RUN.pop("run", None)
    if run is not None:
        run.finish(failed=True)


def _with_run(fn):
    def logged(*args):
        run = _RUN.get("run")
        if run is not None:  # none when open_run failed: the driver reports that
            fn(run, *args)

    return logged


log_epoch = _with_run(lambda run, record: run.epochs().log_epoch(record))
set_tags = _with_run(lambda run, tags: run.set_tags(tags))
log_metrics = _with_run(lambda run, metrics: run.log_metrics(metrics))
log_artifacts = _with_run(lambda run, run_dir, names: run.log_artifacts(Path(run_dir), names))
log_model = _with_run(lambda run, model_dir: run.log_model(Path(model_dir)))


def finish(failed: bool) -> None:
    run = _RUN.pop("run", None)
    if run is not None:
        run.finish(failed=failed)
