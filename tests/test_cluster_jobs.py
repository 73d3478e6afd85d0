"""Running on a real cluster: a run submitted with `ray job submit` to a `ray start --head`
cluster attaches to it; the dashboard key; a console and run.log without Ray's chatter or
ANSI codes, with each worker's log in trainer.logdir."""

import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from helpers import (
    ROOT,
    error_lines,
    free_port,
    free_ports,
    run_cli,
    stop_serve,
    wait_until_serving,
)

from bench.probe import start_serve  # conftest puts the checkout on the path
from bench.ray_head import stop_ray

pytestmark = [pytest.mark.distributed, pytest.mark.slow]
BIN = Path(sys.executable).parent
TWO_SMALL_WORKERS = [
    "trainer.num_workers=2",
    "trainer.resources_per_worker={CPU:0.5}",
    "trainer.epochs=2",
    "trainer.progress_bar=false",
    "dataset.synthetic_rows=3000",
    "model.family=network",  # these test the cluster, not the family
]


@pytest.fixture
def head():
    """`ray start --head` with its dashboard and job server, as on a real cluster's head node."""
    port, dashboard = free_ports(2)
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "RAY_ADDRESS": ""}
    subprocess.run(
        [
            str(BIN / "ray"),
            "start",
            "--head",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard}",
            "--disable-usage-stats",
        ],
        check=True,
        env=env,
        capture_output=True,
        timeout=120,
    )
    yield f"http://127.0.0.1:{dashboard}", env
    stop_ray(port)  # this head alone (`ray stop` would stop every Ray on the machine)


