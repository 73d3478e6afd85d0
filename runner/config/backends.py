"""backend: who owns a command's compute (conf/backend/)."""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.config.checks import _require


@dataclass
class LocalBackendConfig:
    _target_: str = "runner.backends.local.LocalBackend"


@dataclass
class RaySettings:
    # null: RAY_ADDRESS if set, else start a local Ray; "auto": the cluster `ray start`
    # made on this machine; "host:port" or "ray://host:10001": that cluster.
    address: str | None = None
    num_cpus: float | None = None  # for a local Ray this run starts
    num_gpus: float | None = None
    object_store_memory: int | None = None  # bytes
    connect_timeout_s: float = 5.0
    # Ray's dashboard, for a local Ray this run starts (an attached cluster has its own).
    dashboard: bool = False
    dashboard_host: str = "127.0.0.1"  # 0.0.0.0 to reach it from other machines
    dashboard_port: int = 8265
    # Ray workers' own output (Ray Data executions, Horovod chatter) on this console; off: it
    # stays in Ray's session logs, and each training worker's log in <trainer.logdir>/rank-N.log.
    worker_logs: bool = False

    def __post_init__(self):
        # Ray counts a node's CPUs and GPUs in whole units (a fraction fails inside ray.init).
        _require(
            self.num_cpus is None or (self.num_cpus >= 1 and float(self.num_cpus).is_integer()),
            "backend.num_cpus",
            "a whole number, at least 1 (Ray counts a node's CPUs in whole units)",
            self.num_cpus,
        )
        _require(
            self.num_gpus is None or (self.num_gpus >= 0 and float(self.num_gpus).is_integer()),
            "backend.num_gpus",
            "a whole number (Ray counts a node's GPUs in whole units)",
            self.num_gpus,
        )
        _require(
            self.connect_timeout_s > 0, "backend.connect_timeout_s", "> 0", self.connect_timeout_s
        )
        _require(
            1 <= self.dashboard_port <= 65535,
            "backend.dashboard_port",
            "in [1, 65535]",
            self.dashboard_port,
        )


@dataclass
class RayBackendConfig(RaySettings):
    _target_: str = "runner.backends.ray.RayBackend"


@dataclass
class HorovodBackendConfig:
    _target_: str = "runner.backends.horovod.HorovodBackend"


@dataclass
class AutoBackendConfig:
    _target_: str = "runner.backends.auto.AutoBackend"
    ray: RaySettings = field(default_factory=RaySettings)  # used when it picks Ray
