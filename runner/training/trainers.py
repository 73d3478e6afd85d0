"""Trainers (conf/trainer/<name>.yaml names each in `_target_`): how the one training loop is run.

local   - the loop in this process.
horovod - Horovod: on Ray through horovod.ray.RayExecutor (workers are Ray
          actors), or in-process under horovodrun (runner/training/horovod_trainer.py).
ddp     - torch DDP through Ray Train's TorchTrainer (runner/training/ddp_trainer.py).

Every trainer gets a job factory (make_job(world_size) -> TrainingJob) so that a
retried attempt gets fresh data shards. A retry happens only when a worker process
is lost (killed, out of memory, node gone), and resumes from the checkpoint the
failed attempt left; an exception raised by the training code stops the run at once.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from pathlib import Path

from runner.backends.base import Backend, require_ray_backend
from runner.config import LocalTrainerConfig, TrainerConfig, trainer_settings
from runner.errors import UserError
from runner.runtime import require_ray
from runner.training import checkpoints
from runner.training.base import JobFactory
from runner.training.follow import following_rank_zero, log_dir
from runner.training.job import TrainingJob, TrainingResult
from runner.training.reporting import relayed_reports

# The loop and the strategies import torch (a second of a run's start): imported where a
# trainer fits, so that a config or data error is said before torch loads.

log = logging.getLogger(__name__)


def local_gpu(use_gpu: bool | None) -> bool:
    """trainer.use_gpu for a process that trains itself: null means "if this machine has one"."""
    if use_gpu is not None:
        return bool(use_gpu)
    import torch

    return torch.cuda.is_available()


class LocalTrainer:
    """The loop in this process."""

    name = "local"
    distributed = False
    schema: type[TrainerConfig] = LocalTrainerConfig

    def __init__(self, **keys):
        """`keys`: the trainer config's, as hydra's instantiate passes them."""
        self.settings = trainer_settings(keys, self.schema)
        many = self.settings.many_workers()
        if many and not self.distributed:
            raise UserError(
                f"trainer=local trains in one process, but {many} asks for more; "
                "use trainer=auto (or horovod, ddp) with backend=ray"
            )

    def world_size(self, backend: Backend) -> int:
        return 1

    # | None: HorovodTrainer's ranks other than 0 under horovodrun have no result.
    def fit(self, make_job: JobFactory, backend: Backend) -> TrainingResult | None:
        from runner.training.loop import run_training
        from runner.training.strategies import LocalStrategy

        use_gpu = local_gpu(self.settings.use_gpu)
        return run_training(replace(make_job(1), use_gpu=use_gpu), LocalStrategy(use_gpu=use_gpu))


class WorkerLost(Exception):
    """A training worker's process died (killed, out of memory, node lost)."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:200] if text else ""


def checkpoint_hint(run_dir: str) -> str:
    """What a failed run leaves to resume from, for its error message."""
    last = Path(run_dir) / "checkpoints" / checkpoints.LAST
    if last.exists():
        return f"the last checkpoint is {last}; resume with trainer.resume_from={run_dir}"
    return "no checkpoint was written"


