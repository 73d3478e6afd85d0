"""The Hydra Sweeper: checks the settings, starts Ray and Tune's experiment, reports."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import cast

from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf

from runner.config import TuneSweeperConfig
from runner.errors import UserError
from runner.sweeps.tune.board import NUMBERS, SweepBoard, verdict_scheduler, verdicts_name
from runner.sweeps.tune.placement import TrialResources, trial_resources
from runner.sweeps.tune.results import report_sweep
from runner.sweeps.tune.space import scheduled_metric, search_space
from runner.sweeps.tune.trial import trial_dirname, trial_function

log = logging.getLogger(__name__)
EXPERIMENT = ".tune"  # Tune's state, inside the sweep dir
STATE_SAVE_S = "2"  # how often Tune saves the experiment's state (its default: 10 s or more)


class TuneSweeperBase(Sweeper):
    config: DictConfig  # given to setup(), which Hydra calls before sweep()

    def __init__(self, **settings):
        self.given = settings  # Hydra's instantiate passes every key but _target_
        self._settings: TuneSweeperConfig | None = None

    @property
    def settings(self) -> TuneSweeperConfig:
        """The checked settings: built at first use, inside sweep(), so a bad value is one
        error line instead of Hydra's trace from instantiating the sweeper."""
        if self._settings is None:
            self._settings = TuneSweeperConfig(**self.given)
        return self._settings

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

    def _trial_resources(self) -> TrialResources:
        from runner.config import TrainerConfig

        trainer = cast(TrainerConfig, OmegaConf.to_object(self.config.trainer))
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
        if self.settings.resume and not tune.Tuner.can_restore(str(experiment)):
            raise UserError(
                f"hydra.sweeper.resume=true: {sweep_dir} holds no Tune experiment to resume; "
                "pass the killed sweep's directory as hydra.sweep.dir=..."
            )
        if not self.settings.resume and experiment.exists():
            raise UserError(
                f"{sweep_dir} holds the Tune experiment of an earlier sweep; continue it with "
                "hydra.sweeper.resume=true, or give a new hydra.sweep.dir"
            )

    def _tune_config(self, verdicts: str, maximize: bool, concurrent: int):
        from ray import tune
        from ray.tune.schedulers import ASHAScheduler

        scheduler = None
        if self.settings.scheduler == "asha":
            scheduler = verdict_scheduler(ASHAScheduler)(
                verdicts,
                time_attr="epoch",  # the run's own epoch: right after a resume from a checkpoint
                max_t=int(self.config.trainer.epochs),
                grace_period=self.settings.grace_period,
                reduction_factor=self.settings.reduction_factor,
            )
        return tune.TuneConfig(
            metric="objective",
            mode="max" if maximize else "min",
            scheduler=scheduler,
            search_alg=self._search_algorithm(self.settings.max_concurrent or concurrent),
            num_samples=self.settings.num_samples,
            trial_dirname_creator=trial_dirname,
            # A trial's process (torch, Hydra and the product imported: about 3 s here) serves
            # the next trial of the same resources.
            reuse_actors=True,
        )

    def _search_algorithm(self, concurrent: int):
        """Tune's basic generator (random, grid) or Optuna's TPE; `concurrent` trials at most
        (Tune ignores max_concurrent_trials beside a search algorithm: it goes here)."""
        from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter

        if self.settings.search != "optuna":
            return BasicVariantGenerator(random_state=self.settings.seed, max_concurrent=concurrent)
        from ray.tune.search.optuna import OptunaSearch

        searcher = OptunaSearch(seed=self.settings.seed)  # metric and mode: from the TuneConfig
        log.info("search: Optuna's TPE sampler (ray.tune.search.optuna.OptunaSearch)")
        return ConcurrencyLimiter(searcher, concurrent) if concurrent else searcher

    def _sweep(self, arguments: list[str]):
        import ray
        from hydra.core.singleton import Singleton
        from ray import tune

        from runner.runtime import RayRuntime
        from runner.sweeps.objective import maximizing

        settings = self.settings
        resources = self._trial_resources()
        space = search_space(arguments, settings.params, settings.search)
        space.fixed.extend(resources.overrides)
        sweep_dir = Path(os.path.abspath(str(self.config.hydra.sweep.dir)))
        self._check_experiment(sweep_dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        objective = str(self.config.sweep.objective)
        maximize = maximizing(objective, str(self.config.sweep.direction))
        runtime = RayRuntime(
            None, settings.num_cpus, None, None, 5.0, False, "127.0.0.1", 8265, False
        )
        runtime.check()
        runtime.start()
        verdicts = verdicts_name(sweep_dir)
        board_class = ray.remote(SweepBoard).options(name=verdicts, get_if_exists=True, num_cpus=0)
        # lives as long as this driver: trials and scheduler find it by name
        board = board_class.remote(str(sweep_dir / NUMBERS))
        trial = trial_function(
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
        if settings.resume:
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
            return report_sweep(self.config, sweep_dir, results, space, objective, maximize, board)
