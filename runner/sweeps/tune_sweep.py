"""hydra/sweeper=tune: a `--multirun` sweep as a Ray Tune experiment.

Hydra's sweep syntax (comma lists, choice, range, interval, tag(log, interval)) from the
command line and hydra.sweeper.params becomes Tune's search space; each trial is an
ordinary run of the product (run.py's task function through Hydra's run_job, in the sweep
subdir <trial number>/, with all its outputs and trial.json); the epoch loop reports every
epoch's metrics to Tune's scheduler (runner/training/reporting.py), and a trial that ASHA
stops ends its epoch, writes its outputs and is reported `pruned`. Tune's experiment state
lives in <sweep dir>/.tune (resume: hydra.sweeper.resume=true).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf, open_dict

from runner.errors import UserError

log = logging.getLogger(__name__)
SEARCHES = ("random", "grid", "optuna")
SCHEDULERS = ("asha", "none")
EXPERIMENT = ".tune"  # Tune's state, inside the sweep dir
NUMBERS = ".trial_numbers.json"  # trial id -> sweep subdir, inside the sweep dir
FINISHED = ("completed", "pruned")  # trials a resumed sweep does not run again
STATE_SAVE_S = "2"  # how often Tune saves the experiment's state (its default: 10 s or more)


@dataclass
class SearchSpace:
    fixed: list[str]  # overrides every trial gets
    space: dict  # safe id -> Tune domain (or grid_search)
    keys: dict  # safe id -> config key

    def overrides(self, params: dict) -> list[str]:
        return self.fixed + [f"{self.keys[k]}={params[k]}" for k in sorted(params)]


def search_space(arguments: list[str], params: dict, search: str) -> SearchSpace:
    """Hydra's sweep overrides -> Tune's space. Values of choices and ranges stay Hydra's
    own strings (so `model.hidden_size=64` reaches the trial as typed); intervals sample
    numbers (log-uniform when tagged log; integers when both ends are)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Transformer
    from ray import tune

    given = [f"{k}={v}" for k, v in (params or {}).items()] + list(arguments)
    fixed, space, keys = [], {}, {}
    for override in OverridesParser.create().parse_overrides(given):
        key = override.get_key_element()
        if not override.is_sweep_override():
            fixed.append(f"{key}={override.get_value_element_as_str()}")
            continue
        safe = f"p{len(keys)}"
        keys[safe] = key
        if override.is_interval_sweep():
            if search == "grid":
                raise UserError(
                    f"{key}: an interval has no grid; give a list or range(...) with "
                    "hydra.sweeper.search=grid, or use search=random"
                )
            value = override.value()
            low, high = value.start, value.end
            log_scale = "log" in value.tags
            if isinstance(low, int) and isinstance(high, int):
                space[safe] = (
                    tune.lograndint(low, high + 1) if log_scale else tune.randint(low, high + 1)
                )
            else:
                space[safe] = tune.loguniform(low, high) if log_scale else tune.uniform(low, high)
        else:  # a comma list, choice(...) or range(...): a finite set of values
            values = list(override.sweep_iterator(transformer=Transformer.encode))
            space[safe] = tune.grid_search(values) if search == "grid" else tune.choice(values)
    if not space:
        raise UserError(
            "hydra/sweeper=tune found nothing to sweep; give e.g. trainer.learning_rate="
            "'tag(log, interval(0.0003, 0.03))' or model.hidden_size=32,64 (or hydra.sweeper.params)"
        )
    return SearchSpace(fixed, space, keys)


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
    if trainer.strategy == "ddp":
        total = {k: v * workers for k, v in bundle.items()}
        return TrialResources([dict(DRIVER_ONLY)], "PACK", [], total)
    if trainer.strategy == "horovod" or workers > 1:
        placement = (trainer.placement or ("pack" if trainer.use_gpu else "spread")).upper()
        overrides = [] if trainer.strategy == "horovod" else ["trainer.strategy=horovod"]
        return TrialResources([{}] + [dict(bundle) for _ in range(workers)], placement, overrides)
    return TrialResources([bundle], "PACK", ["backend=local"])


