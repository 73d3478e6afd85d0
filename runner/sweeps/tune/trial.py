"""One trial: an ordinary run of the product in its sweep subdir, reporting every epoch to
Tune; a trial that finished before a resume is replayed, one cut short goes on from its
checkpoint."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from omegaconf import open_dict

from runner.sweeps.tune.board import trial_number
from runner.sweeps.tune.placement import place_data_tasks
from runner.sweeps.tune.space import SearchSpace

log = logging.getLogger(__name__)
FINISHED = ("completed", "pruned")  # trials a resumed sweep does not run again


def trial_dirname(trial) -> str:
    return trial.trial_id


def trial_function(
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
        number = trial_number(board, trial_id)
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

        place_data_tasks(outside_the_group=workers_outside)
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
