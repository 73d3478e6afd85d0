"""Trainer objects (conf/trainer): how the one training loop is run.

local   - the loop in this process.
horovod - Horovod: on Ray through horovod.ray.RayExecutor (workers are Ray
          actors), or in-process under horovodrun (backend=horovod).
ddp     - torch DDP through Ray Train's TorchTrainer.

Every trainer gets a job factory (make_job(world_size) -> TrainingJob) so that
a retried attempt gets fresh data shards, and every retry resumes from the
checkpoint the failed attempt left.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from runner.errors import UserError
from runner.training import checkpoints
from runner.training.loop import TrainingJob, TrainingResult, run_training
from runner.training.strategy import LocalStrategy

log = logging.getLogger(__name__)
JobFactory = Callable[[int], TrainingJob]


class LocalTrainer:
    """The loop in this process."""

    name = "local"

    def __init__(self, **settings):
        self.settings = settings

    def world_size(self, backend) -> int:
        return 1

    def fit(self, make_job: JobFactory, backend) -> TrainingResult:
        return run_training(make_job(1), LocalStrategy(use_gpu=bool(self.settings.get("use_gpu"))))


def _worker_logging(job: TrainingJob, rank: int) -> None:
    """Workers log to <logdir>/rank-N.log (and to stderr, which Ray forwards)."""
    logdir = Path(job.trainer_cfg.get("logdir") or Path(job.run_dir) / "workers")
    logdir.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    if not any(getattr(h, "_runner_worker", False) for h in root.handlers):
        handler = logging.FileHandler(logdir / f"rank-{rank}.log")
        handler._runner_worker = True
        handler.setFormatter(
            logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
        )
        root.addHandler(handler)
        root.setLevel(logging.INFO)


class DistributedTrainer(LocalTrainer):
    """What Horovod and DDP share: worker count, resources, retries."""

    def __init__(self, **settings):
        super().__init__(**settings)
        self.max_retries = int(settings.get("max_retries", 3))
        self.resources = {
            k: float(v) for k, v in (settings.get("resources_per_worker") or {"CPU": 1.0}).items()
        }
        # One id per trainer (one per run), shared by its retries: see loop._resume_point.
        self._run_id = uuid.uuid4().hex

    def _cluster(self):
        from runner.backends.ray import ensure_ray

        return ensure_ray(f"trainer={self.name}").cluster_resources()

    def use_gpu(self) -> bool:
        if self.settings.get("use_gpu") is not None:
            return bool(self.settings["use_gpu"])
        return self._cluster().get("GPU", 0) > 0

    def world_size(self, backend) -> int:
        if self.settings.get("num_workers"):
            return int(self.settings["num_workers"])
        return max(int(self._cluster().get("GPU", 0)), 1)

    def _check_placeable(self, workers: int) -> None:
        """More workers than the cluster can ever hold is an error now, not a hang later."""
        total = self._cluster()
        need = dict(self.resources)
        if self.use_gpu():
            need.setdefault("GPU", 1.0)
        for resource, amount in need.items():
            have = total.get(resource, 0.0)
            if workers * amount > have + 1e-9:
                raise UserError(
                    f"trainer.num_workers={workers} with {amount:g} {resource} each needs {workers * amount:g} "
                    f"{resource}, but the cluster has {have:g}; lower trainer.num_workers or "
                    "trainer.resources_per_worker"
                )

    def _worker_settings(self, job: TrainingJob) -> TrainingJob:
        return replace(
            job, trainer_cfg={**job.trainer_cfg, "use_gpu": self.use_gpu(), "run_id": self._run_id}
        )

    def fit(self, make_job: JobFactory, backend) -> TrainingResult:
        if backend.name != "ray":
            raise UserError(
                f"trainer={self.name} runs on Ray: add backend=ray"
                + (
                    " (or launch with horovodrun and backend=horovod)"
                    if self.name == "horovod"
                    else ""
                )
            )
        workers = self.world_size(backend)
        self._check_placeable(workers)
        attempt = 0
        while True:
            job = self._worker_settings(make_job(workers))
            if attempt:
                job = replace(job, trainer_cfg={**job.trainer_cfg, "resume_if_present": True})
            try:
                return self._run(job, workers)
            except (
                WorkerLost
            ) as lost:  # a worker process died: the attempt is lost, the checkpoint is not
                error = lost.error
                attempt += 1
                last = Path(job.run_dir) / "checkpoints" / checkpoints.LAST
                reason = _first_line(error) or type(error).__name__
                if attempt > self.max_retries:
                    raise UserError(
                        f"training failed after {attempt} attempt(s) (trainer.max_retries="
                        f"{self.max_retries}): {type(error).__name__}: {reason}; "
                        f"{_checkpoint_hint(job.run_dir)}"
                    ) from None
                log.warning(
                    "a training worker failed (%s: %s); retry %d/%d from %s",
                    type(error).__name__,
                    reason,
                    attempt,
                    self.max_retries,
                    last if last.exists() else "the start",
                )


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else ""


def _checkpoint_hint(run_dir: str) -> str:
    """What a failed run leaves to resume from, for its error message."""
    last = Path(run_dir) / "checkpoints" / checkpoints.LAST
    if last.exists():
        return f"the last checkpoint is {last}; resume with trainer.resume_from={run_dir}"
    return "no checkpoint was written"


class WorkerLost(Exception):
    """A training worker's process died (killed, out of memory, node lost)."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def _collect(futures: list) -> list:
    """Results of all workers; fails fast. A dead worker raises WorkerLost (retried);
    an exception raised inside a worker is re-raised as itself (a UserError keeps its message)."""
    import ray
    from ray.exceptions import RayActorError, RayTaskError

    pending = list(futures)
    try:
        while pending:  # as soon as any worker fails, instead of waiting on a blocked rank 0
            done, pending = ray.wait(pending, num_returns=1)
            ray.get(done)
        return ray.get(futures)
    except (RayActorError, RayTaskError) as first:
        # Peers of a dead worker fail too (collective errors); look at every worker's fate.
        ray.wait(futures, num_returns=len(futures), timeout=15)
        errors = []
        for future in futures:
            try:
                ray.get(future, timeout=0)
            except Exception as error:  # noqa: BLE001 - classified below
                errors.append(error)
        if any(isinstance(e, RayActorError) for e in errors) or isinstance(first, RayActorError):
            raise WorkerLost(
                next(e for e in errors + [first] if isinstance(e, RayActorError))
            ) from None
        cause = getattr(first, "cause", None)
        if isinstance(cause, UserError):
            raise cause from None
        if _is_collective_failure(cause):
            raise WorkerLost(first) from None
        raise