def scheduled_metric(objective: str) -> str:
    """The per-epoch metric the scheduler compares: the objective itself for train/val; a
    test objective is only known at the end, so epochs are compared on its val twin."""
    split, _, name = objective.partition("/")
    return f"val/{name}" if split == "test" else objective


class TuneSweeperBase(Sweeper):
    def __init__(
        self,
        num_samples: int,
        search: str,
        scheduler: str,
        grace_period: int,
        reduction_factor: float,
        max_concurrent: int | None,
        resume: bool,
        seed: int | None,
        num_cpus: float | None,
        params: dict | None,
    ):
        self.num_samples, self.search, self.scheduler = num_samples, search, scheduler
        self.grace_period, self.reduction_factor = grace_period, reduction_factor
        self.max_concurrent, self.resume, self.seed = max_concurrent, resume, seed
        self.num_cpus = num_cpus
        self.params = dict(params or {})

    def setup(self, *, hydra_context, task_function, config: DictConfig) -> None:
        self.hydra_context, self.task_function, self.config = hydra_context, task_function, config

    def sweep(self, arguments: list[str]):
        import sys

        try:
            table = self._sweep(arguments)
        except UserError as error:  # run.py's one line, for a sweep that cannot start
            print(f"error: {error}", file=sys.stderr)
            sys.exit(2)
        failed = table[table["status"] == "failed"]
        if len(failed):  # as Hydra's launchers do: the sweep ran, but not every trial did
            print(
                f"error: {len(failed)} of {len(table)} trials failed (trial "
                f"{', '.join(map(str, failed['trial']))}); their errors are in "
                f"{self.config.hydra.sweep.dir}/sweep_report.md",
                file=sys.stderr,
            )
            sys.exit(1)
        return table

    def _check(self) -> None:
        if self.search not in SEARCHES:
            raise UserError(
                f"hydra.sweeper.search={self.search} is unknown; use one of: {', '.join(SEARCHES)}"
            )
        if self.scheduler not in SCHEDULERS:
            raise UserError(
                f"hydra.sweeper.scheduler={self.scheduler} is unknown; use one of: "
                f"{', '.join(SCHEDULERS)}"
            )
        if self.num_samples < 1:
            raise UserError(f"hydra.sweeper.num_samples={self.num_samples} must be at least 1")

    def _trial_resources(self) -> TrialResources:
        from runner.config import TrainerConfig

        trainer: TrainerConfig = OmegaConf.to_object(self.config.trainer)
        resources = trial_resources(trainer)
        if resources.workers_outside and "modin" in str(self.config.processor._target_):
            raise UserError(
                "hydra/sweeper=tune: Modin's tasks cannot leave a DDP trial's placement group, "
                "which holds no CPU; use processor=dask or pandas, or trainer=horovod"
            )
        return resources

    def _check_experiment(self, sweep_dir: Path) -> None:
        """Before Ray starts: a resume needs Tune's state, a new sweep an unused dir."""
        from ray import tune

        experiment = sweep_dir / EXPERIMENT
        if self.resume and not tune.Tuner.can_restore(str(experiment)):
            raise UserError(
                f"hydra.sweeper.resume=true: {sweep_dir} holds no Tune experiment to resume; "
                "pass the killed sweep's directory as hydra.sweep.dir=..."
            )
        if not self.resume and experiment.exists():
            raise UserError(
                f"{sweep_dir} holds the Tune experiment of an earlier sweep; continue it with "
                "hydra.sweeper.resume=true, or give a new hydra.sweep.dir"
            )

    def _tune_config(self, verdicts: str, maximize: bool, concurrent: int):
        from ray import tune
        from ray.tune.schedulers import ASHAScheduler

        scheduler = None
        if self.scheduler == "asha":
            scheduler = _verdict_scheduler(ASHAScheduler)(
                verdicts,
                time_attr="epoch",  # the run's own epoch: right after a resume from a checkpoint
                max_t=int(self.config.trainer.epochs),
                grace_period=self.grace_period,
                reduction_factor=self.reduction_factor,
            )
        return tune.TuneConfig(
            metric="objective",
            mode="max" if maximize else "min",
            scheduler=scheduler,
            search_alg=self._search_algorithm(self.max_concurrent or concurrent),
            num_samples=self.num_samples,
            trial_dirname_creator=_trial_dirname,
            # A trial's process (torch, Hydra and the product imported: about 3 s here) serves
            # the next trial of the same resources.
            reuse_actors=True,
        )

    def _search_algorithm(self, concurrent: int):
        """Tune's basic generator (random, grid) or Optuna's TPE; `concurrent` trials at most
        (Tune ignores max_concurrent_trials beside a search algorithm: it goes here)."""
        from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter

        if self.search != "optuna":
            return BasicVariantGenerator(random_state=self.seed, max_concurrent=concurrent)
        from ray.tune.search.optuna import OptunaSearch

        searcher = OptunaSearch(seed=self.seed)  # metric and mode: from the TuneConfig
        log.info("search: Optuna's TPE sampler (ray.tune.search.optuna.OptunaSearch)")
        return ConcurrencyLimiter(searcher, concurrent) if concurrent else searcher

    def _sweep(self, arguments: list[str]):
        import ray
        from hydra.core.singleton import Singleton
        from ray import tune

        from runner.runtime import RayRuntime
        from runner.sweeps.objective import maximizing

        self._check()
        resources = self._trial_resources()
        space = search_space(arguments, self.params, self.search)
        space.fixed.extend(resources.overrides)
        sweep_dir = Path(os.path.abspath(str(self.config.hydra.sweep.dir)))
        self._check_experiment(sweep_dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        objective = str(self.config.sweep.objective)
        maximize = maximizing(objective, str(self.config.sweep.direction))
        runtime = RayRuntime(None, self.num_cpus, None, None, 5.0, False, "127.0.0.1", 8265, False)
        runtime.check()
        runtime.start()
        verdicts = _verdicts_name(sweep_dir)
        board = ray.remote(_SweepBoard).options(name=verdicts, get_if_exists=True, num_cpus=0)
        # lives as long as this driver: trials and scheduler find it by name
        board = board.remote(str(sweep_dir / NUMBERS))
        trial = _trial_function(
            self.hydra_context,
            self.task_function,
            self.config,
            Singleton.get_state(),
            space,
            sweep_dir,
            scheduled_metric(objective),
            os.getcwd(),
            verdicts,
            resources.workers_outside is not None,
        )
        trainable = tune.with_resources(
            trial, tune.PlacementGroupFactory(resources.bundles, resources.strategy)
        )
        experiment = str(sweep_dir / EXPERIMENT)
        started = time.perf_counter()
        os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", STATE_SAVE_S)
        if self.resume:
            log.info("resuming the Tune experiment in %s", experiment)
            tuner = tune.Tuner.restore(experiment, trainable, resume_errored=False)
        else:
            run_config = tune.RunConfig(name=EXPERIMENT, storage_path=str(sweep_dir), verbose=1)
            tuner = tune.Tuner(
                trainable,
                param_space=space.space,
                tune_config=self._tune_config(
                    verdicts, maximize, resources.concurrent(ray.cluster_resources())
                ),
                run_config=run_config,
            )
        from runner.sweeps.tracking import tracked_sweep

        with tracked_sweep(self.config, sweep_dir, "tune sweeper"):
            results = tuner.fit()
            log.info("Tune sweep: %d trials in %.1fs", len(results), time.perf_counter() - started)
            return _report(self.config, sweep_dir, results, space, objective, maximize, board)


def _trial_dirname(trial) -> str:
    return trial.trial_id


def _trial_number(board, trial_id: str) -> int:
    import ray

    return ray.get(board.number.remote(trial_id))


def _trial_function(
    hydra_context,
    task_function,
    config,
    singleton_state,
    space: SearchSpace,
    sweep_dir,
    metric,
    cwd,
    verdicts: str,
    workers_outside: bool,
):
    def trial(params: dict) -> None:
        import ray
        from hydra.core.hydra_config import HydraConfig
        from hydra.core.singleton import Singleton
        from hydra.core.utils import run_job, setup_globals
        from ray import tune

        from runner.sweeps.objective import objective_value
        from runner.training.reporting import set_epoch_reporter

        # Tune runs trials in a working dir of its own: relative paths stay the user's.
        os.chdir(cwd)
        trial_id = tune.get_context().get_trial_id()
        board = ray.get_actor(verdicts)
        number = _trial_number(board, trial_id)
        trial_dir = sweep_dir / str(number)
        finished = _finished_record(trial_dir)
        if finished is not None:  # it ended after Tune last saved its state, then the driver died
            _replay(finished)
            return
        overrides = space.overrides(params) + _resume_override(trial_dir)
        setup_globals()
        Singleton.set_state(singleton_state)  # before the config: it names the job (the log file)
        job = hydra_context.config_loader.load_sweep_config(config, overrides)
        with open_dict(job):
            job.hydra.sweep.dir = str(sweep_dir)
            job.hydra.job.id = trial_id
            job.hydra.job.num = number

        curve: list[list] = []  # [epoch, objective] as reported: kept in trial.json for a resume

        def report(record: dict) -> bool:
            values = {"train": record["train"], "validation": record["validation"]}
            value = objective_value(values, metric)
            curve.append([record["epoch"], value])
            # Tune reports synchronously: the scheduler's verdict is in before report returns.
            return _tell_tune(record["epoch"], value) and not ray.get(
                board.stopped.remote(trial_id)
            )

        _place_data_tasks(outside_the_group=workers_outside)
        HydraConfig.instance().set_config(job)
        set_epoch_reporter(report)
        try:
            ret = run_job(
                hydra_context=hydra_context,
                task_function=task_function,
                config=job,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
            )
        finally:
            set_epoch_reporter(None)
        _keep_curve(trial_dir, curve)
        ret.return_value  # noqa: B018  (re-raises the trial's error: Tune marks it errored)

    return trial


def _tell_tune(epoch: int, value) -> bool:
    """One epoch's objective to Tune's scheduler; False: it stopped this trial."""
    from ray import tune

    try:
        tune.report({"objective": value, "epoch": epoch})
    except SystemExit:  # Tune's scheduler stopped this trial (raised inside report)
        return False
    return True


def _finished_record(trial_dir: Path) -> dict | None:
    """The trial.json of a trial that completed or was pruned, else None."""
    from runner.sweeps.report import TRIAL_FILE

    path = trial_dir / TRIAL_FILE
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    return record if record.get("status") in FINISHED else None


def _replay(record: dict) -> None:
    """Tell Tune what a finished trial reported, without running (or touching) it again."""
    log.info("trial already %s in an earlier run of this sweep: not rerun", record["status"])
    curve = record.get("curve") or [[record.get("epochs") or 1, record.get("value")]]
    for epoch, value in curve:
        if not _tell_tune(epoch, value):
            break


def _resume_override(trial_dir: Path) -> list[str]:
    """An interrupted trial goes on from the last checkpoint its run wrote."""
    from runner.training import checkpoints

    if (trial_dir / "checkpoints" / checkpoints.LAST).is_file():
        log.info("trial %s continues from its last checkpoint", trial_dir.name)
        return [f"trainer.resume_from={trial_dir}"]
    return []


def _keep_curve(trial_dir: Path, curve: list) -> None:
    from runner.sweeps.report import TRIAL_FILE, write_trial

    path = trial_dir / TRIAL_FILE
    if path.is_file() and curve:
        write_trial(trial_dir, {**json.loads(path.read_text()), "curve": curve})


def _verdicts_name(sweep_dir: Path) -> str:
    import hashlib

    return "tune-verdicts-" + hashlib.sha1(str(sweep_dir).encode()).hexdigest()[:12]


class _SweepBoard:
    """A Ray actor, found by name: the trials the scheduler stopped, for the trials to read,
    and each trial's number (its sweep subdir)."""

    def __init__(self, numbers_file: str):
        self._stopped: set[str] = set()
        self._file = Path(numbers_file)
        self._numbers: dict[str, int] = (
            json.loads(self._file.read_text()) if self._file.is_file() else {}
        )

    def stop(self, trial_id: str) -> None:
        self._stopped.add(trial_id)

    def stopped(self, trial_id: str) -> bool:
        return trial_id in self._stopped

    def number(self, trial_id: str) -> int:
        """The counter in Tune's ids from its basic generator (<uuid>_00003); a searcher's
        trials have random ids, numbered in the order they first ask. Kept in the sweep dir,
        so a resumed sweep gives every trial its old number."""
        if trial_id not in self._numbers:
            counter = re.fullmatch(r"[0-9a-f]+_(\d+)", trial_id)
            taken = set(self._numbers.values())
            self._numbers[trial_id] = (
                int(counter.group(1))
                if counter
                else next(n for n in itertools.count() if n not in taken)
            )
            partial = self._file.with_suffix(".partial")
            partial.write_text(json.dumps(self._numbers))
            os.replace(partial, self._file)
        return self._numbers[trial_id]


def _verdict_scheduler(base):
    """A scheduler whose STOP becomes a verdict the trial reads after its report: the trial
    ends its epoch, writes its outputs and returns by itself. Tune's own stop would not wait
    for that (at the end of an experiment it kills trials still stopping after 5 s)."""
    from ray.tune.schedulers import TrialScheduler

    class VerdictScheduler(base):
        def __init__(self, verdicts: str, **kwargs):
            super().__init__(**kwargs)
            self._verdicts = verdicts  # a name: the scheduler is pickled into Tune's state

        def on_trial_result(self, tune_controller, trial, result: dict) -> str:
            import ray

            if super().on_trial_result(tune_controller, trial, result) == TrialScheduler.STOP:
                ray.get(ray.get_actor(self._verdicts).stop.remote(trial.trial_id))
            return TrialScheduler.CONTINUE

    VerdictScheduler.__name__ = f"Verdict{base.__name__}"
    return VerdictScheduler


def _place_data_tasks(outside_the_group: bool) -> None:
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


def _report(
    config, sweep_dir: Path, results, space: SearchSpace, objective: str, maximize: bool, board
):
    from runner.reports.html import sweep_report
    from runner.sweeps.report import record_jobs, write_report

    jobs, curves = [], {}
    for result in results:
        trial_id = Path(result.path).name  # _trial_dirname
        number = _trial_number(board, trial_id)
        frame = result.metrics_dataframe
        if frame is not None and {"objective", "epoch"} <= set(frame.columns):
            curves[number] = frame[["epoch", "objective"]].drop_duplicates("epoch", keep="last")
        params = {k: result.config[k] for k in space.keys if k in result.config}
        error = str(result.error).splitlines()[0] if result.error else ""
        jobs.append(
            {
                "num": number,
                "overrides": space.overrides(params)[len(space.fixed) :],
                "status": "failed" if result.error else "completed",
                "error": error,
                "epochs": result.metrics.get("epoch"),
                "seconds": result.metrics.get("time_total_s"),
            }
        )
    table = write_report(sweep_dir, record_jobs(sweep_dir, jobs), objective, maximize)
    _plot_epochs(curves, table, scheduled_metric(objective), sweep_dir / "sweep_epochs.png")
    if len(table):  # again, with the epochs' chart
        sweep_report(sweep_dir, table, objective, maximize)
    return table


def _plot_epochs(curves: dict, table, metric: str, path: Path) -> None:
    """The scheduled metric per epoch of every trial: the picture of what the scheduler cut."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    status = dict(zip(table["trial"], table["status"], strict=True)) if len(table) else {}
    fig, ax = plt.subplots(figsize=(6, 4))
    for number, frame in sorted(curves.items()):
        pruned = status.get(number) == "pruned"
        ax.plot(
            frame["epoch"],
            frame["objective"],
            linestyle="--" if pruned else "-",
            marker="x" if pruned else "o",
            label=f"{number} ({status.get(number, '?')})",
        )
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} per epoch (dashed: pruned)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
