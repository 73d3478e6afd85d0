"""hydra/sweeper=tune: a --multirun sweep as a Ray Tune experiment on a real local Ray, with
ASHA stopping the hopeless trials (each trial an ordinary run with its outputs)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import ROOT, error_lines, mlflow_sweep_runs, run_cli

from runner.training import checkpoints

pytestmark = [pytest.mark.distributed]


def sweep_args(tmp_path: Path, *overrides: str) -> list[str]:
    """A tune sweep on a local Ray of 2 CPUs, with its own cache and sweep dir."""
    return [
        "--multirun",
        "hydra/sweeper=tune",
        "hydra.sweeper.num_cpus=2",
        "trainer.progress_bar=false",
        *overrides,
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]


def run_sweep(
    tmp_path: Path, *overrides: str, timeout: int = 900
) -> tuple[subprocess.CompletedProcess, Path]:
    result = run_cli(*sweep_args(tmp_path, *overrides), timeout=timeout, env={"RAY_ADDRESS": ""})
    return result, tmp_path / "sweep"


def test_asha_prunes_some_trials_and_completes_others(tmp_path):
    cache = tmp_path / "cache"
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result, sweep_dir = run_sweep(
        tmp_path,
        "hydra.sweeper.num_samples=6",
        "hydra.sweeper.seed=3",
        "hydra.sweeper.grace_period=1",
        "hydra.sweeper.reduction_factor=2",
        "trainer.epochs=4",
        "dataset.synthetic_rows=3000",
        # Hopeless (a rate that barely moves the weights) against good ones:
        "trainer.learning_rate=choice(0.000001,0.00001,0.01,0.03)",
        "model.hidden_size=16,32",
        "sweep.objective=val/roc_auc",
        "logger=mlflow",
        f"logger.mlflow.tracking_uri={tracking}",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = pd.read_csv(sweep_dir / "sweep_report.csv")
    assert len(report) == 6 and set(report["trial"]) == set(range(6))
    # MLflow: a child per trial under one parent, each with the status the report gives it.
    parents, children = mlflow_sweep_runs(tracking)
    assert len(parents) == 1 and len(children) == 6
    assert parents[0].data.tags["runner.sweep_driver"] == "tune sweeper"
    statuses = {c.info.run_name: c.data.tags["runner.trial_status"] for c in children}
    assert statuses == {
        f"trial {t}": s for t, s in zip(report["trial"], report["status"], strict=True)
    }
    assert set(report["status"]) <= {"completed", "pruned"}
    pruned, completed = (
        report[report["status"] == "pruned"],
        report[report["status"] == "completed"],
    )
    assert len(pruned) >= 1 and len(completed) >= 1, report[["trial", "status", "epochs"]]
    assert (pruned["epochs"] < 4).all() and (completed["epochs"] == 4).all()
    rates = report["param:trainer.learning_rate"].astype(float)
    assert rates.nunique() > 1 and set(rates) <= {0.000001, 0.00001, 0.01, 0.03}
    for _, row in report.iterrows():  # every trial is a run with its outputs, pruned or not
        trial_dir = sweep_dir / str(row["trial"])
        trial = json.loads((trial_dir / "trial.json").read_text())
        assert trial["status"] == row["status"] and trial["epochs"] == row["epochs"]
        for name in ("model", "metrics.json", "predictions.parquet", "learning_curves.png"):
            assert (trial_dir / name).exists(), (row["trial"], name)
        history = json.loads((trial_dir / "metrics.json").read_text())
        assert history["training"]["epochs_run"] == row["epochs"]
    assert report["objective"].iloc[0] == report["objective"].max()  # best first
    for name in ("sweep_report.md", "sweep_report.png", "sweep_epochs.png"):
        assert (sweep_dir / name).stat().st_size > 0
    assert (sweep_dir / ".tune").is_dir()
    assert len(list(cache.glob("*/meta.json"))) == 1  # preprocessed once for the sweep


def test_optuna_search_samples_the_space(tmp_path):
    """search=optuna: Tune's OptunaSearch (TPE) draws the trials from Hydra's sweep syntax."""
    result, sweep_dir = run_sweep(
        tmp_path,
        "hydra.sweeper.search=optuna",
        "hydra.sweeper.num_samples=4",
        "hydra.sweeper.seed=5",
        "hydra.sweeper.scheduler=none",
        "trainer.epochs=2",
        "dataset.synthetic_rows=2000",
        "trainer.learning_rate=tag(log, interval(0.0001, 0.1))",
        "model.hidden_size=choice(16,32)",
        "sweep.objective=val/roc_auc",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "search: Optuna's TPE sampler" in result.stdout + result.stderr
    report = pd.read_csv(sweep_dir / "sweep_report.csv")
    assert len(report) == 4 and (report["status"] == "completed").all()
    rates = report["param:trainer.learning_rate"].astype(float)
    assert rates.between(0.0001, 0.1).all() and rates.nunique() == 4
    assert set(report["param:model.hidden_size"].astype(int)) <= {16, 32}
    assert report["objective"].notna().all()


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["trainer=horovod", "trainer.min_workers=1", "trainer.max_workers=2"],
            "for elastic trials use hydra/launcher=ray",
        ),
        (
            ["trainer=ddp", "trainer.num_workers=2", "processor=modin"],
            "Modin's tasks cannot leave a DDP trial's placement group",
        ),
        (["trainer.learning_rate=0.01"], "found nothing to sweep"),
        (
            ["trainer.learning_rate=interval(0.01,0.1)", "hydra.sweeper.search=grid"],
            "an interval has no grid",
        ),
    ],
)
def test_sweeps_that_cannot_run_well_are_one_line(tmp_path, overrides, message):
    result = run_cli(
        "--multirun", "hydra/sweeper=tune", *overrides, f"hydra.sweep.dir={tmp_path / 's'}"
    )
    assert result.returncode == 2, result.stderr[-2000:]
    errors = error_lines(result)
    assert len(errors) == 1 and message in errors[0], result.stderr[-2000:]


@pytest.mark.parametrize(
    "setting, message",
    [
        (
            "hydra.sweeper.search=bayes",
            "error: hydra.sweeper.search=bayes is unknown; use one of: random, grid, optuna",
        ),
        (
            "hydra.sweeper.reduction_factor=1",
            "error: hydra.sweeper.reduction_factor=1.0 is out of range: it must be more than 1",
        ),
        (
            "hydra.sweeper.max_concurrent=0",
            "error: hydra.sweeper.max_concurrent=0 is out of range: it must be at least 1, or null",
        ),
    ],
)
def test_a_bad_sweeper_setting_is_one_line(tmp_path, setting, message):
    """The settings' schema (TuneSweeperConfig) checks them before Ray starts."""
    result = run_cli(
        "--multirun",
        "hydra/sweeper=tune",
        setting,
        "trainer.learning_rate=0.01,0.03",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    )
    assert result.returncode == 2
    assert error_lines(result) == [message]
    assert not (tmp_path / "sweep").exists()  # nothing half-written


