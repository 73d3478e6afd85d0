"""backend=horovod: this process is one rank of a `horovodrun -np N python run.py ...` job.

Rank 0 preprocesses first while the others wait, then every rank finds the
cache entry (use a cache_dir all hosts can read, e.g. s3://, across machines);
each rank trains on its shard of the cache; all ranks share rank 0's run dir, and
only rank 0 writes the outputs.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)
HOROVODRUN_VARIABLES = (
    "HOROVOD_RANK",
    "HOROVOD_SIZE",
    "HOROVOD_HOSTNAME",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
)


def launched_by_horovodrun() -> str | None:
    """The environment variable that shows this process was started by horovodrun/mpirun, if any."""
    return next((name for name in HOROVODRUN_VARIABLES if name in os.environ), None)


def launched_rank() -> int | None:
    """This process's rank when horovodrun/mpirun started it (before Horovod is initialised)."""
    for name in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if name in os.environ:
            return int(os.environ[name])
    return None


# Horovod's background thread negotiates every HOROVOD_CYCLE_TIME ms (its default: 1). On CPU
# workers sharing cores with it, 2 ms trained faster in every setting measured (docs/benchmarks.md:
# 2 workers on 2 cores, +7% on the default model, +6-18% at batch 64, level on a 3 x 512 MLP);
# 10 ms and more starve short steps. GPU workers keep Horovod's own default.
CPU_CYCLE_TIME_MS = "2"


def horovod_env(environ: dict[str, str], use_gpu: bool, timeline: str | None) -> dict[str, str]:
    """The HOROVOD_* variables a worker starts with: the driver's own (cycle time, fusion
    threshold, ...), with the CPU cycle time where none is set; trainer.timeline becomes
    HOROVOD_TIMELINE (rank 0 writes it; Horovod reads both at init)."""
    env = {k: v for k, v in environ.items() if k.startswith("HOROVOD_")}
    if not use_gpu:
        env.setdefault("HOROVOD_CYCLE_TIME", CPU_CYCLE_TIME_MS)
    if timeline:
        env["HOROVOD_TIMELINE"] = os.path.abspath(os.path.expanduser(timeline))
    return env


class HorovodBackend:
    name = "horovod"
    offers_ray = False
    launched_ranks = True
    timeline: str | None = None  # trainer.timeline, set at assembly: Horovod reads it at init

    def __enter__(self):
        import horovod.torch as hvd
        import torch

        # trainer.use_gpu is read later, with the job: a GPU here keeps Horovod's own cycle.
        os.environ.update(horovod_env(dict(os.environ), torch.cuda.is_available(), self.timeline))

        hvd.init()
        self.hvd = hvd
        self.rank, self.size = hvd.rank(), hvd.size()
        log.info("horovod backend: rank %d of %d", self.rank, self.size)
        return self

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def main_first(self, fn):
        if self.is_main:
            try:
                result = fn()
            finally:
                self.hvd.broadcast_object(True, root_rank=0, name="main_first")
            return result
        self.hvd.broadcast_object(None, root_rank=0, name="main_first")
        return fn()

    def share(self, value):
        return self.hvd.broadcast_object(value, root_rank=0, name="share")

    def gather(self, value):
        return self.hvd.allgather_object(value, name="gather")

    def __exit__(self, *exc) -> None:
        self.hvd.shutdown()
