"""Launchers for `--multirun` that write the sweep report, even when trials fail.

hydra/launcher=ray   - trials as Ray tasks through hydra-ray-launcher. A trial's
                       driver holds no CPU or GPU (its workers hold them), and at
                       most as many trials run at once as the cluster can place
                       (or sweep.max_concurrent), so trials never starve each other.
hydra/launcher=local - Hydra's basic launcher, one trial after another.
hydra/launcher=submitit_slurm, submitit_local - each trial a job through
                       hydra-submitit-launcher (SLURM's sbatch, or submitit's local
                       executor: a process per trial), its CPUs and GPUs from the trainer.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from omegaconf import DictConfig, OmegaConf

from runner import fast_start, runtime
from runner.sweeps.tracking import tracked_sweep

log = logging.getLogger(__name__)


def _report(
    config: DictConfig,
    returns: Sequence[JobReturn],
    overrides: Sequence[Sequence[str]],
    first: int,
    seconds: list[float | None],
) -> None:
    # Imported here: Hydra imports every launcher plugin at start, and pandas costs a quarter second.
    from runner.sweeps.objective import maximizing
    from runner.sweeps.report import record_jobs, write_report

    jobs = []
    for i, (ret, job_overrides) in enumerate(zip(returns, overrides, strict=True)):
        status = "completed" if ret.status == JobStatus.COMPLETED else "failed"
        error = (
            ""
            if status == "completed"
            else f"{type(ret._return_value).__name__}: {ret._return_value}"
        )
        jobs.append(
            {
                "num": first + i,
                "overrides": list(job_overrides),
                "status": status,
                "error": error.splitlines()[0] if error else "",
                "seconds": seconds[i],
            }
        )
    objective, direction = config.sweep.objective, config.sweep.direction
    sweep_dir = Path(str(config.hydra.sweep.dir))
    try:
        # Optimizing sweepers launch in batches: the report covers every batch so far.
        write_report(
            sweep_dir, record_jobs(sweep_dir, jobs), objective, maximizing(objective, direction)
        )
    except Exception:  # the report must never hide the trials' own results
        log.exception("could not write the sweep report")


class LocalTrialLauncherBase(Launcher):
    """Hydra's basic launcher plus the sweep report."""

    def __init__(self) -> None:
        from hydra._internal.core_plugins.basic_launcher import BasicLauncher

        self.basic = BasicLauncher()

    def setup(self, *, hydra_context, task_function, config) -> None:
        self.config = config
        self.basic.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        with tracked_sweep(self.config, sweep_dir, "basic launcher"):
            returns = self.basic.launch(job_overrides, initial_job_idx)
            _report(self.config, returns, job_overrides, initial_job_idx, [None] * len(returns))
        return returns


def trial_cpus(sweep_config: DictConfig) -> float:
    """CPUs one trial's workers hold (the trial driver itself holds none)."""
    from runner.config import TrainerConfig

    trainer = cast(TrainerConfig, OmegaConf.to_object(sweep_config.trainer))
    return float(trainer.num_workers or trainer.min_workers or 1) * trainer.cpus_per_worker


