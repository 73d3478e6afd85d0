"""Structured-config schemas, registered in Hydra's ConfigStore.

Every option file in conf/<group>/ starts from one of these schemas (via its
defaults list), so a misspelt key or a wrong type fails at composition time
with a message naming the key.
"""

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import II, MISSING


@dataclass
class FeatureConfig:
    name: str = MISSING
    type: str = MISSING
    # Options that change the processed data (missing values, normalization,
    # vocabulary, tokenizer). Only these enter the cache key.
    preprocessing: dict[str, Any] = field(default_factory=dict)
    # Model-side options (embedding size of a category or text feature).
    embedding_size: int | None = None


@dataclass
class SplitConfig:
    method: str = "random"  # random | column
    ratios: list[float] = field(default_factory=lambda: [0.7, 0.15, 0.15])
    seed: int = 42
    column: str | None = None  # with method=column: values train/validation/test or 0/1/2


@dataclass
class DatasetConfig:
    # Local path or fsspec URL; null means the built-in synthetic dataset.
    path: str | None = None
    format: str | None = None  # csv | parquet; inferred from the name when null
    synthetic_rows: int = 10000
    synthetic_seed: int = 0
    storage_options: dict[str, Any] = field(default_factory=dict)
    split: SplitConfig = field(default_factory=SplitConfig)


@dataclass
class ModelConfig:
    input_features: list[FeatureConfig] = MISSING
    output_features: list[FeatureConfig] = MISSING
    combiner: str = "concat"
    hidden_size: int = 64
    num_layers: int = 2
    dropout: float = 0.0
    embedding_size: int = 16


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


@dataclass
class RayBackendConfig(RaySettings):
    _target_: str = "runner.backends.ray.RayBackend"


@dataclass
class HorovodBackendConfig:
    _target_: str = "runner.backends.horovod.HorovodBackend"


@dataclass
class AutoBackendConfig:
    _target_: str = "runner.backends.auto.detect"
    ray: RaySettings = field(default_factory=RaySettings)  # used when it picks Ray


@dataclass
class PandasProcessorConfig:
    _target_: str = "runner.processing.engines.PandasProcessor"


@dataclass
class DaskProcessorConfig:
    _target_: str = "runner.processing.dask_engine.DaskProcessor"
    parallelism: int | None = None  # partitions; null lets Dask decide (64 MB CSV blocks)
    persist: bool = True  # keep partitions in the object store between passes; false streams them
    blocksize: str = "64MB"


@dataclass
class ModinProcessorConfig:
    _target_: str = "runner.processing.modin_engine.ModinProcessor"
    parallelism: int | None = None


@dataclass
class AutoProcessorConfig:
    _target_: str = "runner.backends.auto.processor"  # dask on Ray for large data, pandas otherwise
    parallelism: int | None = None
    persist: bool = True
    dask_min_bytes: int = 268435456  # 256 MiB of raw data


@dataclass
class EarlyStoppingConfig:
    # "loss" or "<output>/<metric>" on the validation split, e.g. "label/roc_auc".
    metric: str = "loss"
    patience: int = 5  # epochs without improvement; 0 disables early stopping


@dataclass
class LocalTrainerConfig:
    _target_: str = "runner.training.trainers.LocalTrainer"
    epochs: int = 30
    batch_size: int = 256
    learning_rate: float = 0.003
    optimizer: str = "adamw"  # adamw | adam | sgd
    weight_decay: float = 0.0
    early_stopping: EarlyStoppingConfig = field(default_factory=EarlyStoppingConfig)
    seed: int = II("seed")
    checkpoint_every: int = 1  # epochs between checkpoints/last.pt writes
    resume_from: str | None = None  # a run dir or a checkpoint file
    num_threads: int | None = (
        None  # torch threads per worker; null = cores / workers on the machine
    )
    progress_bar: bool = True
    use_gpu: bool = False
    precision: str = "32"  # 32 | bf16 | fp16 (autocast; fp16 with a gradient scaler on CUDA)
    # With N workers the global batch is N x batch_size: scale the rate linearly
    # (or by sqrt, or not), reached through a linear warm-up of warmup_epochs.
    learning_rate_scaling: str = "linear"
    warmup_epochs: int = 0