def test_job_submission_attaches_to_the_cluster(head, tmp_path):
    """The cluster command of docs/scaling.md, run as written against a local head."""
    address, env = head
    run_dir = tmp_path / "run"
    excludes = json.dumps({"excludes": [".venv", "outputs", "bench-results", ".git"]})
    result = subprocess.run(
        [
            str(BIN / "ray"),
            "job",
            "submit",
            "--address",
            address,
            "--working-dir",
            ".",
            "--runtime-env-json",
            excludes,
            "--",
            "python",
            "run.py",
            *TWO_SMALL_WORKERS,
            f"cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "succeeded" in output, output[-4000:]
    assert "backend=auto picked ray" in output and "attached to the cluster at" in output, output[
        -4000:
    ]
    assert "started a local Ray" not in output
    report = json.loads((run_dir / "metrics.json").read_text())
    assert report["training"]["world_size"] == 2 and report["test"]["label/roc_auc"] > 0.6


def test_a_run_attaches_to_a_cluster_that_uses_token_authentication(tmp_path):
    """`ray start --head` on a machine where a local Ray once ran (it left ~/.ray/auth_token)
    turns token authentication on; `backend.address=auto` must attach with that token, as the
    long-lived-cluster workflow of docs/scaling.md has it, and so must a Ray-launcher sweep
    given the head's host:port (with "auto", Ray finds the token itself). RAY_AUTH_MODE unset,
    as for a user."""
    import secrets

    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(32))
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    env.update({"HOME": str(home), "PATH": f"{BIN}:{os.environ['PATH']}", "RAY_ADDRESS": ""})
    ray, port = [str(BIN / "ray")], free_port()
    started = subprocess.run(
        [*ray, "start", "--head", f"--port={port}", "--num-cpus=2"]
        + ["--include-dashboard=false", "--disable-usage-stats"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    small = ["trainer.epochs=1", "trainer.progress_bar=false", "dataset.synthetic_rows=2000"]

    def run_py(*args: str):  # run_cli cannot drop RAY_AUTH_MODE from the tests' environment
        return subprocess.run(
            [
                sys.executable,
                str(ROOT / "run.py"),
                *args,
                *small,
                f"cache_dir={tmp_path / 'cache'}",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    try:
        assert started.returncode == 0, started.stderr[-3000:]
        assert "Token authentication is enabled" in started.stdout + started.stderr
        result = run_py("backend=ray", "backend.address=auto", f"hydra.run.dir={tmp_path / 'run'}")
        sweep = run_py(
            "--multirun",
            "hydra/launcher=ray",
            f"hydra.launcher.ray.init.address=127.0.0.1:{port}",
            "trainer.learning_rate=0.001,0.01",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        )
    finally:
        stop_ray(port)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "attached to the cluster at" in output and "started a local Ray" not in output
    assert sweep.returncode == 0, (sweep.stdout + sweep.stderr)[-3000:]
    for trial in ("0", "1"):
        assert (tmp_path / "sweep" / trial / "metrics.json").exists()


def test_dashboard_key(tmp_path):
    """backend.dashboard=true starts Ray's dashboard (and logs its URL); off by default."""
    from runner.runtime import RayRuntime

    port = free_port()
    runtime = RayRuntime(None, 1, None, None, 5.0, True, "127.0.0.1", port, False)
    runtime.check()
    runtime.start()
    try:
        assert requests.get(f"http://127.0.0.1:{port}/api/version", timeout=30).status_code == 200
    finally:
        runtime.stop()
    default = run_cli(
        "backend=ray",
        "processor=dask",
        "command=preprocess",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'run'}",
        env={"RAY_ADDRESS": ""},
    )
    assert default.returncode == 0, default.stderr[-3000:]
    assert "started a local Ray" in default.stdout + default.stderr
    assert "ray dashboard:" not in default.stdout + default.stderr


@pytest.mark.parametrize(
    "worker_logs, tricks_off",
    [(False, ""), (True, ""), (False, "api_server,monitor_first")],
    ids=["logs-off", "logs-to-driver", "tricks-off"],
)
def test_a_local_ray_starts_lean_and_stops_whole(worker_logs, tricks_off, capfd, monkeypatch):
    """A run's own Ray starts no dashboard head (dashboard off; Ray's methods are put back
    afterwards); RUNNER_TRICKS_OFF gives Ray's own start back. It still runs tasks, forwards a
    worker's print exactly when asked to, and stop() leaves none of its processes behind."""
    import psutil
    import ray

    from runner.runtime import RayRuntime

    node = ray._private.node.Node
    originals = (node.start_api_server, node.start_raylet)
    monkeypatch.setenv("RUNNER_TRICKS_OFF", tricks_off)
    lean = not tricks_off
    before = {p.pid for p in psutil.Process().children(recursive=True)}  # not this Ray's
    runtime = RayRuntime(None, 1, None, None, 5.0, False, "127.0.0.1", free_port(), worker_logs)
    runtime.check()
    # Another Ray on the machine holds the dashboard agent's default port: this one's agent
    # must not spend 3.4 s retrying it (it takes a free port instead).
    taken = socket.socket()
    try:
        taken.bind(("", ray._private.ray_constants.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT))
    except OSError:
        pass  # already held by something else: the same situation
    try:
        runtime.start()
    finally:
        taken.close()
    try:
        assert (node.start_api_server, node.start_raylet) == originals
        session = Path(ray._private.worker._global_node.get_session_dir_path())
        agent_log = (session / "logs" / "dashboard_agent.log").read_text()
        assert "Failed to bind" not in agent_log, agent_log[-2000:]
        commands = [" ".join(p.cmdline()) for p in psutil.Process().children(recursive=True)]
        assert any("raylet" in c for c in commands), commands
        assert any("dashboard/dashboard.py" in c for c in commands) != lean, commands
        assert any("autoscaler/_private/monitor.py" in c for c in commands), commands

        def shout() -> int:
            print("a line from the worker", flush=True)
            return 42

        assert ray.get(ray.remote(shout).remote()) == 42
        ray_processes = [
            p for p in psutil.Process().children(recursive=True) if p.pid not in before
        ]
        # The log monitor publishes what it tailed every 0.1-1 s: wait for the line where it
        # should come, and long enough to be sure where it should not.
        printed, deadline = "", time.monotonic() + (20 if worker_logs else 3)
        while "a line from the worker" not in printed and time.monotonic() < deadline:
            time.sleep(0.2)
            printed += capfd.readouterr().out
    finally:
        runtime.stop()
    _, alive = psutil.wait_procs(ray_processes, timeout=10)
    assert not alive, [" ".join(p.cmdline()) for p in alive]
    assert ("a line from the worker" in printed) == worker_logs


def test_a_ray_started_in_a_thread_outlives_the_thread_and_stops_whole():
    """start_in_background: Ray starts in a thread while this one goes on. Its processes die
    with the thread that started them (PR_SET_PDEATHSIG), so the thread holds them until
    stop(), which leaves neither the thread nor any of Ray's processes behind."""
    import threading

    import psutil

    from runner.runtime import RayRuntime

    def holders() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "ray-start"]

    before = {p.pid for p in psutil.Process().children(recursive=True)}  # not this Ray's
    runtime = RayRuntime(None, 1, None, None, 5.0, False, "127.0.0.1", free_port(), False)
    runtime.start_in_background()
    assert holders()  # started while this thread goes on
    try:
        ray = runtime.start()
        time.sleep(2)  # long past the start: a thread that ended would have taken the GCS along
        assert ray.get(ray.remote(lambda: 41 + 1).remote(), timeout=60) == 42
        assert holders()
        ray_processes = [
            p for p in psutil.Process().children(recursive=True) if p.pid not in before
        ]
    finally:
        runtime.stop()
    assert not holders() and not ray.is_initialized()
    _, alive = psutil.wait_procs(ray_processes, timeout=10)
    assert not alive, [" ".join(p.cmdline()) for p in alive]


def test_a_run_that_fails_after_ray_started_early_stops_it(tmp_path, monkeypatch, caplog):
    """The design card's call starts Ray while the run assembles; an error found after that
    (an unknown target, found by the feature inference) stops that Ray before it reaches the
    caller. In process (runner.api.train, as a notebook calls it), which goes on afterwards:
    no starting thread, no Ray session, none of its processes left."""
    import threading

    import psutil
    import ray

    from runner.api import train
    from runner.errors import UserError

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    caplog.set_level(logging.INFO, logger="runner.runtime")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(UserError, match="dataset.target=nope is not a column"):
        train(
            None,
            "nope",
            ["backend=ray", "trainer.num_workers=2", f"cache_dir={tmp_path / 'cache'}"],
            run_dir=tmp_path / "run",
        )
    assert "started a local Ray" in caplog.text  # early, before the inference failed
    assert not [t for t in threading.enumerate() if t.name == "ray-start"]
    assert not ray.is_initialized()
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    _, alive = psutil.wait_procs(left, timeout=10)
    assert not alive, [" ".join(p.cmdline()) for p in alive]


def test_the_cli_fails_after_ray_started_early_with_its_one_error_line(tmp_path):
    """The same from run.py: the one error line, as the last line, and exit 2; the Ray it had
    started is stopped (after the line when its start had not ended: the test below), and none
    of its processes outlives the run."""
    import psutil

    def ray_processes() -> set[int]:
        names = ("raylet", "gcs_server")
        return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] in names}

    before = ray_processes()
    result = run_cli(
        "backend=ray",
        "trainer.num_workers=2",
        "dataset.target=nope",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'run'}",
        env={"RAY_ADDRESS": ""},
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(error_lines(result)) == 1 and "dataset.target=nope" in error_lines(result)[0]
    assert result.stderr.splitlines()[-1] == error_lines(result)[0]
    assert "needs 3 CPUs" in result.stdout + result.stderr  # the early start's sizing
    left = [psutil.Process(pid) for pid in ray_processes() - before if psutil.pid_exists(pid)]
    _, alive = psutil.wait_procs(left, timeout=10)
    assert not alive, [" ".join(p.cmdline()) for p in alive]


def test_a_failed_run_says_its_error_before_stopping_a_ray_still_starting(tmp_path):
    """run.py's single run ends its process with its error: a failure while its Ray is still
    starting returns at once (the error is said then, not 2-3 s later), and that Ray stops as
    the process exits, leaving no process behind."""
    script = tmp_path / "fail_early.py"
    script.write_text(
        f"""
import atexit, time
import psutil
from runner.runtime import RayRuntime, stop_failed_runs_at_exit

# Registered first, so it runs last: after the deferred stop.
atexit.register(lambda: print("left", len(psutil.Process().children(recursive=True)), flush=True))
stop_failed_runs_at_exit()
runtime = RayRuntime(None, 1, None, None, 5.0, False, "127.0.0.1", {free_port()}, False)
runtime.start_in_background()
started = time.perf_counter()
runtime.stop(failed=True)
print("stop returned", round(time.perf_counter() - started, 3), runtime._ready.is_set(), flush=True)
"""
    )
    env = {**os.environ, "RAY_ADDRESS": "", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    returned = next(line for line in lines if line.startswith("stop returned")).split()
    assert returned[3] == "False"  # it returned while the start had not ended
    assert lines[-1] == "left 0", result.stdout


def test_logs_a_person_can_read(tmp_path):
    """No ANSI codes, no Ray Data chatter and no Horovod rendezvous chatter on the console or in
    run.log; each worker's log in trainer.logdir, and rank 0's lines (its epochs) repeated in
    the driver's log, once each; backend.worker_logs=true brings every worker's lines back."""
    logs = tmp_path / "logs"
    quiet = run_cli(
        "backend=ray",
        "loader=ray",
        *TWO_SMALL_WORKERS,
        f"trainer.logdir={logs}",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'quiet'}",
        env={"RAY_ADDRESS": ""},
    )
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    console = quiet.stdout + quiet.stderr
    run_log = (tmp_path / "quiet" / "run.log").read_text()
    for text in (console, run_log):
        assert "\x1b[" not in text
        assert "Execution plan of Dataset" not in text and "SplitCoordinator" not in text
        assert "SIGTERM handler is not set" not in text  # Ray started in a thread says so
        assert "has keys" not in text and "Cleared scope" not in text  # Horovod's rendezvous
        assert "Token authentication is enabled" not in text  # Ray's notice on each start
        assert f"workers log to {logs}" in text
        assert text.count("epoch 1/2  train loss") == 1 and text.count("epoch 2/2  train loss") == 1
    assert "trainer=auto picked horovod" in run_log
    assert sorted(p.name for p in logs.glob("rank-*.log")) == ["rank-0.log", "rank-1.log"]
    assert "epoch 2/2" in (logs / "rank-0.log").read_text()
    loud = run_cli(
        "backend=ray",
        "loader=ray",
        *TWO_SMALL_WORKERS,
        "backend.worker_logs=true",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'loud'}",
        env={"RAY_ADDRESS": ""},
    )
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert "BaseHorovodWorker" in loud.stdout + loud.stderr