class RayTrialLauncherBase(Launcher):
    def __init__(self, ray: DictConfig) -> None:
        self.ray_cfg = ray

    def setup(self, *, hydra_context, task_function, config) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        init = cast(dict, OmegaConf.to_container(self.ray_cfg.init, resolve=True))
        # hydra-ray-launcher would otherwise force a 75 MiB object store (and fail to attach).
        init = {k: v for k, v in init.items() if v is not None}
        # No address and no RAY_ADDRESS: a Ray of the sweep's own, never a stray `ray start` cluster.
        init.setdefault("address", os.environ.get("RAY_ADDRESS") or "local")
        if init["address"] != "local":
            runtime.use_token_if_there_is_one()  # as a run attaching does (runtime.py says why)

        import ray
        from hydra.core.utils import configure_log, setup_globals
        from hydra_plugins.hydra_ray_launcher._launcher_util import start_ray
        from omegaconf import open_dict

        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if not ray.is_initialized():
            with fast_start.lean_local_ray(ray, dashboard=bool(init.get("include_dashboard"))):
                start_ray(OmegaConf.create(init))
            if init["address"] == "local":
                # Before Ray's own exit hook (hooks run last-registered first): the sweep's
                # Ray stops without waiting on its autoscaler monitor or Ray's exit sleep.
                atexit.register(fast_start.shutdown, ray)
        configs = []
        for i, overrides in enumerate(job_overrides):
            sweep_config = self.hydra_context.config_loader.load_sweep_config(
                self.config, list(overrides)
            )
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = f"job_id_for_{initial_job_idx + i}"
                sweep_config.hydra.job.num = initial_job_idx + i
            configs.append(sweep_config)
        cap = self._cap(configs)
        log.info(
            "Ray launcher: %d trials, at most %d at once, sweep dir %s",
            len(configs),
            cap,
            sweep_dir,
        )
        with tracked_sweep(self.config, sweep_dir, "ray launcher"):
            returns = self._run(configs, job_overrides, initial_job_idx, cap)
        return returns

    def _run(self, configs, job_overrides, initial_job_idx: int, cap: int) -> list[JobReturn]:
        import ray
        from hydra.core.singleton import Singleton
        from hydra.core.utils import filter_overrides
        from hydra_plugins.hydra_ray_launcher._launcher_util import launch_job_on_ray

        remote = self.ray_cfg.remote
        returns: dict[int, JobReturn] = {}  # by position in configs
        seconds: list[float | None] = [None] * len(configs)
        started: dict = {}
        queue = list(range(len(configs)))
        running: dict = {}
        while queue or running:
            while queue and len(running) < cap:
                i = queue.pop(0)
                log.info(
                    "\t#%d : %s", initial_job_idx + i, " ".join(filter_overrides(job_overrides[i]))
                )
                ref = launch_job_on_ray(
                    self.hydra_context,
                    remote,
                    configs[i],
                    self.task_function,
                    Singleton.get_state(),
                )
                running[ref] = i
                started[i] = time.perf_counter()
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                i = running.pop(ref)
                seconds[i] = time.perf_counter() - started[i]
                try:
                    returns[i] = ray.get(ref)
                except (
                    Exception
                ) as error:  # the trial's process died: a failed trial, not a failed sweep
                    failed = JobReturn(overrides=list(job_overrides[i]), status=JobStatus.FAILED)
                    failed._return_value = error  # Hydra internal (runner/compat.py)
                    returns[i] = failed
        ordered = [returns[i] for i in range(len(configs))]  # the loop ends with every one
        _report(self.config, ordered, job_overrides, initial_job_idx, seconds)
        return ordered

    def _cap(self, configs: list[DictConfig]) -> int:
        cap = self.config.sweep.max_concurrent
        if cap:
            return int(cap)
        import ray

        cpus = ray.cluster_resources().get("CPU", 1.0)
        need = max(trial_cpus(c) for c in configs) if configs else 1.0
        return max(1, int(cpus // need)) if need > 0 else len(configs)


class SubmititTrials:
    """hydra-submitit-launcher's launch, with each job's CPUs and GPUs from the trainer where
    the launcher's own keys leave them null, and the sweep report (mixed in before its
    LocalLauncher or SlurmLauncher, whose `params` are the hydra.launcher keys)."""

    params: dict
    config: DictConfig
    _EXECUTOR: str

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        self.params = {**self.params, **trial_resources(self.config, self.params)}
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        with tracked_sweep(self.config, sweep_dir, f"submitit {self._EXECUTOR} launcher"):
            returns = super().launch(job_overrides, initial_job_idx)  # type: ignore[misc]
            _report(self.config, returns, job_overrides, initial_job_idx, [None] * len(returns))
        return returns


def trial_resources(config: DictConfig, params: dict) -> dict:
    """A job's cpus_per_task (its workers' CPUs, at least 1) and gpus_per_node (a GPU per
    worker where trainer.use_gpu) where hydra.launcher leaves them null."""
    from runner.config import TrainerConfig

    trainer = cast(TrainerConfig, OmegaConf.to_object(config.trainer))
    chosen: dict = {}
    if params.get("cpus_per_task") is None:
        chosen["cpus_per_task"] = max(1, math.ceil(trial_cpus(config)))
    if params.get("gpus_per_node") is None and trainer.use_gpu:
        chosen["gpus_per_node"] = int(trainer.num_workers or 1)
    return chosen
