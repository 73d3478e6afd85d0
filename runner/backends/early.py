"""The backend decided before the run's heavy imports, for a run whose trainer will need
Ray: its Ray starts in a thread while the run imports torch and pandas, infers its features
and preprocesses (2-3 s of a small run, profiled in docs/benchmarks.md), instead of after.

Only the config decides it here (these modules import nothing heavy); runner.assembly then
takes this backend as decided. A run that will not need Ray, or whose need only its
components reveal (processor=dask, loader=ray), starts Ray lazily as before."""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig

from runner.backends.auto import AutoBackend
from runner.backends.base import Backend
from runner.backends.horovod import HorovodBackend
from runner.backends.ray import RayBackend
from runner.command_table import commands_where
from runner.config import RunConfig

TRAINING_COMMANDS = commands_where("trains")


def decide_backend(cfg: DictConfig, settings: RunConfig, components: str | None = None) -> Backend:
    """The backend the config asks for; backend=auto decided by the trainer's need for Ray,
    else by `components`' (why a component or the command needs it, if one does)."""
    trainer = settings.trainer
    backend = instantiate(cfg.backend, _convert_="all")
    if isinstance(backend, AutoBackend):
        backend = backend.detect(trainer.wants_ray() or components)
    if isinstance(backend, HorovodBackend):
        backend.timeline = trainer.timeline
    if isinstance(backend, RayBackend) and trainer.many_workers():
        why = f"trainer.num_workers={trainer.most_workers}"
        backend.runtime.want_cpus(trainer.cpus_wanted(), why)
    return backend


def start_ray_early(cfg: DictConfig, settings: RunConfig) -> Backend | None:
    """For a training command whose trainer will need Ray: the decided backend, its Ray
    starting in a thread; None otherwise (runner.assembly decides as usual)."""
    if settings.command not in TRAINING_COMMANDS or not settings.trainer.wants_ray():
        return None
    backend = decide_backend(cfg, settings)
    if isinstance(backend, RayBackend):
        backend.runtime.start_in_background()
    return backend


def abandon(backend: Backend | None) -> None:
    """For a run that failed before entering its early backend: stops the Ray it started
    (once its start has finished: a Ray half-started would outlive the run)."""
    if isinstance(backend, RayBackend):
        backend.runtime.stop(failed=True)
