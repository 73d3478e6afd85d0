"""Where a trial runs: its placement group, and its tasks kept inside it."""

from __future__ import annotations

from dataclasses import dataclass

from runner.config import HorovodTrainerConfig
from runner.errors import UserError


@dataclass
class TrialResources:
    bundles: list[dict]  # Tune's placement group for one trial: its driver's bundle first
    strategy: str  # of the group: PACK | SPREAD
    overrides: list[str]  # what every trial's run gets on top of the sweep's
    workers_outside: dict | None = None  # a DDP trial: what its workers take outside the group

    def concurrent(self, cluster: dict) -> int:
        """Trials at once: unbounded for trials whose group holds their workers (Tune places
        only what fits); for DDP trials, whose workers Ray Train places in a group of its
        own, as many as the cluster holds workers for."""
        if self.workers_outside is None:
            return 0
        fits = [cluster.get(k, 0.0) // v for k, v in self.workers_outside.items() if v > 0]
        return max(1, int(min(fits, default=1)))


# A DDP trial's driver needs no CPU, but Tune's group needs a non-empty bundle: one byte of
# Ray's memory resource, which never keeps a trial or a worker from being placed.
DRIVER_ONLY = {"memory": 1.0}


def trial_resources(trainer) -> TrialResources:
    """A trial that trains in its own process (one worker) holds that worker's CPU and runs
    locally; a Horovod trial's driver holds nothing and its group holds one bundle per
    worker, which the trial's Horovod workers, data tasks and scoring actors all use. No
    trial needs more than its group, so trials never wait on each other's CPUs.

    Ray Train (trainer=ddp) always puts its workers in a placement group of its own, which
    cannot live inside the trial's: a DDP trial's group holds only its driver, its data
    tasks and scoring actors run outside it, and the sweep runs as many DDP trials at once
    as the cluster has room for their workers (Ray Train's own advice for Train in Tune)."""
    workers = trainer.num_workers or 1
    if trainer.elastic:
        raise UserError(
            "hydra/sweeper=tune trains distributed trials with a fixed trainer.num_workers; "
            "for elastic trials use hydra/launcher=ray"
        )
    bundle = {k: float(v) for k, v in trainer.resources_per_worker.items()} or {"CPU": 1.0}
    if trainer.use_gpu:
        bundle.setdefault("GPU", 1.0)
    if trainer.kind == "ddp":
        total = {k: v * workers for k, v in bundle.items()}
        return TrialResources([dict(DRIVER_ONLY)], "PACK", [], total)
    if trainer.kind == "horovod" or workers > 1:
        placement = (trainer.placement or ("pack" if trainer.use_gpu else "spread")).upper()
        # trainer=auto (or one of your own) with several workers trains with Horovod here.
        horovod = f"trainer._target_={HorovodTrainerConfig._target_}"
        overrides = [] if trainer.kind == "horovod" else [horovod]
        return TrialResources([{}] + [dict(bundle) for _ in range(workers)], placement, overrides)
    return TrialResources([bundle], "PACK", ["backend=local"])


def place_data_tasks(outside_the_group: bool) -> None:
    """Ray Data schedules its tasks and actors SPREAD across the cluster, outside the trial's
    placement group, where every CPU may be held by trials: they would wait for good. Inside
    the group they use the trial's own bundles (idle while the trial reads, preprocesses and
    scores); the trial's other tasks go there too. A DDP trial's group holds no CPU (Ray
    Train's workers are in a group of their own): its tasks run outside it, in CPUs the
    sweep's concurrency leaves free (TrialResources.concurrent)."""
    import warnings

    import ray
    from ray.data import DataContext
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from runner.runtime import place_tasks

    group = ray.util.get_current_placement_group()
    if group is None:
        return
    if outside_the_group:
        place_tasks("DEFAULT")
        return
    strategy = PlacementGroupSchedulingStrategy(group, placement_group_capture_child_tasks=True)
    place_tasks(strategy)
    with warnings.catch_warnings():  # deprecated "after January 2027", no replacement yet
        warnings.simplefilter("ignore")
        DataContext.get_current().scheduling_strategy = strategy
