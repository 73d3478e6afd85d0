"""What the runner does so that a command starts and ends sooner than its dependencies would
on their own: every such trick, in one place.

Each is measured by the bench (`nox -s bench -- --only startup`: with and without it, side by
side; docs/benchmarks.md, "Start-up tricks") and kept because it saves more than 0.3 s there.
Those that reach into a dependency's internals are listed in runner/compat.py, whose test
checks the names on every upgrade; where a name is gone the dependency behaves as usual.

RUNNER_TRICKS_OFF=<name>,<name> leaves tricks out (their names are TRICKS' keys): the bench
measures each that way, and a user whose dependency upgrade disagrees with one can carry on.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
import threading
from typing import Any

from runner.ports import free_ports

TRICKS = {
    "api_server": "a run's own Ray without the dashboard starts no dashboard head",
    "agent_port": "a run's own Ray gives its dashboard agent a free port, not the default",
    "monitor_first": "a run's own Ray stops its autoscaler monitor before the rest",
    "ray_data_unimported": "Ray Data's progress bars are switched off without importing it",
    "no_teardown": "a finished run exits without freeing every module's objects",
    "lightgbm_without_sklearn": "LightGBM is imported without its scikit-learn estimators",
}


def tricks_off() -> set[str]:
    """The tricks RUNNER_TRICKS_OFF names; a UserError for a name that is none of them."""
    off = {name.strip() for name in os.environ.get("RUNNER_TRICKS_OFF", "").split(",")} - {""}
    unknown = sorted(off - set(TRICKS))
    if unknown:
        from runner.errors import UserError

        raise UserError(
            f"RUNNER_TRICKS_OFF names no trick {unknown}; choose from {', '.join(TRICKS)}"
        )
    return off


def enabled(trick: str) -> bool:
    return trick not in tricks_off()


def import_lightgbm():
    """lightgbm, imported without its scikit-learn estimators where scikit-learn is not imported
    yet (lightgbm_without_sklearn): lightgbm.compat imports scikit-learn for them, most of a
    second, and the runner trains and scores through lightgbm.train and Booster alone.
    lightgbm.compat takes a scikit-learn that fails to import as one not installed."""
    if "lightgbm" not in sys.modules and "sklearn" not in sys.modules:
        if enabled("lightgbm_without_sklearn"):
            sys.modules["sklearn"] = None  # type: ignore[assignment]  # import raises ImportError
            try:
                import lightgbm
            finally:
                del sys.modules["sklearn"]
    import lightgbm

    return lightgbm


@contextlib.contextmanager
def lean_local_ray(ray, dashboard: bool):
    """Starts a local Ray without what nothing of a run's uses (Ray's private Node class's
    methods, set aside or wrapped for this one start; attaching starts no processes):

    - api_server, when the dashboard is off: Ray still starts the dashboard's head process
      with nothing but its usage-stats module, and ray.init polls until it has published its
      URL. Nothing a run does talks to it.
    - agent_port: the dashboard agent's fixed port (52365) is taken whenever another Ray runs
      here; the agent then retries it for seconds and the raylet waits. It gets a port that is
      free now; it registers whichever it has, so a dashboard still finds it.
    """
    node_class = getattr(getattr(getattr(ray, "_private", None), "node", None), "Node", None)
    originals = {}
    if not dashboard and enabled("api_server") and hasattr(node_class, "start_api_server"):
        originals["start_api_server"] = getattr(node_class, "start_api_server")  # noqa: B009
        setattr(node_class, "start_api_server", lambda self, **kwargs: None)  # noqa: B010
    start_raylet = getattr(node_class, "start_raylet", None)
    default_port = getattr(
        getattr(getattr(ray, "_private", None), "ray_constants", None),
        "DEFAULT_DASHBOARD_AGENT_LISTEN_PORT",
        None,
    )
    if start_raylet is not None and default_port is not None and enabled("agent_port"):
        originals["start_raylet"] = start_raylet

        def with_a_free_agent_port(self, *args, **kwargs):
            params: Any = getattr(self, "_ray_params", None)
            if getattr(params, "dashboard_agent_listen_port", None) == default_port:
                # Free on every interface: the agent listens on the node's address.
                params.dashboard_agent_listen_port = free_ports(1)[0]
            return start_raylet(self, *args, **kwargs)

        setattr(node_class, "start_raylet", with_a_free_agent_port)  # noqa: B010
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(node_class, name, original)


def shutdown(ray) -> None:
    """ray.shutdown(), which disconnects from an attached cluster and stops a Ray this process
    started; monitor_first: the latter's autoscaler monitor goes first, at once.

    Ray stops the GCS before the monitor, whose SIGTERM handler then tries to tell the GCS and
    hangs until shutdown's grace runs out. Only a Ray this process started lists the monitor
    among its own processes (Ray's private node handle)."""
    node = getattr(getattr(ray, "_private", None), "worker", None)
    node = getattr(node, "_global_node", None)
    if enabled("monitor_first"):
        for info in getattr(node, "all_processes", {}).get("monitor", []):
            try:
                info.process.kill()
                info.process.wait(timeout=1)
            except Exception:  # already gone, or not ours to wait for: shutdown copes
                pass
    ray.shutdown()


def quiet_ray_data() -> None:
    """Ray Data logs every execution at INFO and draws progress bars; the run's own log says
    enough. ray_data_unimported: many runs never use Ray Data, and its context reads the
    variable when it is first imported."""
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    if "ray.data" not in sys.modules and not enabled("ray_data_unimported"):
        importlib.import_module("ray.data")
    if "ray.data" in sys.modules:
        sys.modules["ray.data"].DataContext.get_current().enable_progress_bars = False
    else:
        os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")


def exit_without_teardown(code: int = 0) -> None:
    """no_teardown: ends the process once the run is done and said, skipping the interpreter's
    freeing of every module's objects (torch, pandas, pyarrow, Hydra, ...). What a normal exit
    does first still happens, in its order: threading's hooks and the join of non-daemon
    threads, then the atexit hooks (logging's flush and close, Ray's and Horovod's shutdown)."""
    if not enabled("no_teardown"):
        sys.exit(code)
    exit_now(code)


def exit_now(code: int) -> None:
    """The exit of exit_without_teardown, whatever RUNNER_TRICKS_OFF says."""
    import atexit

    threading._shutdown()  # type: ignore[attr-defined]  # what Py_Finalize calls first
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
