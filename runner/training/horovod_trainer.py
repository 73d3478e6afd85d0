"""trainer=horovod: Horovod on Ray (horovod.ray.RayExecutor, workers are Ray actors),
or in this process as one rank under horovodrun (the backend launched the ranks)."""

from __future__ import annotations

import logging
import os
from dataclasses import replace

from runner.backends.base import Backend
from runner.backends.horovod import horovod_env
from runner.config import HorovodTrainerConfig
from runner.errors import UserError
from runner.training import workers as worker_setup
from runner.training.base import JobFactory
from runner.training.follow import log_dir
from runner.training.job import TrainingJob, TrainingResult
from runner.training.loop import run_training
from runner.training.trainers import DistributedTrainer, WorkerLost, collect, local_gpu


def _horovod_worker(job: TrainingJob, elastic: bool = False) -> TrainingResult | None:
    from runner.training.strategies import ElasticHorovodStrategy, HorovodStrategy

    kind = ElasticHorovodStrategy if elastic else HorovodStrategy
    strategy = kind(use_gpu=job.use_gpu, compression=job.settings.compression)
    worker_setup.log_to_file(log_dir(job.settings.logdir, job.run_dir), strategy.rank)
    result = run_training(job, strategy)
    return result if strategy.is_main else None


def _worker_env(settings, use_gpu: bool) -> dict[str, str]:
    """horovod_env for the Ray workers, their output unbuffered."""
    return {"PYTHONUNBUFFERED": "1", **horovod_env(dict(os.environ), use_gpu, settings.timeline)}


