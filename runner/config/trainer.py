"""trainer: the one loop's hyperparameters and how it runs (conf/trainer/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from runner.config.checks import II, _one_of, _require, _resources, component_settings

PLACEMENTS = ("spread", "pack")


OPTIMIZERS = ("adamw", "adam", "sgd")


PRECISIONS = ("auto", "32", "bf16", "fp16")


SCHEDULES = ("constant", "cosine")


LR_SCALING = ("linear", "sqrt", "none")


COMPRESSIONS = ("none", "fp16")


@dataclass
class EarlyStoppingConfig:
    # "loss" or "<output>/<metric>" on the validation split, e.g. "label/roc_auc".
    metric: str = "loss"
    patience: int = 5  # epochs without improvement; 0 disables early stopping

    def __post_init__(self):
        _require(self.patience >= 0, "trainer.early_stopping.patience", "0 or more", self.patience)


@dataclass
class TrainerConfig:
    """One contract for every trainer option: the same keys, distributed ones included. Each
    option (conf/trainer/) is a subclass below that names its class in `_target_`; this one is
    trainer=auto: one worker -> this process; more (or null with GPUs in the cluster) on Ray
    -> Horovod on Ray; under horovodrun -> Horovod (runner.assembly.AutoTrainer)."""

    # Which trainer it is, for the checks made before any trainer exists (the early Ray start,
    # the Tune sweeper's placement): a class attribute, not a key.
    kind: ClassVar[str] = "auto"
    _target_: str = "runner.assembly.AutoTrainer"
    epochs: int = 30
    batch_size: int = 256  # per worker
    learning_rate: float = 0.003
    optimizer: str = "adamw"  # adamw | adam | sgd
    weight_decay: float = 0.0
    # constant | cosine (decays the rate over trainer.epochs, epoch by epoch, to near 0)
    schedule: str = "constant"
    # Weights averaged (an exponential moving average, runner/training/averaging.py) over about
    # this many epochs of steps; validation, the best checkpoint and predictions use the average.
    # 0 turns it off.
    ema_epochs: float = 1.0
    early_stopping: EarlyStoppingConfig = field(default_factory=EarlyStoppingConfig)
    seed: int = II("seed")
    checkpoint_every: int = 1  # epochs between checkpoints/last.pt writes
    resume_from: str | None = None  # a run dir or a checkpoint file
    num_threads: int | None = (
        None  # torch threads per worker; null = cores / workers on the machine
    )
    progress_bar: bool = True
    # Training steps' autocast: 32 | bf16 | fp16 (fp16 with a gradient scaler on CUDA) | auto
    # (bf16 on a CPU that multiplies bf16 natively, else 32; runner/training/step.py). Validation,
    # test and predictions run in full precision, as the saved model answers.
    precision: str = "auto"
    # With N workers the global batch is N x batch_size: scale the rate linearly
    # (or by sqrt, or not), reached through a linear warm-up of warmup_epochs.
    learning_rate_scaling: str = "linear"
    warmup_epochs: int = 0
    # Distributed keys (ignored by one in-process worker):
    num_workers: int | None = None  # null: one per GPU when the cluster has GPUs, else 1
    use_gpu: bool | None = None  # null: true when the cluster (or this machine) has a GPU
    # Any Ray resource, custom ones too (e.g. {CPU: 1, highmem: 1}); null: {CPU: 1}. Any, not a
    # typed dict, so that `trainer.resources_per_worker={...}` replaces it whole.
    resources_per_worker: Any = None
    placement: str | None = None  # spread | pack; null: spread on CPU, pack on GPU
    logdir: str | None = None  # worker logs (rank-N.log); null = <run dir>/workers
    max_retries: int = 3  # restarts after a lost worker, resuming from the last checkpoint
    compression: str = "none"  # none | fp16 gradient compression
    # Elastic Horovod: train on as many workers as are alive, between these bounds.
    min_workers: int | None = None
    max_workers: int | None = None
    # Network interfaces Horovod's traffic between hosts uses (e.g. [eth0]); null: Horovod probes
    # the hosts for common ones (loopback when every worker is on one host).
    nics: list[str] | None = None
    # Horovod Timeline (Chrome trace JSON of every collective) written here by rank 0.
    timeline: str | None = None

    def __post_init__(self):
        t = "trainer"
        _require(self.epochs >= 1, f"{t}.epochs", "at least 1", self.epochs)
        _require(self.batch_size >= 1, f"{t}.batch_size", "at least 1", self.batch_size)
        _require(self.learning_rate > 0, f"{t}.learning_rate", "> 0", self.learning_rate)
        _one_of(self.optimizer, OPTIMIZERS, f"{t}.optimizer")
        _require(self.weight_decay >= 0, f"{t}.weight_decay", "0 or more", self.weight_decay)
        _one_of(self.schedule, SCHEDULES, f"{t}.schedule")
        _require(self.ema_epochs >= 0, f"{t}.ema_epochs", "0 or more (0: off)", self.ema_epochs)
        _require(
            self.checkpoint_every >= 1, f"{t}.checkpoint_every", "at least 1", self.checkpoint_every
        )
        if self.num_threads is not None:
            _require(
                self.num_threads >= 1, f"{t}.num_threads", "at least 1, or null", self.num_threads
            )
        _one_of(str(self.precision), PRECISIONS, f"{t}.precision")
        _one_of(self.learning_rate_scaling, LR_SCALING, f"{t}.learning_rate_scaling")
        _require(self.warmup_epochs >= 0, f"{t}.warmup_epochs", "0 or more", self.warmup_epochs)
        for key in ("num_workers", "min_workers", "max_workers"):
            value = getattr(self, key)
            if value is not None:
                _require(value >= 1, f"{t}.{key}", "at least 1, or null", value)
        if self.min_workers and self.max_workers:
            _require(
                self.max_workers >= self.min_workers,
                f"{t}.max_workers",
                f"at least trainer.min_workers={self.min_workers}",
                self.max_workers,
            )
        self.resources_per_worker = _resources(
            self.resources_per_worker, f"{t}.resources_per_worker"
        )
        if self.placement is not None:
            _one_of(self.placement, PLACEMENTS, f"{t}.placement")
        _require(self.max_retries >= 0, f"{t}.max_retries", "0 or more", self.max_retries)
        _one_of(self.compression, COMPRESSIONS, f"{t}.compression")

    @property
    def elastic(self) -> bool:
        return bool(self.min_workers)

    def many_workers(self) -> str | None:
        """Why this run needs several workers (hence Ray), if it does."""
        if self.num_workers and self.num_workers > 1:
            return f"trainer.num_workers={self.num_workers}"
        if self.elastic:
            return f"trainer.min_workers={self.min_workers}"
        return None

    def wants_ray(self) -> str | None:
        """Why the trainer will need Ray, if it will (under horovodrun it never starts it)."""
        if self.kind in ("horovod", "ddp"):
            return f"trainer={self.kind}"
        return self.many_workers() if self.kind == "auto" else None

    @property
    def most_workers(self) -> int:
        """The most workers the run may train on at once (elastic runs: max_workers)."""
        return self.max_workers or self.num_workers or 1

    def cpus_wanted(self) -> float:
        """CPUs for the workers, and one besides them for what feeds them (Ray Data's tasks,
        the scoring pool)."""
        return self.most_workers * self.resources_per_worker.get("CPU", 0.0) + 1

    @property
    def cpus_per_worker(self) -> float:
        """A worker holds one CPU unless resources_per_worker says otherwise."""
        return float(self.resources_per_worker.get("CPU", 1.0))


@dataclass
class LocalTrainerConfig(TrainerConfig):
    """trainer=local: the loop in this process."""

    kind: ClassVar[str] = "local"
    _target_: str = "runner.training.trainers.LocalTrainer"


@dataclass
class HorovodTrainerConfig(TrainerConfig):
    """trainer=horovod: on Ray (RayExecutor), or under horovodrun with backend=horovod."""

    kind: ClassVar[str] = "horovod"
    _target_: str = "runner.training.horovod_trainer.HorovodTrainer"


@dataclass
class DDPTrainerConfig(TrainerConfig):
    """trainer=ddp: torch DDP through Ray Train's TorchTrainer (gloo on CPU, NCCL on GPU)."""

    kind: ClassVar[str] = "ddp"
    _target_: str = "runner.training.ddp_trainer.DDPTrainer"


def trainer_settings(keys: dict, schema: type[TrainerConfig] = TrainerConfig) -> TrainerConfig:
    return component_settings(keys, schema)
