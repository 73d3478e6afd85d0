"""The commands' own settings: sweep, serve, init, predict, explain, export, report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.config.checks import _one_of, _require, _resources

# auto: the model family's own (a network's TorchScript, the trees' LightGBM text model, an
# ensemble's members each in theirs); onnx: any built-in family as one graph
EXPORT_FORMATS = ("auto", "torchscript", "onnx", "lightgbm", "catboost", "members")


@dataclass
class SweepConfig:
    # What run.py returns to Hydra and the sweep report ranks by: <split>/<metric>,
    # e.g. val/roc_auc, val/loss, test/label/accuracy.
    objective: str = "val/loss"
    direction: str = "auto"  # maximize | minimize | auto (from the metric)
    # hydra/launcher=ray: trials at once; null = as many as the cluster's CPUs can place.
    max_concurrent: int | None = None


@dataclass
class ServeConfig:
    """command=serve: the model behind HTTP on Ray Serve."""

    host: str = "127.0.0.1"  # 0.0.0.0 to answer other machines
    port: int = 8000
    num_replicas: int = 1
    resources_per_replica: Any = None  # null: {CPU: 1}; GPU and custom resources too
    max_batch_size: int = 64  # requests that Ray Serve scores together
    # How long a batch waits to fill; 0: requests that queued while the last batch ran go together.
    batch_wait_timeout_s: float = 0.0
    max_body_bytes: int = 10 * 2**20  # a larger request body is answered 413
    # haproxy: HAProxy (the binary that ray[serve] installs) sends each request straight to a
    # replica's own HTTP server; about half the single-row latency of proxy, Ray Serve's Python
    # HTTP proxy, one actor hop more (docs/prediction-and-serving.md). Applies when
    # command=serve starts Ray; a cluster of `ray start` takes RAY_SERVE_ENABLE_HA_PROXY=1 there.
    ingress: str = "haproxy"

    def __post_init__(self):
        _one_of(self.ingress, ("proxy", "haproxy"), "serve.ingress")
        _require(1 <= self.port <= 65535, "serve.port", "in [1, 65535]", self.port)
        _require(self.num_replicas >= 1, "serve.num_replicas", "at least 1", self.num_replicas)
        _require(
            self.max_batch_size >= 1, "serve.max_batch_size", "at least 1", self.max_batch_size
        )
        _require(
            self.batch_wait_timeout_s >= 0,
            "serve.batch_wait_timeout_s",
            "0 or more",
            self.batch_wait_timeout_s,
        )
        _require(
            self.max_body_bytes >= 1, "serve.max_body_bytes", "at least 1", self.max_body_bytes
        )
        self.resources_per_replica = _resources(
            self.resources_per_replica, "serve.resources_per_replica"
        )


@dataclass
class InitConfig:
    """command=init: the inferred model config, printed and, where `path` says, written."""

    # e.g. conf/model/houses.yaml, then: python run.py model=houses (--config-dir conf for a
    # directory outside this checkout)
    path: str | None = None


@dataclass
class PredictConfig:
    """command=predict / evaluate and the test split of an experiment (batch scoring)."""

    # Raw columns copied into the predictions beside `row` (an ID, a date), e.g. [id, date].
    keep_columns: list[str] = field(default_factory=list)
    # Rows per batch an actor scores on Ray (one Parquet part each); the actors themselves
    # come from trainer.num_workers / resources_per_worker / use_gpu.
    batch_size: int = 65536
    # On Ray, a cache split (an experiment's test split) of fewer rows is scored in the
    # driver: the pool's start (a fresh process importing torch) costs more than it saves.
    pool_min_rows: int = 1_000_000

    def __post_init__(self):
        _require(self.batch_size >= 1, "predict.batch_size", "at least 1", self.batch_size)
        _require(self.pool_min_rows >= 0, "predict.pool_min_rows", "0 or more", self.pool_min_rows)
        self.keep_columns = [str(c) for c in self.keep_columns]


@dataclass
class ExplainConfig:
    """command=explain: per-row attributions (runner/scoring/explain.py)."""

    # Integrated gradients' points on the path from the baseline (the network; trees and
    # their SHAP values are exact): the attributions' sum meets the output within about
    # 0.01 logits at 64 on the tests' networks; more is slower, in proportion.
    steps: int = 64

    def __post_init__(self):
        _require(self.steps >= 1, "explain.steps", "at least 1", self.steps)


@dataclass
class ExportConfig:
    """command=export: the model as an artifact that takes the encoded tensors."""

    format: str = "auto"
    path: str | None = None  # null: <run dir>/export

    def __post_init__(self):
        _one_of(self.format, EXPORT_FORMATS, "export.format")


@dataclass
class ReportConfig:
    """What experiment and evaluate draw: evaluation plots per output (<run>/plots/), the
    test split's permutation feature importance, and <run>/report.html."""

    plots: bool = True
    importance_rows: int = 10000  # test rows shuffled per input; 0: no importance
    importance_repeats: int = 3

    def __post_init__(self):
        _require(
            self.importance_rows >= 0, "report.importance_rows", "0 or more", self.importance_rows
        )
        _require(
            self.importance_repeats >= 1,
            "report.importance_repeats",
            "at least 1",
            self.importance_repeats,
        )
