"""trainer=ddp: torch DistributedDataParallel through Ray Train's TorchTrainer.

Ray Train restarts a worker group after any failure; here a restart must mean a
lost worker only, so Ray Train runs each attempt with max_failures=0 and the
shared retry loop (DistributedTrainer.fit) decides: a worker that raised records
its exception, which stops the run at once; otherwise a worker was lost, and the
next attempt resumes from the checkpoint.
"""

from __future__ import annotations

import pickle
from pathlib import Path

from runner.config import DDPTrainerConfig
from runner.training import workers as worker_setup
from runner.training.follow import log_dir
from runner.training.job import TrainingJob, TrainingResult
from runner.training.loop import run_training
from runner.training.trainers import (
    DistributedTrainer,
    WorkerLost,
    first_line,
    is_collective_failure,
)

RESULT_FILE = "result.pkl"


def _error_file(job: TrainingJob, rank: int) -> Path:
    return Path(job.run_dir) / "workers" / f"error-{job.run_id}-rank-{rank}.pkl"


def _ddp_worker(config: dict) -> None:
    import ray.train

    from runner.training.strategies import DDPStrategy

    job: TrainingJob = config["job"]
    strategy = DDPStrategy(use_gpu=job.use_gpu, compression=job.settings.compression)
    worker_setup.log_to_file(log_dir(job.settings.logdir, job.run_dir), strategy.rank)
    if ray.train.get_context().get_world_rank() != strategy.rank:
        raise RuntimeError("Ray Train and torch.distributed disagree on this worker's rank")
    try:
        result = run_training(job, strategy)
    except Exception as error:
        if not is_collective_failure(error):  # the training code raised: the driver must not retry
            path = _error_file(job, strategy.rank)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(pickle.dumps(error))
        raise
    if strategy.is_main:
        with open(Path(job.run_dir) / "checkpoints" / RESULT_FILE, "wb") as handle:
            pickle.dump(result, handle)


class DDPTrainer(DistributedTrainer):
    """Ray Train's TorchTrainer: ScalingConfig and RunConfig mapped from our keys."""

    name = "ddp"
    schema = DDPTrainerConfig
    ray_layer = "Ray Train"

    def _run(self, job: TrainingJob, workers: int) -> TrainingResult:
        from ray.train import FailureConfig, RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer

        from runner.training.ray_train import without_cleaner

        assert job.run_id is not None  # _fit gives every attempt the trainer's
        storage = log_dir(self.settings.logdir, job.run_dir).absolute()
        trainer = without_cleaner(TorchTrainer)(
            _ddp_worker,
            train_loop_config={"job": job},
            torch_config=TorchConfig(backend="nccl" if job.use_gpu else "gloo"),
            scaling_config=ScalingConfig(
                num_workers=workers,
                use_gpu=job.use_gpu,
                resources_per_worker=self.resources,
                placement_strategy=self.placement.upper(),
            ),
            run_config=RunConfig(
                name=f"ddp-{job.run_id[:8]}",
                storage_path=str(storage),
                failure_config=FailureConfig(max_failures=0),
            ),
        )
        try:
            trainer.fit()
        except Exception as error:
            raised = sorted(_error_file(job, 0).parent.glob(f"error-{job.run_id}-rank-*.pkl"))
            if raised:
                cause = pickle.loads(raised[0].read_bytes())
                for path in raised:
                    path.unlink()
                raise cause from None
            raise WorkerLost(RuntimeError(first_line(error) or type(error).__name__)) from None
        with open(Path(job.run_dir) / "checkpoints" / RESULT_FILE, "rb") as handle:
            return pickle.load(handle)