def test_a_stray_cluster_is_left_alone(head, tmp_path):
    """With a `ray start` cluster running and no address given (RAY_ADDRESS unset), a run and a
    Ray-launcher sweep start a Ray of their own with the CPUs asked for; Ray's default would
    attach to the stray cluster and refuse num_cpus (a CI run failed so)."""
    _, env = head
    run = run_cli(
        "backend=ray",
        "backend.num_cpus=1",
        "processor=dask",
        "command=preprocess",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'run'}",
        env={"RAY_ADDRESS": ""},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "started a local Ray (1.0 CPUs)" in run.stdout + run.stderr
    sweep = run_cli(
        "--multirun",
        "hydra/launcher=ray",
        "hydra.launcher.ray.init.num_cpus=1",
        "backend=local",
        "trainer.epochs=1",
        "trainer.progress_bar=false",
        "dataset.synthetic_rows=1000",
        "trainer.learning_rate=0.001,0.01",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        timeout=600,
        env={"RAY_ADDRESS": ""},
    )
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    assert len(list((tmp_path / "sweep").glob("*/metrics.json"))) == 2


def test_serve_on_an_attached_cluster_takes_the_clusters_ingress(head, tmp_path):
    """command=serve attached to a `ray start` cluster (started without HAProxy's flag): the
    run leaves the ingress and the port to the cluster, says so, and serves through Serve's
    proxy there; SIGTERM shuts Serve down and the cluster goes on."""

    import psutil

    _, env = head
    train = run_cli(
        "command=train",
        "backend=local",
        "dataset.synthetic_rows=2000",
        "trainer.epochs=1",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'train'}",
    )
    assert train.returncode == 0, train.stderr[-3000:]
    process, url = start_serve(
        tmp_path / "train" / "model",
        tmp_path / "serve",
        "backend=ray",
        "backend.address=auto",
        "serve.resources_per_replica={CPU:0.5}",
        env=env,
    )
    try:
        wait_until_serving(process, f"{url}/health")
        row = {"x1": 1.0, "x2": 2.0, "x3": 0.5, "x4": None, "color": "red", "city": "a"}
        answer = requests.post(f"{url}/predict", json=[{**row, "flag": True}], timeout=30)
        assert answer.status_code == 200 and "label_probability" in answer.json()[0]
        assert not [p for p in psutil.process_iter(["name"]) if p.info["name"] == "haproxy"]
    finally:
        output = stop_serve(process, timeout=120)
    assert process.returncode == 0, output[-3000:]
    assert "whose environment picks the ingress" in output
    assert "attached to the cluster at" in output