class DistributedTrainer(LocalTrainer):
    """What Horovod and DDP on Ray share: worker count, resources, placement, retries."""

    distributed = True
    # On a backend that does not offer Ray, fit raises "trainer=<name> runs on <ray_layer>: <ray_fix>"
    ray_layer = "Ray"
    ray_fix = "add backend=ray"

    def __init__(self, **keys):
        super().__init__(**keys)
        # One id per trainer (one per run), shared by its retries: see loop._resume_point.
        self.run_id = uuid.uuid4().hex

    def _cluster(self) -> dict:
        return require_ray(f"trainer={self.name}").cluster_resources()

    def use_gpu(self) -> bool:
        if self.settings.use_gpu is not None:
            return bool(self.settings.use_gpu)
        return self._cluster().get("GPU", 0) > 0

    @property
    def resources(self) -> dict[str, float]:
        """Every key of trainer.resources_per_worker (custom resources too); a GPU each with use_gpu."""
        need = {k: float(v) for k, v in self.settings.resources_per_worker.items()}
        if self.use_gpu():
            need.setdefault("GPU", 1.0)
        return need

    @property
    def placement(self) -> str:
        """trainer.placement, else spread on CPU (workers get whole nodes' memory bandwidth and
        survive a node's loss together less often) and pack on GPU (NCCL is fastest within a node)."""
        return self.settings.placement or ("pack" if self.use_gpu() else "spread")

    def world_size(self, backend: Backend) -> int:
        if self.settings.num_workers:
            return self.settings.num_workers
        return max(int(self._cluster().get("GPU", 0)), 1)

    def _check_placeable(self, workers: int) -> None:
        """More workers than the cluster can ever hold is an error now, not a hang later."""
        total = self._cluster()
        for resource, amount in self.resources.items():
            have = total.get(resource, 0.0)
            if workers * amount > have + 1e-9:
                raise UserError(
                    f"trainer.num_workers={workers} with {amount:g} {resource} each needs "
                    f"{workers * amount:g} {resource}, but the cluster has {have:g}; lower "
                    "trainer.num_workers or trainer.resources_per_worker"
                )

    def fit(self, make_job: JobFactory, backend: Backend) -> TrainingResult | None:
        with relayed_reports() as reporter:  # a sweep's scheduler hears rank 0's epochs
            return self._fit(make_job, backend, reporter)

    def _fit(self, make_job: JobFactory, backend: Backend, reporter) -> TrainingResult:
        require_ray_backend(backend, f"trainer={self.name}", self.ray_fix, self.ray_layer)
        workers = self.world_size(backend)
        self._check_placeable(self._min_workers(workers))
        log.info(
            "trainer: %s on Ray, %d worker(s) with %s each, placement %s",
            self.name,
            workers,
            self.resources,
            self.placement,
        )
        attempt = 0
        while True:
            job = replace(
                make_job(workers),
                use_gpu=self.use_gpu(),
                run_id=self.run_id,
                resume_if_present=attempt > 0,
                epoch_reporter=reporter,
            )
            try:
                with following_rank_zero(log_dir(self.settings.logdir, job.run_dir)):
                    return self._run(job, workers)
            except (
                WorkerLost
            ) as lost:  # a worker process died: the attempt is lost, the checkpoint is not
                error = lost.error
                attempt += 1
                last = Path(job.run_dir) / "checkpoints" / checkpoints.LAST
                reason = first_line(error) or type(error).__name__
                if attempt > self.settings.max_retries:
                    raise UserError(
                        f"training failed after {attempt} attempt(s) (trainer.max_retries="
                        f"{self.settings.max_retries}): {type(error).__name__}: {reason}; "
                        f"{checkpoint_hint(job.run_dir)}"
                    ) from None
                log.warning(
                    "a training worker failed (%s: %s); retry %d/%d from %s",
                    type(error).__name__,
                    reason,
                    attempt,
                    self.settings.max_retries,
                    last if last.exists() else "the start",
                )

    def _min_workers(self, workers: int) -> int:
        """Workers the cluster must be able to hold at once (elastic runs: their minimum)."""
        return workers

    def _run(self, job: TrainingJob, workers: int) -> TrainingResult:
        raise NotImplementedError


def collect(futures: list) -> list:
    """Results of all Ray workers; fails fast. A dead worker raises WorkerLost (retried);
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
                next(e for e in [*errors, first] if isinstance(e, RayActorError))
            ) from None
        causes = [getattr(e, "cause", None) for e in [first, *errors]]
        code_errors = [c for c in causes if c is not None and not is_collective_failure(c)]
        if code_errors:
            # The training code raised (a bug, a bad value): stop now, with its message. Its
            # peers' collective errors are consequences.
            raise code_errors[0] from None
        if is_collective_failure(causes[0]):
            raise WorkerLost(first) from None
        raise


def is_collective_failure(error) -> bool:
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
