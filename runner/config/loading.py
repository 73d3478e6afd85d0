"""loader: how a cached split becomes batches (conf/loader/)."""

from __future__ import annotations

from dataclasses import dataclass

from runner.config.checks import II, _require


@dataclass
class LocalLoaderConfig:
    _target_: str = "runner.loading.local.LocalLoader"
    batch_size: int = II("trainer.batch_size")
    shuffle: bool = True
    drop_last: bool = False
    eval_batch_size: int = 4096

    def __post_init__(self):
        _require(self.batch_size >= 1, "loader.batch_size", "at least 1", self.batch_size)
        _require(
            self.eval_batch_size >= 1, "loader.eval_batch_size", "at least 1", self.eval_batch_size
        )


@dataclass
class RayLoaderConfig(LocalLoaderConfig):
    _target_: str = "runner.loading.ray_data.RayDataLoader"
    fully_executed: bool = True  # hold each worker's share whole (false: stream it)
    window_size_bytes: int | None = None  # stream and shuffle in windows of about this size
    prefetch_batches: int = 2

    def __post_init__(self):
        super().__post_init__()
        if self.window_size_bytes is not None:
            _require(
                self.window_size_bytes >= 1,
                "loader.window_size_bytes",
                "at least 1, or null",
                self.window_size_bytes,
            )
        _require(
            self.prefetch_batches >= 0,
            "loader.prefetch_batches",
            "0 or more",
            self.prefetch_batches,
        )


@dataclass
class AutoLoaderConfig(RayLoaderConfig):
    _target_: str = (
        "runner.assembly.AutoLoader"  # Ray Data when distributed, the local reader otherwise
    )
