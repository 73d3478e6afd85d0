"""--multirun sweeps: the Ray launcher with distributed trials, preprocessing once,
objectives, the sweep report, failed trials, presets."""

import json

import pandas as pd
import pytest
from helpers import CONF, mlflow_sweep_runs, run_cli
from hydra import compose, initialize_config_dir


def trial_logs(sweep_dir):
    return [p.read_text() for p in sorted(sweep_dir.glob("*/run.log"))]


def local_sweep(tmp_path, *overrides):
    """A small --multirun on the basic launcher; returns the finished process and the sweep dir."""
    sweep_dir = tmp_path / "sweep"
    result = run_cli(
        "--multirun",
        "backend=local",
        "trainer.epochs=2",
        "trainer.progress_bar=false",
        "dataset.synthetic_rows=2000",
        *overrides,
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.sweep.dir={sweep_dir}",
    )
    return result, sweep_dir


@pytest.mark.distributed
def test_ray_launcher_three_families_train_on_two_workers_and_preprocess_once(tmp_path):
    """The network (Horovod), the trees (LightGBM data-parallel on Ray Train) and their
    ensemble as three trials of one sweep on the Ray launcher, each on two workers."""
    sweep_dir, cache = tmp_path / "sweep", tmp_path / "cache"
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = run_cli(
        "--multirun",
        "hydra/launcher=ray",
        "hydra.launcher.ray.init.num_cpus=2",
        "trainer=horovod",
        "trainer.num_workers=2",
        "trainer.resources_per_worker={CPU:0.5}",
        "trainer.epochs=3",
        "trainer.progress_bar=false",
        "dataset.synthetic_rows=4000",
        "model.family=network,gbm,ensemble",
        "model.gbm.ray_from_rows=0",
        "sweep.objective=val/roc_auc",
        "logger=mlflow",
        f"logger.mlflow.tracking_uri={tracking}",
        f"cache_dir={cache}",
        f"hydra.sweep.dir={sweep_dir}",
        timeout=900,
        env={"RAY_ADDRESS": ""},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = pd.read_csv(sweep_dir / "sweep_report.csv")
    assert len(report) == 3 and (report["status"] == "completed").all()
    # MLflow: one parent for the sweep, one child per trial (rank 0's alone, not one per worker).
    parents, children = mlflow_sweep_runs(tracking)
    assert len(parents) == 1 and len(children) == 3
    assert parents[0].data.tags["runner.sweep_driver"] == "ray launcher"
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert {c.data.tags["runner.trial_status"] for c in children} == {"completed"}
    assert parents[0].data.metrics["sweep/trials_completed"] == 3
    assert report["objective"].is_monotonic_decreasing  # best (highest AUC) first
    assert sorted(report["param:model.family"]) == ["ensemble", "gbm", "network"]
    for name in ("sweep_report.md", "sweep_report.png"):
        assert (sweep_dir / name).stat().st_size > 0
    assert list((sweep_dir / "tensorboard").glob("trial-*/**/events.out.tfevents.*"))
    # Two trials ran at once (2 CPUs / (2 workers x 0.5 CPU)); one preprocessed, the others reused it.
    logs = trial_logs(sweep_dir)
    assert len(logs) == 3
    assert sum("cache miss" in log for log in logs) == 1
    assert sum("preprocessing skipped: cache hit" in log for log in logs) == 2
    assert len(list(cache.glob("*/meta.json"))) == 1
    assert "at most 2 at once" in result.stdout + result.stderr
    for trial in range(3):
        record = json.loads((sweep_dir / str(trial) / "trial.json").read_text())
        metrics = json.loads((sweep_dir / str(trial) / "metrics.json").read_text())
        assert record["value"] == pytest.approx(metrics["validation"]["label/roc_auc"])
        assert metrics["training"]["world_size"] == 2
        family = next(o.split("=")[1] for o in record["overrides"] if "model.family" in o)
        saved = {p.name for p in (sweep_dir / str(trial) / "model").rglob("*")}  # members/ too
        assert ("booster.txt" in saved) == (family != "network"), saved
        assert ("weights.pt" in saved) == (family != "gbm"), saved
        # model=gbm's trees trained on Ray Train, a share of the rows each (the ensemble's
        # trained in the trial's process in this sweep).
        if family == "gbm":
            assert len(metrics["training"]["gbm_workers"]) == 2


@pytest.mark.distributed
def test_ray_launcher_trials_share_a_warm_worker_and_leave_nothing_behind(tmp_path):
    """max_calls: 0 runs trial after trial in one Ray worker (the imports once); three equal
    trials (one cache miss, two hits) in the same process give the same model to the last bit."""
    sweep_dir = tmp_path / "sweep"
    result = run_cli(
        "--multirun",
        "hydra/launcher=ray",
        "hydra.launcher.ray.init.num_cpus=2",
        "sweep.max_concurrent=1",
        "trainer.num_threads=1",
        "trainer.epochs=2",
        "trainer.progress_bar=false",
        "dataset.synthetic_rows=2000",
        "trainer.learning_rate=0.003,0.0030,3e-3",  # one value, three trials
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.sweep.dir={sweep_dir}",
        timeout=600,
        env={"RAY_ADDRESS": ""},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    records = [json.loads((sweep_dir / str(t) / "trial.json").read_text()) for t in range(3)]
    assert len({r["pid"] for r in records}) == 1  # one warm worker ran all three
    logs = trial_logs(sweep_dir)
    assert sum("cache miss" in log for log in logs) == 1
    metrics = [json.loads((sweep_dir / str(t) / "metrics.json").read_text()) for t in range(3)]
    assert metrics[0]["validation"] == metrics[1]["validation"] == metrics[2]["validation"]
    assert metrics[0]["test"] == metrics[2]["test"]


@pytest.mark.slow
def test_failed_trial_is_reported_and_others_kept(tmp_path):
    result, sweep_dir = local_sweep(tmp_path, "trainer.optimizer=adamw,rmsprop,sgd")
    assert result.returncode != 0  # Hydra reports the failed trial after the sweep
    report = pd.read_csv(sweep_dir / "sweep_report.csv").fillna("")
    assert len(report) == 3
    failed = report[report["status"] == "failed"]
    assert len(failed) == 1 and "rmsprop" in failed["overrides"].iloc[0]
    assert "trainer.optimizer=rmsprop is unknown" in failed["error"].iloc[0]
    assert (report["status"] == "completed").sum() == 2
    assert report["status"].iloc[-1] == "failed"  # failed trials rank last
    assert "| failed |" in (sweep_dir / "sweep_report.md").read_text()


@pytest.mark.slow
def test_objective_and_direction(tmp_path):
    result, sweep_dir = local_sweep(tmp_path, "model.hidden_size=8,32", "sweep.objective=test/loss")
    assert result.returncode == 0, result.stderr[-3000:]
    report = pd.read_csv(sweep_dir / "sweep_report.csv")
    assert report["objective"].is_monotonic_increasing  # a loss: lowest first
    assert "(minimize)" in (sweep_dir / "sweep_report.md").read_text()


@pytest.mark.slow
def test_optuna_search_reads_the_returned_objective(tmp_path):
    result, sweep_dir = local_sweep(tmp_path, "+sweep=optuna_lr_width", "hydra.sweeper.n_trials=4")
    assert result.returncode == 0, result.stderr[-3000:]
    report = pd.read_csv(sweep_dir / "sweep_report.csv")
    assert len(report) == 4 and (report["status"] == "completed").all()  # both batches of 2
    best = report["objective"].iloc[0]
    assert f"Best value: {best}"[:18] in result.stdout + result.stderr
    assert report["objective"].is_monotonic_decreasing


@pytest.mark.parametrize("preset", sorted(p.stem for p in (CONF / "sweep").glob("*.yaml")))
def test_sweep_presets_compose(preset):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name="config", overrides=[f"+sweep={preset}"], return_hydra_config=True
        )
    params = cfg.hydra.sweeper.params
    assert len(params) >= 2
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for key in params:  # every swept key exists in the config
            compose(config_name="config", overrides=[f"{key}={_first(params[key])}"])


def _first(value: str) -> str:
    """One concrete value of a sweep expression: a,b / choice(a,b) / range(a,b) / tag(log, interval(a, b))."""
    import re

    inner = re.sub(r"^(tag\([^,]*,\s*)?(choice|range|interval)\(", "", str(value).strip())
    return inner.split(",")[0].strip().rstrip(")")


@pytest.mark.slow
def test_submitit_local_runs_each_trial_as_a_job_sharing_the_cache(tmp_path):
    """hydra/launcher=submitit_local: two trials, each a submitit job (a process of its own,
    its CPUs from the trainer), each writing its metrics; one builds the cache entry, the
    other reads it; the sweep report ranks both."""
    result, sweep_dir = local_sweep(
        tmp_path, "hydra/launcher=submitit_local", "model.family=network,gbm"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = pd.read_csv(sweep_dir / "sweep_report.csv")
    assert len(report) == 2 and (report["status"] == "completed").all()
    for trial in range(2):
        assert json.loads((sweep_dir / str(trial) / "metrics.json").read_text())["test"]
    # submitit's local executor names a job by its process id: two processes, two results.
    jobs = [p for p in (sweep_dir / ".submitit").iterdir() if p.name.isdigit()]
    assert len(jobs) == 2
    assert len(list((sweep_dir / ".submitit").glob("*/*_result.pkl"))) == 2
    logs = trial_logs(sweep_dir)
    assert sum("cache miss" in log for log in logs) == 1
    assert len(list((tmp_path / "cache").glob("*/meta.json"))) == 1


def test_the_submitit_launchers_compose_with_their_keys():
    """--cfg hydra shows the SLURM launcher's sbatch keys; a job's CPUs come from the trainer
    where cpus_per_task is null."""
    from runner.sweeps.launcher import trial_resources

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                "hydra/launcher=submitit_slurm",
                "trainer.num_workers=4",
                "trainer.use_gpu=true",
            ],
            return_hydra_config=True,
        )
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SubmititSlurmTrialLauncher")
    assert {"partition", "account", "timeout_min", "mem_gb", "setup"} <= set(launcher)
    chosen = trial_resources(cfg, dict(launcher))
    assert chosen["cpus_per_task"] >= 4 and chosen["gpus_per_node"] == 4
    assert trial_resources(cfg, {**launcher, "cpus_per_task": 2, "gpus_per_node": 0}) == {}
