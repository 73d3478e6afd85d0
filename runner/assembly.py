"""From the composed config to the run's components, with every `auto` choice
resolved in one visible place and each pick logged with its reason.

Order matters: the backend is decided first (backend=auto also looks at what the
trainer and the explicitly chosen components need), then, inside the backend's
context, the trainer, the processor and the loader.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from runner.backends.base import Backend
from runner.backends.early import TRAINING_COMMANDS, decide_backend
from runner.command_table import commands_where
from runner.config import FeatureConfig, RunConfig, built, check_config, trainer_settings
from runner.errors import UserError
from runner.loading.base import Loader
from runner.processing.base import Processor
from runner.processing.pandas_processor import PandasProcessor
from runner.processing.source import DataSource
from runner.processing.type_inference import TypeInference
from runner.storage import load_credentials
from runner.training.base import Trainer

log = logging.getLogger("runner")


class AutoProcessor:
    """processor=auto: pyarrow in Ray tasks (processor=arrow) for data of
    distributed_min_bytes or more on Ray; pandas for smaller data, where spreading it over
    tasks costs more than it saves (and locally)."""

    requires_ray = False  # until resolved: it never asks for Ray by itself

    def __init__(
        self, parallelism: int | None, persist: bool, blocksize: str, distributed_min_bytes: int
    ):
        self.settings: dict[str, Any] = {
            "parallelism": parallelism,
            "persist": persist,
            "blocksize": blocksize,
        }
        self.distributed_min_bytes = distributed_min_bytes

    def resolve(self, backend: Backend, source: DataSource) -> Processor:
        if not backend.offers_ray:
            return PandasProcessor()
        size, limit = source.size_bytes(), self.distributed_min_bytes
        if size >= limit:
            from runner.processing.arrow_processor import ArrowProcessor

            log.info(
                "processor=auto picked arrow: %.0f MB of data "
                "(processor.distributed_min_bytes=%.0f MB)",
                size / 2**20,
                limit / 2**20,
            )
            return ArrowProcessor(**self.settings)
        log.info(
            "processor=auto picked pandas: %.1f MB of data is below "
            "processor.distributed_min_bytes=%.0f MB",
            size / 2**20,
            limit / 2**20,
        )
        return PandasProcessor()


class AutoLoader:
    """loader=auto: Ray Data for distributed or windowed training on Ray; the local Arrow reader
    when one process trains from data that fits (Ray Data's machinery buys nothing there),
    and for elastic training (its shards are cut again when workers come and go)."""

    requires_ray = False

    def __init__(self, **settings):
        self.settings = settings

    def resolve(self, backend: Backend, trainer: Trainer) -> Loader:
        windowed = bool(self.settings["window_size_bytes"])
        if backend.offers_ray and trainer.settings.elastic:
            log.info("loader=auto picked local: elastic training re-shards the cache")
        elif backend.offers_ray and (trainer.distributed or windowed):
            from runner.loading.ray_data import RayDataLoader

            log.info(
                "loader=auto picked ray: %s",
                "distributed training" if trainer.distributed else "windowed loading",
            )
            return RayDataLoader(**self.settings)
        keep = ("batch_size", "shuffle", "drop_last", "eval_batch_size")
        from runner.loading.local import LocalLoader  # torch: once a loader is needed

        return LocalLoader(**{k: self.settings[k] for k in keep})


class AutoTrainer:
    """trainer=auto: the strategy picked from where the run trains, once the backend is known
    (one worker -> this process; more, or GPUs in the cluster, -> Horovod on Ray; under
    horovodrun -> Horovod), then built from the same keys."""

    def __init__(self, **keys):
        self.keys = keys
        self.settings = trainer_settings(keys)

    def resolve(self, backend: Backend, trains: bool = True) -> Trainer:
        """`trains`: the command trains (predict, evaluate, serve do not: their pick goes
        unsaid)."""
        name, reason = self._pick(backend)
        if trains:
            log.info("trainer=auto picked %s: %s", name, reason)
        if name == "local":
            from runner.training.trainers import LocalTrainer

            return LocalTrainer(**self.keys)
        from runner.training.horovod_trainer import HorovodTrainer

        return HorovodTrainer(**self.keys)

    def many_workers(self) -> str | None:
        return self.settings.many_workers()

    def _pick(self, backend: Backend) -> tuple[str, str]:
        many = self.many_workers()
        if backend.launched_ranks:
            return "horovod", f"this process is one of {backend.size} ranks launched by horovodrun"
        if many and not backend.offers_ray:
            raise UserError(
                f"{many} trains several workers on Ray; add backend=ray (or leave backend=auto, "
                "which starts a local Ray when no cluster is reachable), or set trainer.num_workers=1"
            )
        if many:
            return "horovod", f"{many} on Ray (Horovod on Ray; trainer=ddp for DDP)"
        if backend.offers_ray and self.settings.num_workers is None:
            gpus = _cluster_gpus(backend)
            if gpus:
                return (
                    "horovod",
                    f"trainer.num_workers=null and the cluster has {gpus:g} GPU(s): one worker each",
                )
        return "local", "one worker trains in this process"


def _cluster_gpus(backend) -> float:
    """GPUs of the cluster this Ray backend attaches to; of this machine when it would start
    a local Ray (so that a small local run does not start Ray just to count them)."""
    runtime = backend.runtime
    if runtime.attaching:
        return runtime.start().cluster_resources().get("GPU", 0.0)
    if runtime.num_gpus is not None:
        return float(runtime.num_gpus)
    import torch

    return float(torch.cuda.device_count())


@dataclass
class Plan:
    """A run before its backend is entered: the config checked, the backend decided, the
    other components possibly still `auto`."""

    cfg: DictConfig  # as composed (saved beside the model)
    settings: RunConfig
    run_dir: Path
    backend: Backend
    trainer: Trainer | AutoTrainer
    processor: Processor | AutoProcessor
    loader: Loader | AutoLoader
    source: DataSource
    cache_options: dict
    type_inference: TypeInference | None = None  # model=auto: what was inferred, and why

    def resolve(self) -> Run:
        """Inside the backend's context: every remaining `auto` resolved, each pick logged."""
        trainer = self.trainer
        if isinstance(trainer, AutoTrainer):
            trainer = trainer.resolve(self.backend, self.settings.command in TRAINING_COMMANDS)
        processor = self.processor
        if isinstance(processor, AutoProcessor):
            processor = processor.resolve(self.backend, self.source)
        loader = self.loader
        if isinstance(loader, AutoLoader):
            loader = loader.resolve(self.backend, trainer)
        log.info(
            "components: backend %s, processor %s, loader %s, trainer %s",
            self.backend.name,
            processor.name,
            loader.name,
            trainer.name,
        )
        return Run(
            self.cfg,
            self.settings,
            self.run_dir,
            self.backend,
            trainer,
            processor,
            loader,
            self.source,
            self.cache_options,
            self.type_inference,
        )


@dataclass
class Run:
    """One invocation: the config, its typed settings, its output dir, and its components."""

    cfg: DictConfig
    settings: RunConfig
    run_dir: Path
    backend: Backend
    trainer: Trainer
    processor: Processor
    loader: Loader
    source: DataSource
    cache_options: dict
    type_inference: TypeInference | None = None


def assemble(
    cfg: DictConfig,
    run_dir: str | Path,
    settings: RunConfig | None = None,
    backend: Backend | None = None,
) -> Plan:
    """Checks the config (unless `settings` are its checked form), builds the components and
    decides the backend (unless `backend` was decided already: runner.backends.early)."""
    settings = settings or check_config(cfg)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    trainer = built(cfg.trainer, _convert_="object")
    processor = built(cfg.processor)
    loader = built(cfg.loader)
    if backend is None:
        named = [
            f"{group}={c.name}"
            for group, c in (("processor", processor), ("loader", loader))
            if c.requires_ray
        ]
        serving = ["command=serve"] if settings.command == "serve" else []
        backend = decide_backend(cfg, settings, next(iter(named + serving), None))
    source = DataSource.from_config(settings.dataset)
    if source.decimal_reason:
        log.info("dataset.decimal=null picked ',': %s", source.decimal_reason)
    inference = None
    model = settings.model
    if settings.command in FEATURE_COMMANDS and None in (
        model.input_features,
        model.output_features,
    ):
        cfg, settings, inference = _infer_features(cfg, settings, source, run_dir)
    credentials = settings.cache_credentials
    if isinstance(credentials, DictConfig):
        credentials = OmegaConf.to_container(credentials, resolve=True)
    return Plan(
        cfg,
        settings,
        run_dir,
        backend,
        trainer,
        processor,
        loader,
        source,
        load_credentials(credentials),
        inference,
    )


FEATURE_COMMANDS = commands_where("reads_features")


def _infer_features(cfg: DictConfig, settings: RunConfig, source: DataSource, run_dir: Path):
    """model=auto: the feature lists the config leaves null, inferred from the table, logged
    as a table and put into the config, which from here on reads as if the user had typed
    them (<run dir>/model.yaml is written once the features are checked: commands.py)."""
    from runner.processing.type_inference import infer_source

    model = settings.model
    outputs = [f.name for f in model.output_features] if model.output_features else None
    given = {
        f.name: f.type for f in [*(model.input_features or []), *(model.output_features or [])]
    }
    from runner.processing.split import split_settings, without_folds

    # Types from the training rows before any k_fold cut: every fold infers the same ones.
    split = without_folds(split_settings(cfg.dataset.split))
    inference = infer_source(
        source, settings.dataset, split, outputs, given, model.input_features is not None
    )
    for line in inference.table().splitlines():
        log.info("%s", line)
    for line in inference.hints:
        log.warning("%s", line)
    inferred = inference.model_config()
    cfg = cfg.copy()
    for group in ("input_features", "output_features"):
        if getattr(model, group) is None:
            cfg.model[group] = [FeatureConfig(**f) for f in inferred[group]]
    return cfg, check_config(cfg), inference
