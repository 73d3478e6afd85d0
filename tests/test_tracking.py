"""logger=mlflow against a real MLflow tracking server (`mlflow server`, SQLite backend, its
own process on a free port) and against the embedded SQLite default: a run's params,
per-epoch metrics, tags, artifacts and pyfunc model (loaded, and served by `mlflow models
serve`); a sweep's parent and child runs."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from helpers import free_port, mlflow_sweep_runs, run_cli, wait_until_serving
from mlflow.tracking import MlflowClient

from runner.processing.synthetic import make_synthetic
from runner.redact import redact, redact_uri
from runner.scoring.predictor import Predictor
from runner.tracking.mlflow.client import flatten

SECRET = "s3cr3t-pw"


MLFLOW_CLI = Path(sys.executable).parent / "mlflow"


@contextlib.contextmanager
def serving(command: list[str], ready_url: str, log: Path):
    """A server process (its own process group: MLflow starts uvicorn under it), once
    `ready_url` answers 200; the whole group stopped when the block ends."""
    # MLflow finds uvicorn on PATH: the venv's bin, as an activated venv has it.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    server = subprocess.Popen(
        command,
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PATH": path},
        start_new_session=True,
    )
    try:
        wait_until_serving(server, ready_url, log=log)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """A tracking server as a team runs one: its own process, SQLite store, served artifacts."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        str(MLFLOW_CLI),
        "server",
        "--backend-store-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination",
        str(root / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    with serving(command, f"{url}/health", root / "server.log"):
        yield url


def small_run(tmp_path, *overrides, cwd=None, flags=()):
    return run_cli(
        *flags,
        "logger=mlflow",
        "backend=local",
        "dataset.synthetic_rows=2000",
        "trainer.epochs=3",
        "trainer.progress_bar=false",
        f"cache_dir={tmp_path / 'cache'}",
        *overrides,
        cwd=cwd,
    )


def only_run(client: MlflowClient, experiment: str = "tabular-runner", filter_string: str = ""):
    found = client.get_experiment_by_name(experiment)
    runs = client.search_runs([found.experiment_id], filter_string)
    assert len(runs) == 1, [r.info.run_name for r in runs]
    return runs[0]


@pytest.mark.slow
def test_a_run_logs_params_epochs_artifacts_and_a_pyfunc_model(tmp_path, mlflow_server):
    run_dir = tmp_path / "run"
    # Credentials in the tracking URI reach the server but never a param, a tag or the output.
    with_password = mlflow_server.replace("http://", f"http://alice:{SECRET}@")
    result = small_run(
        tmp_path,
        f"logger.mlflow.tracking_uri={with_password}",
        "logger.mlflow.experiment_name=server-test",
        "+logger.mlflow.tags={team: tabular}",
        f"hydra.run.dir={run_dir}",
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert SECRET not in result.stdout + result.stderr
    assert SECRET not in (run_dir / "run.log").read_text()
    client = MlflowClient(mlflow_server)
    run = only_run(client, "server-test")
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    params, tags = run.data.params, run.data.tags
    assert params["trainer.epochs"] == "3" and params["dataset.synthetic_rows"] == "2000"
    assert params["logger.mlflow.tracking_uri"] == redact_uri(with_password)
    assert not any(SECRET in v for v in [*params.values(), *tags.values()])
    # The components auto picked and where it ran, and the user's own tags.
    assert tags["runner.backend"] == "local" and tags["runner.processor"] == "pandas"
    assert tags["runner.trainer"] == "local" and tags["team"] == "tabular"
    assert tags["mlflow.source.git.commit"]  # the tests run in the repository's checkout
    # Every epoch's train and validation metrics, with their step; the best and test values.
    history = client.get_metric_history(run.info.run_id, "validation/loss")
    assert [m.step for m in history] == [1, 2, 3]
    assert [m.step for m in client.get_metric_history(run.info.run_id, "train/label/roc_auc")] == [
        1,
        2,
        3,
    ]
    metrics = run.data.metrics
    written = pd.read_json(run_dir / "metrics.json", typ="series")
    assert metrics["test/label/roc_auc"] == pytest.approx(written["test"]["label/roc_auc"])
    # The default here is the ensemble: its best is the kept model's, no worse than its network's.
    assert metrics["best/validation/loss"] == pytest.approx(written["validation"]["loss"])
    assert metrics["best/validation/loss"] <= min(m.value for m in history) + 1e-6
    assert metrics["training/epochs_run"] == 3
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"metrics.json", "learning_curves.png", "model", "pyfunc"} <= artifacts
    assert "mlflow" in result.stdout and run.info.run_id in result.stdout
    # The pyfunc model answers what the Predictor answers.
    local = client.download_artifacts(run.info.run_id, "pyfunc", str(tmp_path))
    pyfunc = mlflow.pyfunc.load_model(local)
    frame = make_synthetic(300, seed=5)
    ours = Predictor.load(run_dir / "model").predict(frame)
    theirs = pyfunc.predict(frame)
    assert list(theirs.columns) == list(ours.columns)
    assert (theirs["label_prediction"] == ours["label_prediction"]).all()
    np.testing.assert_allclose(theirs["label_probability"], ours["label_probability"], atol=1e-6)
    # `mlflow models serve` answers the same over HTTP, and a bad request with a 400.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [str(MLFLOW_CLI), "models", "serve", "-m", local, "--env-manager", "local"]
    command += ["-h", "127.0.0.1", "-p", str(port)]
    with serving(command, f"{url}/ping", tmp_path / "models-serve.log"):
        body = {"dataframe_split": json.loads(frame.to_json(orient="split", index=False))}
        served = pd.DataFrame(post_json(f"{url}/invocations", body)[1]["predictions"])
        assert [str(v) for v in served["label_prediction"]] == [
            str(v) for v in ours["label_prediction"]
        ]
        np.testing.assert_allclose(
            served["label_probability"], ours["label_probability"], atol=1e-6
        )
        assert post_json(f"{url}/invocations", {"rows": []})[0] == 400
        assert post_json(f"{url}/invocations", body)[0] == 200  # and it goes on serving


def post_json(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.slow
def test_a_three_trial_sweep_is_a_parent_with_three_children(tmp_path, mlflow_server):
    sweep_dir = tmp_path / "sweep"
    result = small_run(
        tmp_path,
        f"logger.mlflow.tracking_uri={mlflow_server}",
        "logger.mlflow.experiment_name=sweep-test",
        "trainer.learning_rate=0.001,0.003,0.01",
        "sweep.objective=val/roc_auc",
        f"hydra.sweep.dir={sweep_dir}",
        flags=["--multirun"],
    )
    assert result.returncode == 0, result.stderr[-4000:]
    client = MlflowClient(mlflow_server)
    parents, children = mlflow_sweep_runs(mlflow_server, "sweep-test")
    assert len(parents) == 1 and len(children) == 3
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert sorted(c.data.params["trainer.learning_rate"] for c in children) == [
        "0.001",
        "0.003",
        "0.01",
    ]
    assert {c.data.tags["runner.trial_status"] for c in children} == {"completed"}
    assert sorted(c.info.run_name for c in children) == ["trial 0", "trial 1", "trial 2"]
    assert all("trainer.learning_rate=" in c.data.tags["runner.overrides"] for c in children)
    report = pd.read_csv(sweep_dir / "sweep_report.csv")
    assert parent.data.metrics["sweep/best/val/roc_auc"] == pytest.approx(report["objective"].max())
    assert parent.data.metrics["sweep/trials_completed"] == 3
    assert "sweep_report.md" in {a.path for a in client.list_artifacts(parent.info.run_id)}


@pytest.mark.slow
def test_the_embedded_sqlite_default_needs_no_server(tmp_path):
    """No tracking URI and no server: outputs/mlflow.db in Hydra's output root, and the
    summary says how to look at it. The model is an ensemble of the network and trees: its
    pyfunc answers what its Predictor answers, and it names LightGBM among its requirements."""
    result = small_run(
        tmp_path,
        "hydra.run.dir=outputs/first",
        "model=ensemble",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    database = tmp_path / "outputs" / "mlflow.db"
    assert database.exists()
    assert f"mlflow ui --backend-store-uri sqlite:///{database}" in result.stdout
    client = MlflowClient(f"sqlite:///{database}")
    run = only_run(client)
    assert run.info.status == "FINISHED"
    assert len(client.get_metric_history(run.info.run_id, "validation/loss")) == 3
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"metrics.json", "model", "pyfunc"} <= artifacts
    local = client.download_artifacts(run.info.run_id, "pyfunc", str(tmp_path))
    assert "lightgbm==" in (Path(local) / "requirements.txt").read_text()
    frame = make_synthetic(200, seed=3)
    ours = Predictor.load(tmp_path / "outputs" / "first" / "model").predict(frame)
    theirs = mlflow.pyfunc.load_model(local).predict(frame)
    np.testing.assert_allclose(theirs["label_probability"], ours["label_probability"], atol=1e-6)
    assert (tmp_path / "outputs" / "mlartifacts").is_dir()  # beside the database, not in cwd/mlruns
    assert not (tmp_path / "mlruns").exists()
    # The last line logged reached the run's log: the fast exit (run.py) flushed it.
    assert "mlflow: logged" in (tmp_path / "outputs" / "first" / "run.log").read_text()
    # MLflow's advice (type hints, cloudpickle) is not a problem of the run: not on the console.
    assert "Warning" not in result.stdout + result.stderr, result.stderr[-2000:]


def test_flatten_keeps_every_leaf_and_lists_as_json():
    flat = flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": None, "f": {}})
    assert flat == {"a.b": "1", "a.c.d": "[1, 2]", "e": "None", "f": "{}"}


def test_uri_credentials_are_masked():
    assert redact_uri("http://u:pw@host:5000/x and s3://key@bucket/y") == (
        "http://***@host:5000/x and s3://***@bucket/y"
    )
    assert redact_uri("sqlite:////tmp/outputs/mlflow.db") == "sqlite:////tmp/outputs/mlflow.db"


def test_credentials_in_overrides_are_masked():
    overrides = [
        f"+cache_credentials.aws_secret_access_key={SECRET}",
        f"cache_credentials={{key: {SECRET}, secret: {SECRET}}}",
        f"dataset.storage_options.secret={SECRET}",
        "trainer.learning_rate=0.01",
    ]
    masked = redact(overrides)
    assert SECRET not in str(masked)
    assert masked[0] == "+cache_credentials.aws_secret_access_key=***"
    assert masked[3] == "trainer.learning_rate=0.01"
    # joined as a trial's tag (spaces) or as Hydra's override_dirname (commas)
    for separator in (" ", ","):
        joined = redact(separator.join(overrides))
        assert SECRET not in joined and joined.endswith("trainer.learning_rate=0.01")


def test_a_failed_trial_gets_a_failed_child_without_its_credentials(tmp_path):
    """A trial that failed before its run could log: the sweep's close gives it a child with
    its error and its overrides as params, masked; a trial with a run of its own gets none."""
    from runner.config import MlflowConfig
    from runner.sweeps.report import record_jobs
    from runner.tracking.base import SweepTrial
    from runner.tracking.mlflow.client import MlflowRun, open_sweep, record_failed_trial

    settings = MlflowConfig(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    overrides = [f"+cache_credentials.key={SECRET}", "trainer.optimizer=rmsprop"]
    jobs = record_jobs(
        sweep_dir,
        [
            {
                "num": 0,
                "overrides": overrides,
                "status": "failed",
                "error": f"error in {overrides[0]}",
            }
        ],
    )
    assert SECRET not in (sweep_dir / ".trials.jsonl").read_text()  # the ledger, and all after
    parent = open_sweep(settings, sweep_dir, {})
    trial = SweepTrial(str(sweep_dir.resolve()), 0, jobs[0]["overrides"])
    record_failed_trial(parent, trial, "ConfigCompositionException: no optimizer rmsprop")
    ran = SweepTrial(str(sweep_dir.resolve()), 1, ["trainer.optimizer=adamw"])
    MlflowRun.start(settings, sweep_dir / "1", {}, {}, ran).finish()
    record_failed_trial(parent, ran, "")  # it has its own run: nothing more
    parent.finish()
    parents, children = mlflow_sweep_runs(settings.tracking_uri)
    assert len(parents) == 1 and len(children) == 2
    failed = next(c for c in children if c.data.tags["runner.trial"] == "0")
    assert failed.info.status == "FAILED" and failed.info.run_name == "trial 0"
    assert failed.data.tags["runner.trial_status"] == "failed"
    assert "no optimizer rmsprop" in failed.data.tags["runner.error"]
    assert failed.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
    assert failed.data.params == {"cache_credentials.key": "***", "trainer.optimizer": "rmsprop"}
    assert SECRET not in str(failed.data.tags)


def test_a_sweep_of_many_trials_keeps_one_parent(tmp_path):
    """More trials than a search's first page: every child still finds the one parent, and
    the driver's next batch (an optimizing sweeper, a resume) reopens it, not a second one."""
    from runner.config import MlflowConfig
    from runner.tracking.base import SweepTrial
    from runner.tracking.mlflow.client import MlflowRun, open_sweep

    settings = MlflowConfig(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    sweep_dir = tmp_path / "sweep"
    parent = open_sweep(settings, sweep_dir, {})
    children = []
    for number in range(12):
        trial = SweepTrial(str(sweep_dir.resolve()), number, [f"seed={number}"])
        run = MlflowRun.start(settings, sweep_dir / str(number), {"seed": number}, {}, trial)
        run.finish()
        children.append(run)
    parent.finish()
    assert open_sweep(settings, sweep_dir, {}).run_id == parent.run_id
    client = MlflowClient(settings.tracking_uri)
    tags = [client.get_run(c.run_id).data.tags for c in children]
    assert {t["mlflow.parentRunId"] for t in tags} == {parent.run_id}
    experiment = client.get_experiment_by_name(settings.experiment_name).experiment_id
    assert len(client.search_runs([experiment])) == 13
    again = MlflowRun.start(
        settings, sweep_dir / "3", {}, {}, SweepTrial(str(sweep_dir.resolve()), 3, [])
    )
    assert again.run_id == children[3].run_id  # a trial that runs again continues its run