@dataclass
class DistributedTrainerConfig(LocalTrainerConfig):
    num_workers: int | None = None  # null: one per GPU when the cluster has GPUs, else 1
    use_gpu: Any = None  # null: true when the cluster has a GPU
    resources_per_worker: dict[str, float] = field(default_factory=lambda: {"CPU": 1.0})
    logdir: str | None = None  # worker logs; null = <run dir>/workers
    max_retries: int = 3  # restarts of failed workers, resuming from the last checkpoint
    compression: str = "none"  # none | fp16 gradient compression


@dataclass
class HorovodTrainerConfig(DistributedTrainerConfig):
    _target_: str = "runner.training.trainers.HorovodTrainer"
    # Elastic Horovod: train on as many workers as are alive, between these bounds.
    min_workers: int | None = None
    max_workers: int | None = None
    # Network interfaces Horovod's traffic between hosts uses (e.g. [eth0]); null: Horovod probes
    # the hosts for common ones (loopback when every worker is on one host).
    nics: list[str] | None = None


@dataclass
class DDPTrainerConfig(DistributedTrainerConfig):
    _target_: str = "runner.training.trainers.DDPTrainer"


@dataclass
class LocalLoaderConfig:
    _target_: str = "runner.loading.local.LocalLoader"
    batch_size: int = II("trainer.batch_size")
    shuffle: bool = True
    drop_last: bool = False
    eval_batch_size: int = 4096


@dataclass
class RayLoaderConfig(LocalLoaderConfig):
    _target_: str = "runner.loading.ray_data.RayDataLoader"
    fully_executed: bool = True  # materialize each split in the object store before training
    window_size_bytes: int | None = None  # stream and shuffle in windows of about this size
    prefetch_batches: int = 2
    seed: int = II("seed")


@dataclass
class AutoLoaderConfig(RayLoaderConfig):
    _target_: str = "runner.backends.auto.loader"  # Ray Data on Ray, the local reader otherwise


@dataclass
class SweepConfig:
    # What run.py returns to Hydra and the sweep report ranks by: <split>/<metric>,
    # e.g. val/roc_auc, val/loss, test/label/accuracy.
    objective: str = "val/loss"
    direction: str = "auto"  # maximize | minimize | auto (from the metric)
    # hydra/launcher=ray: trials at once; null = as many as the cluster's CPUs can place.
    max_concurrent: int | None = None


@dataclass
class RunConfig:
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    backend: Any = MISSING
    processor: Any = MISSING
    trainer: Any = MISSING
    loader: Any = MISSING
    command: str = "experiment"  # experiment | preprocess | train | evaluate | predict
    seed: int = 42
    # Where processed splits live, keyed by a checksum of data + preprocessing config.
    cache_dir: str = "${oc.env:TABULAR_RUNNER_CACHE,'~/.cache/tabular-runner'}"
    # Storage options for an object-storage cache_dir: a mapping (key, secret,
    # endpoint_url, ...) or the path of a JSON file holding one. Never logged.
    cache_credentials: Any = None
    sweep: SweepConfig = field(default_factory=SweepConfig)
    # A trained model's directory (<run>/model) for command=predict|evaluate.
    model_dir: str | None = None


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=RunConfig)
    cs.store(group="backend", name="local_schema", node=LocalBackendConfig)
    cs.store(group="backend", name="ray_schema", node=RayBackendConfig)
    cs.store(group="backend", name="auto_schema", node=AutoBackendConfig)
    cs.store(group="backend", name="horovod_schema", node=HorovodBackendConfig)
    cs.store(group="processor", name="pandas_schema", node=PandasProcessorConfig)
    cs.store(group="processor", name="dask_schema", node=DaskProcessorConfig)
    cs.store(group="processor", name="modin_schema", node=ModinProcessorConfig)
    cs.store(group="processor", name="auto_schema", node=AutoProcessorConfig)
    cs.store(group="trainer", name="local_schema", node=LocalTrainerConfig)
    cs.store(group="trainer", name="horovod_schema", node=HorovodTrainerConfig)
    cs.store(group="trainer", name="ddp_schema", node=DDPTrainerConfig)
    cs.store(group="loader", name="local_schema", node=LocalLoaderConfig)
    cs.store(group="loader", name="ray_schema", node=RayLoaderConfig)
    cs.store(group="loader", name="auto_schema", node=AutoLoaderConfig)
    cs.store(group="dataset", name="dataset_schema", node=DatasetConfig)
    cs.store(group="model", name="model_schema", node=ModelConfig)
