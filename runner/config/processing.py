"""processor: the dataframe library that reads and maps the raw table (conf/processor/)."""

from __future__ import annotations

from dataclasses import dataclass

from runner.config.checks import _require


@dataclass
class PandasProcessorConfig:
    _target_: str = "runner.processing.pandas_processor.PandasProcessor"


@dataclass
class ModinProcessorConfig:
    _target_: str = "runner.processing.modin_processor.ModinProcessor"
    parallelism: int | None = None  # partitions; null lets the processor decide

    def __post_init__(self):
        if self.parallelism is not None:
            _require(
                self.parallelism >= 1,
                "processor.parallelism",
                "at least 1, or null",
                self.parallelism,
            )


@dataclass
class ArrowProcessorConfig(ModinProcessorConfig):
    _target_: str = "runner.processing.arrow_processor.ArrowProcessor"
    persist: bool = True  # keep partitions in the object store between passes; false streams them
    blocksize: str = "64MB"  # CSV bytes per partition when parallelism is null


@dataclass
class DaskProcessorConfig(ArrowProcessorConfig):
    _target_: str = "runner.processing.dask_processor.DaskProcessor"


@dataclass
class AutoProcessorConfig(ArrowProcessorConfig):
    _target_: str = "runner.assembly.AutoProcessor"  # arrow on Ray for large data, pandas otherwise
    # Below this much raw data, pandas beats spreading it over tasks (measured: bench/).
    distributed_min_bytes: int = 256 * 2**20
