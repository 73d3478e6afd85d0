"""logger: the trackers a run records to (conf/logger/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.config.checks import _require
from runner.errors import UserError

# What MLflow's tracking client can open ("": a plain path, or no URI: the default).
MLFLOW_SCHEMES = (
    "",
    "http",
    "https",
    "sqlite",
    "postgresql",
    "mysql",
    "mssql",
    "file",
    "databricks",
)


@dataclass
class TensorBoardConfig:
    """Each epoch's metrics as TensorBoard events (<run>/tensorboard); a sweep's trials as
    hparams (<sweep>/tensorboard)."""

    _target_: str = "runner.tracking.tensorboard.TensorBoardTracker"


@dataclass
class MlflowConfig:
    """logger=mlflow: each run (and each sweep, with a child run per trial) in MLflow."""

    _target_: str = "runner.tracking.mlflow.MlflowTracker"
    # null: MLFLOW_TRACKING_URI when set, else a SQLite store in Hydra's output root
    # (outputs/mlflow.db; `mlflow ui --backend-store-uri sqlite:///outputs/mlflow.db` shows it).
    # A server (http://host:5000) when training workers run on other machines.
    tracking_uri: str | None = None
    experiment_name: str = "tabular-runner"
    run_name: str | None = None  # null: the run dir's name (a sweep's trial: its number)
    tags: dict[str, str] = field(default_factory=dict)
    log_model: bool = True  # the model as an mlflow.pyfunc model, with the run's artifacts
    # A run to log this one under, as its child. A sweep's trials need none: they find the
    # parent run their sweep's driver opened by the sweep dir.
    parent_run_id: str | None = None

    def __post_init__(self):
        _require(bool(self.experiment_name), "logger.mlflow.experiment_name", "not empty", "")
        uri = self.tracking_uri or ""
        scheme = uri.split("://", 1)[0] if "://" in uri else ""
        if scheme.split("+", 1)[0] not in MLFLOW_SCHEMES:
            raise UserError(
                f"logger.mlflow.tracking_uri={self.tracking_uri} is not a store MLflow knows; use "
                "http(s)://host:port (a server), sqlite:///path.db, postgresql://, mysql://, "
                "mssql://, file:///dir or databricks (or null: outputs/mlflow.db)"
            )
        self.tags = {str(k): str(v) for k, v in self.tags.items()}


# Each tracker's schema by its node's name in conf/logger/ (logger_<name>_schema), where
# its `_target_` lives.
LOGGER_SCHEMAS: dict[str, Any] = {"tensorboard": TensorBoardConfig, "mlflow": MlflowConfig}