def _is_collective_failure(error) -> bool:
    """Horovod/gloo errors that mean a peer went away rather than a bug in the step."""
    if error is None:
        return False
    text = f"{type(error).__name__}: {error}"
    return any(
        s in text
        for s in (
            "HorovodInternalError",
            "Connection closed by peer",
            "Connection reset by peer",
            "Gloo",
            "gloo",
        )
    )


def _horovod_worker(job: TrainingJob, elastic: bool = False) -> TrainingResult | None:
    from runner.training.strategy import ElasticHorovodStrategy, HorovodStrategy

    kind = ElasticHorovodStrategy if elastic else HorovodStrategy
    strategy = kind(
        use_gpu=bool(job.trainer_cfg.get("use_gpu")),
        compression=job.trainer_cfg.get("compression", "none"),
    )
    _worker_logging(job, strategy.rank)
    result = run_training(job, strategy)
    return result if strategy.is_main else None


def _horovod_worker_env() -> dict[str, str]:
    """HOROVOD_* tuning variables of the driver (cycle time, fusion threshold, ...) reach the workers."""
    return {
        "PYTHONUNBUFFERED": "1",
        **{k: v for k, v in os.environ.items() if k.startswith("HOROVOD_")},
    }


class HorovodTrainer(DistributedTrainer):
    name = "horovod"

    @property
    def elastic(self) -> bool:
        return bool(self.settings.get("min_workers"))

    def world_size(self, backend) -> int:
        if backend.name == "horovod":
            return backend.size
        if self.elastic:
            return int(self.settings.get("max_workers") or self.settings["min_workers"])
        return super().world_size(backend)

    def _check_placeable(self, workers: int) -> None:
        # An elastic run needs room for its minimum only; it grows into what is free.
        super()._check_placeable(int(self.settings["min_workers"]) if self.elastic else workers)

    def fit(self, make_job: JobFactory, backend) -> TrainingResult:
        if backend.name == "horovod":  # under horovodrun: this process is one rank
            return _horovod_worker(self._worker_settings_local(make_job(backend.size)))
        return super().fit(make_job, backend)

    def _worker_settings_local(self, job: TrainingJob) -> TrainingJob:
        use_gpu = self.settings.get("use_gpu")
        if use_gpu is None:
            import torch

            use_gpu = torch.cuda.is_available()
        return replace(job, trainer_cfg={**job.trainer_cfg, "use_gpu": bool(use_gpu)})

    def _run(self, job: TrainingJob, workers: int) -> TrainingResult:
        from horovod.ray import RayExecutor

        use_gpu = bool(job.trainer_cfg["use_gpu"])
        placement = {
            "cpus_per_worker": self.resources.get("CPU", 1.0),
            "use_gpu": use_gpu,
            "gpus_per_worker": self.resources.get("GPU") if use_gpu else None,
        }
        if self.elastic:
            return self._run_elastic(job, placement)
        settings = RayExecutor.create_settings(
            timeout_s=60, placement_group_timeout_s=60, nics=self._nics()
        )
        executor = RayExecutor(settings, num_workers=workers, **placement)
        executor.start(extra_env_vars=_horovod_worker_env())
        try:
            results = _collect(executor.run_remote(_horovod_worker, args=[job]))
        finally:
            executor.shutdown()
        return next(r for r in results if r is not None)

    def _nics(self) -> set[str] | None:
        """The interfaces for traffic between hosts: trainer.nics, else Horovod probes for common
        ones, except on a single host, where the elastic driver must be told (loopback)."""
        import ray

        if self.settings.get("nics"):
            return set(self.settings["nics"])
        if not self.elastic:
            return None
        addresses = {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
        return {"lo"} if len(addresses) == 1 else None

    def _run_elastic(self, job: TrainingJob, placement: dict) -> TrainingResult:
        """Elastic Horovod on Ray: between min_workers and max_workers, as many as are alive."""
        import ray
        from horovod.ray import RayExecutor

        from runner.loading.local import LocalLoader

        if not isinstance(job.loader, LocalLoader):
            raise UserError(
                "elastic training (trainer.min_workers) re-shards the cache when workers come and go; "
                "add loader=local"
            )
        settings = RayExecutor.create_settings(
            timeout_s=60, placement_group_timeout_s=60, nics=self._nics()
        )
        executor = RayExecutor(
            settings,
            min_workers=int(self.settings["min_workers"]),
            max_workers=self.settings.get("max_workers"),
            elastic_timeout=120,
            cooldown_range=[1, 2],
            **placement,
        )
        # Horovod's elastic driver advertises its rendezvous server at gethostbyname(hostname), which
        # is 127.0.0.1 on many machines (Debian's /etc/hosts): unreachable from other hosts. The
        # driver's Ray node address is what the other nodes reach it by.
        executor.start(
            extra_env_vars={
                **_horovod_worker_env(),
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


def _ddp_worker(config: dict) -> None:
    from runner.training.strategy import DDPStrategy

    job: TrainingJob = config["job"]
    strategy = DDPStrategy(
        use_gpu=bool(job.trainer_cfg.get("use_gpu")),
        compression=job.trainer_cfg.get("compression", "none"),
    )
    _worker_logging(job, strategy.rank)
    import ray.train

    context = ray.train.get_context()
    if context.get_world_rank() != strategy.rank:
        raise RuntimeError("Ray Train and torch.distributed disagree on this worker's rank")
    # A restarted worker group resumes from the checkpoint the failed one left.
    job = replace(job, trainer_cfg={**job.trainer_cfg, "resume_if_present": True})
    result = run_training(job, strategy)
    if strategy.is_main:
        import pickle

        with open(Path(job.run_dir) / "checkpoints" / "result.pkl", "wb") as handle:
            pickle.dump(result, handle)


class DDPTrainer(DistributedTrainer):
    """Ray Train's TorchTrainer: ScalingConfig, FailureConfig and RunConfig mapped from our keys."""

    name = "ddp"

    def fit(self, make_job: JobFactory, backend) -> TrainingResult:
        if backend.name != "ray":
            raise UserError("trainer=ddp runs on Ray Train: add backend=ray")
        workers = self.world_size(backend)
        self._check_placeable(workers)
        return self._run(self._worker_settings(make_job(workers)), workers)

    def _run(self, job: TrainingJob, workers: int) -> TrainingResult:
        import pickle

        from ray.train import FailureConfig, RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer

        use_gpu = bool(job.trainer_cfg["use_gpu"])
        storage = Path(job.trainer_cfg.get("logdir") or Path(job.run_dir) / "workers").absolute()
        trainer = TorchTrainer(
            _ddp_worker,
            train_loop_config={"job": job},
            torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo"),
            scaling_config=ScalingConfig(
                num_workers=workers, use_gpu=use_gpu, resources_per_worker=self.resources
            ),
            run_config=RunConfig(
                name="ddp",
                storage_path=str(storage),
                failure_config=FailureConfig(max_failures=self.max_retries),
            ),
        )
        try:
            trainer.fit()
        except Exception as error:
            raise UserError(
                f"DDP training failed (trainer.max_retries={self.max_retries}): "
                f"{type(error).__name__}: {_first_line(error)}; {_checkpoint_hint(job.run_dir)}"
            ) from None
        with open(Path(job.run_dir) / "checkpoints" / "result.pkl", "rb") as handle:
            return pickle.load(handle)


__all__ = ["LocalTrainer", "HorovodTrainer", "DDPTrainer"]