@pytest.mark.parametrize(
    "trainer, processor, loader",
    # a DDP trial's group holds no CPU: its Dask tasks must be sent outside it. A streaming
    # loader reads in the workers themselves: no task waits for the CPUs the trial holds
    # (smaller batches: enough steps in the first epoch to tell the two rates apart).
    [
        (
            "horovod",
            "auto",
            ["loader=ray", "loader.window_size_bytes=100000", "loader.batch_size=64"],
        ),
        ("ddp", "dask", []),
    ],
)
def test_trials_train_with_two_workers_and_are_pruned_through_them(
    tmp_path, trainer, processor, loader
):
    """Each trial trains with 2 workers on Ray, so on 2 CPUs one trial runs at a time
    (Horovod: the trial's placement group holds 2 worker bundles, its driver none; DDP: Ray
    Train places its workers in a group of its own, and the sweep runs as many trials as
    the cluster has room for their workers); rank 0's epochs reach the scheduler, and its
    stop ends both workers after that epoch."""
    result, sweep_dir = run_sweep(
        tmp_path,
        "hydra.sweeper.search=grid",  # trial 0 the good rate, trial 1 the hopeless one
        "hydra.sweeper.num_samples=1",
        f"trainer={trainer}",
        f"processor={processor}",
        *loader,
        "trainer.num_workers=2",
        "trainer.epochs=2",
        "dataset.synthetic_rows=3000",
        "trainer.learning_rate=0.03,0.000001",
        "sweep.objective=val/roc_auc",
        # Plain numbers: piecewise-linear bins make even the untrained network's epoch-1 AUC
        # close to the good rate's, and ASHA's cut a coin toss.
        "model.number_encoder=none",
        # The network's epochs are what ASHA hears; the default's trees after them would only
        # shift the trials' timing (side by side under DDP: which one reaches a rung first).
        "model.family=network",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = pd.read_csv(sweep_dir / "sweep_report.csv").set_index("trial")
    assert report.loc[0, "status"] == "completed" and report.loc[0, "epochs"] == 2
    assert report.loc[1, "status"] == "pruned" and report.loc[1, "epochs"] == 1
    for trial in (0, 1):
        trial_dir = sweep_dir / str(trial)
        training = json.loads((trial_dir / "metrics.json").read_text())["training"]
        assert training["world_size"] == 2
        assert training["epochs_run"] == report.loc[trial, "epochs"]
        assert (trial_dir / "model").exists() and (trial_dir / "predictions").is_dir()
        assert (trial_dir / "run.log").exists()  # the job keeps its name inside a trial
        log = (trial_dir / "run.log").read_text()
        assert f"trainer {trainer}" in log
        assert processor == "auto" or f"processor {processor}" in log


def _files(directory: Path) -> dict[str, int]:
    return {
        str(p.relative_to(directory)): p.stat().st_mtime_ns
        for p in directory.rglob("*")
        if p.is_file()
    }


def _kill_session(process: subprocess.Popen) -> None:
    """SIGKILL the sweep's driver; its local Ray's raylet and GCS go with it (fate sharing),
    and whatever of its process group is left after 5 s is killed too (Ray's dashboard and
    runtime-env agents outlived the raylet by more than 30 s here)."""
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    os.killpg(process.pid, signal.SIGKILL)


RESUME_EPOCHS = 20


def test_killed_driver_resumes_without_rerunning_finished_trials(tmp_path):
    sweep_dir = tmp_path / "sweep"
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    command = [
        sys.executable,
        str(ROOT / "run.py"),
        *sweep_args(
            tmp_path,
            "hydra.sweeper.search=grid",
            "hydra.sweeper.num_samples=1",
            "hydra.sweeper.scheduler=none",
            "hydra.sweeper.max_concurrent=1",
            f"trainer.epochs={RESUME_EPOCHS}",
            "trainer.early_stopping.patience=100",
            "dataset.synthetic_rows=5000",  # epochs of about 0.3 s: the kill lands mid-trial
            "trainer.learning_rate=0.03,0.01,0.02",
            "sweep.objective=val/roc_auc",
            "logger=mlflow",
            f"logger.mlflow.tracking_uri={tracking}",
        ),
    ]
    env = {**os.environ, "RAY_ADDRESS": ""}
    log = (tmp_path / "first.log").open("w")
    first = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True
    )
    # Kill it once trial 0 has finished and trial 1 has a checkpoint but has not finished.
    interrupted = sweep_dir / "1"
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and first.poll() is None:
            if (sweep_dir / "0" / "trial.json").exists() and (
                interrupted / "checkpoints" / checkpoints.LAST
            ).exists():
                break
            time.sleep(0.2)
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
        assert not (interrupted / "trial.json").exists()
    finally:
        _kill_session(first)
    finished = _files(sweep_dir / "0")
    assert not (sweep_dir / "2").exists()

    result = subprocess.run(
        [*command, "hydra.sweeper.resume=true"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert _files(sweep_dir / "0") == finished  # not rerun: not one file touched
    report = pd.read_csv(sweep_dir / "sweep_report.csv").set_index("trial")
    assert sorted(report.index) == [0, 1, 2]
    assert (report["status"] == "completed").all() and (report["epochs"] == RESUME_EPOCHS).all()
    training = json.loads((interrupted / "metrics.json").read_text())["training"]
    assert training["resumed_at_epoch"] >= 1  # went on from its checkpoint
    assert "resumed from" in (interrupted / "run.log").read_text()
    # MLflow: the resumed sweep reopens its parent and logs no trial twice.
    parents, children = mlflow_sweep_runs(tracking)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(c.info.run_name for c in children) == ["trial 0", "trial 1", "trial 2"]
    assert {c.data.tags["runner.trial_status"] for c in children} == {"completed"}


def test_resume_without_an_experiment_is_one_line(tmp_path):
    result = run_cli(
        "--multirun",
        "hydra/sweeper=tune",
        "hydra.sweeper.resume=true",
        "trainer.learning_rate=0.01,0.03",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        env={"RAY_ADDRESS": ""},
    )
    assert result.returncode == 2
    errors = error_lines(result)
    assert len(errors) == 1 and "holds no Tune experiment" in errors[0], result.stderr[-2000:]


def test_failed_trial_is_reported_and_the_sweep_goes_on(tmp_path):
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result, sweep_dir = run_sweep(
        tmp_path,
        "hydra.sweeper.search=grid",
        "hydra.sweeper.num_samples=1",
        "hydra.sweeper.scheduler=none",
        "trainer.epochs=1",
        "dataset.synthetic_rows=2000",
        "trainer.optimizer=adamw,rmsprop",
        "logger=mlflow",
        f"logger.mlflow.tracking_uri={tracking}",
        timeout=600,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    parents, children = mlflow_sweep_runs(tracking)
    statuses = {c.info.run_name: c.data.tags["runner.trial_status"] for c in children}
    assert len(parents) == 1 and statuses == {"trial 0": "completed", "trial 1": "failed"}
    failed = next(c for c in children if c.info.run_name == "trial 1")
    assert (
        failed.info.status == "FAILED" and "rmsprop is unknown" in failed.data.tags["runner.error"]
    )
    assert failed.data.params["trainer.optimizer"] == "rmsprop"
    assert "error: 1 of 2 trials failed (trial 1)" in result.stderr
    report = pd.read_csv(sweep_dir / "sweep_report.csv").fillna("").set_index("trial")
    assert report.loc[0, "status"] == "completed" and report.loc[0, "epochs"] == 1
    assert report.loc[1, "status"] == "failed"
    assert "trainer.optimizer=rmsprop is unknown" in report.loc[1, "error"]
    assert "| failed |" in (sweep_dir / "sweep_report.md").read_text()


def test_asha_prunes_tree_trials_on_their_boosting_rounds(tmp_path):
    """model=gbm: the trees report every num_boost_round / trainer.epochs rounds as an epoch
    to ASHA, which stops the hopeless (a rate that barely moves the scores)."""
    result, sweep_dir = run_sweep(
        tmp_path,
        "model=gbm",
        "hydra.sweeper.num_samples=4",
        # One at a time, a good rate first (seed 2 draws 0.2, then 0.00001 three times): a tree
        # trial ends in a second, so trials at once race to the rungs, and ASHA never stops the
        # first trial to reach a rung.
        "hydra.sweeper.seed=2",
        "hydra.sweeper.max_concurrent=1",
        "trainer.epochs=4",
        "dataset.synthetic_rows=3000",
        "model.gbm.num_boost_round=200",
        "model.gbm.early_stopping_rounds=0",
        "model.gbm.learning_rate=0.00001,0.2",
        "sweep.objective=val/loss",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = pd.read_csv(sweep_dir / "sweep_report.csv")
    assert len(report) == 4 and set(report["status"]) <= {"completed", "pruned"}
    pruned = report[report["status"] == "pruned"]
    shown = report[["trial", "status", "epochs", "param:model.gbm.learning_rate"]]
    assert len(pruned) >= 1 and (pruned["epochs"] < 4).all(), shown
    assert (pruned["param:model.gbm.learning_rate"].astype(float) == 0.00001).all()
    best = report.iloc[0]
    assert float(best["param:model.gbm.learning_rate"]) == 0.2 and best["status"] == "completed"
    for trial in report["trial"]:  # every trial a run with its trees
        assert (sweep_dir / str(trial) / "model" / "booster.txt").exists()
