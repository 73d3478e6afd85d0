"""The background process (runner/background.py) that draws a run's figures and logs it to
MLflow while the run goes on: real child processes, real kills."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, error_lines, run_cli

from runner.background import Background, BackgroundError


def test_calls_run_in_order_and_their_errors_come_back():
    child = Background()
    try:
        pid = child.call("os:getpid")
        joined = child.call("os.path:join", "a", "b")
        failing = child.call("math:sqrt", -1)
        child.call("math:sqrt", -1, reply=False)  # nothing comes back but its failure
        child.call("json:loads", "{", reply=False)
        assert joined.result() == os.path.join("a", "b")
        assert pid.result() != os.getpid()  # ran in the child
        with pytest.raises(BackgroundError, match="ValueError: math domain error"):
            failing.result()
        # sync waits for everything sent and hands back only the failures its prefix names.
        assert child.sync("json:") == [
            "loads: JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
        ]
        assert child.sync("math:") == ["sqrt: ValueError: math domain error"]
        assert child.sync() == []
    finally:
        assert child.close() == []
    assert child._process.returncode == 0


def test_the_child_is_niced_and_stop_drops_what_is_queued():
    child = Background()
    pid = child.call("os:getpid").result()
    assert os.getpriority(os.PRIO_PROCESS, pid) == 19  # it takes only what the run leaves idle
    child.call("time:sleep", 60, reply=False)
    child.stop()
    assert child._process.returncode == -signal.SIGKILL  # ended, not waited out


def test_a_child_started_early_is_handed_over_once_with_its_warm_up_done():
    """run.py starts the child before Hydra composes the config (logger=mlflow); the command
    adopts that one instead of starting a second."""
    from runner.background import adopt_early, start_early

    assert adopt_early() is None  # none started
    start_early("sys:setrecursionlimit", 4321)
    child = adopt_early()
    assert child is not None and adopt_early() is None  # handed over once
    try:
        assert child.call("sys:getrecursionlimit").result() == 4321  # ran first, in the child
        assert child.sync() == []
    finally:
        assert child.close() == []


def test_a_child_that_dies_is_an_error_not_a_hang():
    child = Background()
    pid = child.call("os:getpid").result()
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(BackgroundError, match="background process ended"):
        child.call("os:getpid").result()
    child.stop()


def test_a_driver_gone_while_a_call_is_in_flight_still_runs_the_end_hooks(tmp_path):
    """A reply with no one to read it (the driver was killed mid-call): the child ends as at
    the end of its input, and its end hooks run (they close an MLflow run FAILED)."""
    marker = tmp_path / "ended"
    hook = (
        "import pathlib, runner.background as b; "
        f"b.at_end(lambda: pathlib.Path({str(marker)!r}).write_text('ran'))"
    )
    driver = (
        "import os\n"
        "from runner.background import Background\n"
        "child = Background()\n"
        f"child.call('builtins:exec', {hook!r}, {{}}, reply=False)\n"
        "child.call('time:sleep', 1)\n"  # its reply is due after the driver is gone
        "os._exit(0)\n"  # as a SIGKILL leaves it: no close, the pipes just end
    )
    # The child writes to the driver's stderr: run() returns once both have ended.
    result = subprocess.run(
        [sys.executable, "-c", driver], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0
    assert "BrokenPipeError" not in result.stderr, result.stderr[-2000:]
    assert marker.read_text() == "ran"


def _status(database, run_name="run"):
    with sqlite3.connect(database) as db:
        return db.execute("select status from runs where name = ?", (run_name,)).fetchall()


@pytest.mark.slow
def test_a_driver_killed_mid_run_leaves_its_mlflow_run_failed(tmp_path):
    """SIGKILL of run.py while it trains: its background process sees the end of its input
    and closes the run FAILED instead of leaving it RUNNING for ever."""
    database = tmp_path / "outputs" / "mlflow.db"
    driver = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "run.py"),
            "logger=mlflow",
            "backend=local",
            "dataset.synthetic_rows=20000",
            "trainer.epochs=500",
            "trainer.early_stopping.patience=0",
            "trainer.progress_bar=false",
            # A core left to the niced background process: with both busy training, its
            # imports took up to two minutes before it opened the run.
            "trainer.num_threads=1",
            f"cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={tmp_path / 'outputs' / 'run'}",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 180
    while time.time() < deadline:
        if database.exists():
            try:
                if _status(database) == [("RUNNING",)]:
                    break
            except sqlite3.OperationalError:  # the schema is still being created
                pass
        time.sleep(0.5)
    else:
        driver.kill()
        pytest.fail("the run never showed up RUNNING in MLflow")
    driver.kill()
    driver.wait()
    deadline = time.time() + 60
    while _status(database) != [("FAILED",)] and time.time() < deadline:
        time.sleep(0.5)
    assert _status(database) == [("FAILED",)]


def test_a_tracking_store_mlflow_cannot_open_is_one_error_line(tmp_path):
    """A store the background process cannot create: the run ends with one line naming it
    (the training's own outputs stand; MLflow holds nothing of the run)."""
    result = run_cli(
        "logger=mlflow",
        "logger.mlflow.tracking_uri=sqlite:////proc/no-such-dir/mlflow.db",
        "backend=local",
        "dataset.synthetic_rows=500",
        "trainer.epochs=2",
        "trainer.progress_bar=false",
        f"cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    assert result.returncode == 2, result.stderr[-3000:]
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr[-3000:]
    assert "logger=mlflow could not open a run at sqlite:////proc/no-such-dir/mlflow.db" in lines[0]
    assert "Traceback" not in result.stderr


def test_logger_mlflow_on_the_command_line_starts_its_child_before_hydra(tmp_path):
    """run.py's start_early finds each tracker of conf/logger/mlflow.yaml, whose `_target_`
    lives in its schema, not in the yaml: MLflow's child is started and waits to be adopted."""
    from runner.background import adopt_early
    from runner.tracking.base import start_early, tracker_targets

    conf = Path(__file__).resolve().parents[1] / "conf"
    assert tracker_targets(conf / "logger" / "mlflow.yaml") == [
        "runner.tracking.tensorboard.TensorBoardTracker",
        "runner.tracking.mlflow.MlflowTracker",
    ]
    assert adopt_early() is None
    start_early(["logger=mlflow", f"logger.mlflow.tracking_uri=sqlite:///{tmp_path}/m.db"], conf)
    child = adopt_early()
    assert child is not None  # started before the config was composed
    assert child.close() == []  # its warm-up (MLflow's imports) ran without an error
    start_early(["logger=tensorboard"], conf)
    assert adopt_early() is None  # TensorBoard logs from the run's own process