class _RendezvousChatter(logging.Filter):
    """Horovod's rendezvous server, in the driver, logs every key its workers store and clear
    (36 lines for 2 workers) at INFO through the root logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or "/horovod/runner/http/" not in record.pathname


def quiet_rendezvous_server() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _RendezvousChatter) for f in root.filters):
        root.addFilter(_RendezvousChatter())


def _executor_class():
    """RayExecutor whose workers go into a placement group of ours: SPREAD or PACK, and bundles
    holding every resource of trainer.resources_per_worker (Horovod 0.28.1 always packs, and
    asks for CPU and GPU only). The adapter methods it replaces are listed in runner/compat.py."""
    from horovod.ray import RayExecutor
    from horovod.ray.strategy import PGStrategy

    class PlacedExecutor(RayExecutor):
        # Set before start(): our group (None: Horovod's own) and the non-CPU/GPU resources.
        placement_group = None
        extra_resources: dict[str, float] = {}

        def _initialize_adapter(self):
            super()._initialize_adapter()
            adapter, group, extra = self.adapter, self.placement_group, self.extra_resources
            if group is not None and hasattr(adapter, "_create_strategy"):

                def strategy():
                    # A given group: each worker takes one of its bundles (bundle index -1).
                    return PGStrategy(
                        settings=adapter.settings,
                        num_workers=adapter.num_workers,
                        use_gpu=adapter.use_gpu,
                        cpus_per_worker=adapter.cpus_per_worker,
                        gpus_per_worker=adapter.gpus_per_worker,
                        placement_group=group,
                    )

                adapter._create_strategy = strategy
            if extra and hasattr(
                adapter, "_create_resources"
            ):  # elastic workers: custom resources too
                create = adapter._create_resources

                def resources(hostname):
                    made = create(hostname)
                    return {**made, "resources": {**made.get("resources", {}), **extra}}

                adapter._create_resources = resources

    return PlacedExecutor


class HorovodTrainer(DistributedTrainer):
    name = "horovod"
    schema = HorovodTrainerConfig
    ray_fix = "add backend=ray (or launch with horovodrun and backend=horovod)"

    def world_size(self, backend: Backend) -> int:
        if backend.launched_ranks:
            return backend.size
        if self.settings.elastic:
            assert self.settings.min_workers is not None  # what makes the run elastic
            return self.settings.max_workers or self.settings.min_workers
        return super().world_size(backend)

    def _min_workers(self, workers: int) -> int:
        # Elastic (min_workers set): room for its minimum only; it grows into what is free.
        return self.settings.min_workers or workers

    def fit(self, make_job: JobFactory, backend: Backend) -> TrainingResult | None:
        if backend.launched_ranks:  # under horovodrun: this process is one rank
            job = replace(make_job(backend.size), use_gpu=local_gpu(self.settings.use_gpu))
            return _horovod_worker(job)
        return super().fit(make_job, backend)

    def _placement(self, workers: int):
        """The placement group for the workers: a sweep trial's own (Tune reserved its
        workers' bundles with it, runner/sweeps/tune/placement.py), else a new one."""
        import ray
        from ray.util.placement_group import placement_group

        trial_group = ray.util.get_current_placement_group()
        if trial_group is not None:
            return trial_group

        group = placement_group(
            [dict(self.resources) for _ in range(workers)], strategy=self.placement.upper()
        )
        try:
            ray.get(group.ready(), timeout=60)
        except Exception:
            ray.util.remove_placement_group(group)
            raise UserError(
                f"the cluster cannot place {workers} workers with {self.resources} each "
                f"(trainer.placement={self.placement}) within 60s; lower trainer.num_workers or "
                "trainer.resources_per_worker"
            ) from None
        return group

    def _run(self, job: TrainingJob, workers: int) -> TrainingResult:
        import ray
        from horovod.ray import RayExecutor

        quiet_rendezvous_server()

        resources = self.resources
        placement = {
            "cpus_per_worker": self.settings.cpus_per_worker,
            "use_gpu": job.use_gpu,
            "gpus_per_worker": resources.get("GPU") if job.use_gpu else None,
        }
        extra = {k: v for k, v in resources.items() if k not in ("CPU", "GPU")}
        settings = RayExecutor.create_settings(
            timeout_s=60, placement_group_timeout_s=60, nics=self._nics()
        )
        if self.settings.elastic:
            return self._run_elastic(job, settings, placement, extra)
        group = self._placement(workers)
        executor = None
        try:  # the group is removed whatever happens, or it would hold its CPUs for good
            executor = _executor_class()(settings, num_workers=workers, **placement)
            executor.placement_group, executor.extra_resources = group, extra
            executor.start(extra_env_vars=_worker_env(self.settings, job.use_gpu))
            results = collect(executor.run_remote(_horovod_worker, args=[job]))
        finally:
            try:
                if executor is not None:
                    executor.shutdown()
            finally:
                if group != ray.util.get_current_placement_group():
                    ray.util.remove_placement_group(group)
        return next(r for r in results if r is not None)

    def _nics(self) -> set[str] | None:
        """The interfaces for traffic between hosts: trainer.nics, else Horovod probes for common
        ones, except on a single host, where the elastic driver must be told (loopback)."""
        import ray

        if self.settings.nics:
            return set(self.settings.nics)
        if not self.settings.elastic:
            return None
        addresses = {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
        return {"lo"} if len(addresses) == 1 else None

    def _run_elastic(
        self, job: TrainingJob, settings, placement: dict, extra: dict
    ) -> TrainingResult:
        """Elastic Horovod on Ray: between min_workers and max_workers, as many as are alive."""
        import ray

        if not job.loader.reshardable:
            raise UserError(
                "elastic training (trainer.min_workers) re-shards the cache when workers come and go; "
                "add loader=local"
            )
        executor = _executor_class()(
            settings,
            min_workers=self.settings.min_workers,
            max_workers=self.settings.max_workers,
            elastic_timeout=120,
            cooldown_range=[1, 2],
            **placement,
        )
        executor.extra_resources = extra
        # Horovod's elastic driver advertises its rendezvous server at gethostbyname(hostname), which
        # is 127.0.0.1 on many machines (Debian's /etc/hosts): unreachable from other hosts. The
        # driver's Ray node address is what the other nodes reach it by.
        executor.start(
            extra_env_vars={
                **_worker_env(self.settings, job.use_gpu),
                "HOROVOD_GLOO_RENDEZVOUS_ADDR": ray.util.get_node_ip_address(),
            }
        )
        try:
            results = executor.run(_horovod_worker, args=[job, True])
        except RuntimeError as error:
            # Horovod drops the host of a failed worker and goes on with the other hosts; with no
            # host left (all workers on one machine) it ends the job: the retry starts a new
            # elastic run from the checkpoint.
            if "exited with non-zero status" in str(error):
                raise WorkerLost(error) from None
            raise
        finally:
            executor.shutdown()
        return next(r for r in results if r is not None)
