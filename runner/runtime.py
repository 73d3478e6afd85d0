"""The Ray runtime handle: the one place that starts or attaches to Ray.

The Ray backend owns a RayRuntime and activates it for the command in progress;
components that need Ray (Dask and Modin processors, the Ray Data loader, the
distributed trainers) ask `require_ray(what)` for the ray module. Ray then starts
lazily, the first time a component needs it, so a small run whose choices are all
local never pays Ray's start-up. Nothing else calls ray.init, and nothing below the
backends imports them.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from runner.errors import UserError
from runner.fast_start import lean_local_ray, quiet_ray_data, shutdown

log = logging.getLogger(__name__)
CURRENT_CLUSTER_FILE = "/tmp/ray/ray_current_cluster"
# Set for a process that ends with its run (run.py's single run): see RayRuntime.stop.
_failed_runs_stop_at_exit = False


def stop_failed_runs_at_exit() -> None:
    """For a process that ends when its run does (run.py's single run, not a sweep's trial,
    not runner.api): a run that fails while its Ray is still starting says its error at once,
    and that Ray stops as the process exits, instead of first (2-3 s later)."""
    global _failed_runs_stop_at_exit
    _failed_runs_stop_at_exit = True


def running_cluster_address() -> str | None:
    """The address of the Ray cluster started on this machine (`ray start`), if it answers."""
    try:
        with open(CURRENT_CLUSTER_FILE) as handle:
            address = handle.read().strip()
    except OSError:
        return None
    return address if address and reachable(address, timeout=1.0) else None


def use_token_if_there_is_one() -> None:
    """Token authentication for attaching, when RAY_AUTH_MODE is unset and a token is at hand.
    `ray start` (Ray 2.60) turns token authentication on by itself when ~/.ray/auth_token exists,
    and every local ray.init() writes that file, but a driver attaching by address does not turn
    it on: its calls are refused ("InvalidAuthToken") and ray.init gives up with only "Failed to
    connect". A cluster without authentication accepts a driver that sends a token."""
    if os.environ.get("RAY_AUTH_MODE"):
        return
    token_file = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if os.environ.get("RAY_AUTH_TOKEN") or token_file.is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def reachable(address: str, timeout: float) -> bool:
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def session_active() -> bool:
    """Whether this process is connected to Ray (never imports Ray to find out)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def current_node() -> str:
    """The Ray node this code runs on ("local" outside Ray)."""
    if session_active():
        return sys.modules["ray"].get_runtime_context().get_node_id()
    return "local"


class RayRuntime:
    """Attach to a cluster (address, RAY_ADDRESS, "auto") or start a local Ray, lazily;
    shut down only what this run started."""

    def __init__(
        self,
        address: str | None,
        num_cpus: float | None,
        num_gpus: float | None,
        object_store_memory: int | None,
        connect_timeout_s: float,
        dashboard: bool,
        dashboard_host: str,
        dashboard_port: int,
        worker_logs: bool,
    ):
        self.address = address
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.object_store_memory = object_store_memory
        self.connect_timeout_s = connect_timeout_s
        self.dashboard = dashboard
        self.dashboard_host = dashboard_host
        self.dashboard_port = dashboard_port
        self.worker_logs = worker_logs
        self.started = False
        self._target: str | None = None
        self._initialized_here = False
        self._wanted: tuple[float, str] | None = None
        self._checked = False
        # start_in_background's: the thread that starts Ray and holds it, and its events.
        self._holder: threading.Thread | None = None
        self._ready: threading.Event | None = None  # set once the start has ended
        self._release = threading.Event()
        self._start_error: BaseException | None = None
        self._stop_deferred = False

    def want_cpus(self, cpus: float, why: str) -> None:
        """A local Ray this run starts gets at least `cpus` logical CPUs (`why` needs them), more
        than the machine's cores if need be: the workers then share cores, slower but they run.
        A cluster this run attaches to is sized by whoever started it (the trainer's check
        says what it lacks)."""
        self._wanted = (cpus, why)

    def _local_cpus(self) -> int | None:
        if self.num_cpus is not None:
            return int(self.num_cpus)
        if self._wanted is None:
            return None
        wanted, why = self._wanted
        cpus = math.ceil(wanted)  # Ray counts CPUs in whole units (3 x 1.5 CPUs + 1 -> 6)
        cores = os.cpu_count() or 1
        if cpus <= cores:
            return None
        log.warning(
            "%s needs %g CPUs and this machine has %d cores: the local Ray starts with %g "
            "logical CPUs, the cores oversubscribed %.1fx, so each worker trains up to %.1fx "
            "slower than on a core of its own (backend.num_cpus sets the count)",
            why,
            cpus,
            cores,
            cpus,
            cpus / cores,
            cpus / cores,
        )
        return cpus

    def target_address(self) -> str | None:
        """The cluster to attach to (None: start a local one); an unreachable one fails now."""
        address = self.address or os.environ.get("RAY_ADDRESS")
        if address in (None, "", "local"):
            return None
        if address == "auto":
            found = running_cluster_address()
            if found is None:
                raise UserError(
                    "backend.address=auto but no Ray cluster is running here; start one with "
                    "`ray start --head`, or set backend.address=null to start a local one"
                )
            return found
        if not reachable(address, self.connect_timeout_s):
            raise UserError(
                f"cannot reach a Ray cluster at {address} within {self.connect_timeout_s:g}s; "
                "check backend.address (or RAY_ADDRESS), or set backend.address=null to start a local one"
            )
        return address

    @property
    def attaching(self) -> bool:
        """Whether this run uses an existing cluster (rather than starting a local Ray)."""
        return session_active() or self._target is not None

    def check(self) -> None:
        """Fails in seconds when the configured cluster cannot be reached (before any work)."""
        if not self._checked and not session_active():
            self._target = self.target_address()
            self._checked = True
            if self._target:
                use_token_if_there_is_one()  # before Ray is imported: it reads the mode once

    def start_in_background(self) -> None:
        """Starts or attaches to Ray in a thread, for a run that will need it: Ray's processes
        start while this one imports, infers the features and preprocesses (start() waits).

        Ray is imported first, by the calling thread: imported in the other, beside the run's
        own imports, it would share stdlib packages with them, and two threads importing one
        package's modules in opposite orders can see them half-initialized. The thread then
        lives until stop(): the processes of a local Ray die with the thread that started them
        (Ray binds them to it with Linux's PR_SET_PDEATHSIG, which follows threads)."""
        if self.started or self._holder is not None or session_active():
            return
        self.check()  # an unreachable cluster fails now, in this thread
        import ray  # noqa: F401

        quiet_ray_data()
        _hold_sigterm_for_ray()
        ready, release = threading.Event(), threading.Event()

        def start_and_hold() -> None:
            try:
                self._start_now()
            except BaseException as error:  # start() raises it in the thread that asks
                self._start_error = error
            finally:
                ready.set()
            release.wait()

        self._ready, self._release = ready, release
        self._holder = threading.Thread(target=start_and_hold, name="ray-start", daemon=True)
        self._holder.start()

    def start(self):
        """Starts or attaches to Ray (once); returns the ray module."""
        ready = self._ready  # one read: stop() may clear it
        if ready is not None:
            ready.wait()
            if self._start_error is not None:  # every caller's error, not only the first's
                raise self._start_error
        return self._start_now()

    def _start_now(self):
        import ray

        if self.started:
            return ray
        self.started = True
        quiet_ray_data()
        if ray.is_initialized():
            log.info("ray backend: using the Ray session this process already has")
            return ray
        started = time.perf_counter()
        if self._target:
            try:
                context = ray.init(address=self._target, log_to_driver=self.worker_logs)
            except ConnectionError as exc:
                raise UserError(
                    f"cannot attach to the Ray cluster at {self._target} ({exc}); check backend.address "
                    "(or RAY_ADDRESS), that the cluster runs the same Ray version, and, where it "
                    "uses token authentication, that its token is in ~/.ray/auth_token, "
                    "RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH"
                ) from None
            log.info(
                "ray backend: attached to the cluster at %s in %.2fs",
                self._target,
                time.perf_counter() - started,
            )
        else:
            # "local": Ray would otherwise attach to whatever cluster `ray start` left running
            # here (its address file), ignoring num_cpus; null means a Ray of this run's own.
            quiet_token_notice()
            with lean_local_ray(ray, dashboard=self.dashboard):
                context = ray.init(
                    address="local",
                    # Whole numbers: the config checks num_cpus and num_gpus, _local_cpus rounds up.
                    num_cpus=self._local_cpus(),
                    num_gpus=None if self.num_gpus is None else int(self.num_gpus),
                    object_store_memory=self.object_store_memory,
                    include_dashboard=self.dashboard,
                    dashboard_host=self.dashboard_host,
                    dashboard_port=self.dashboard_port,
                    log_to_driver=self.worker_logs,
                )
            log.info(
                "ray backend: started a local Ray (%s CPUs) in %.2fs",
                ray.cluster_resources().get("CPU"),
                time.perf_counter() - started,
            )
        if getattr(context, "dashboard_url", None):
            log.info("ray dashboard: http://%s", context.dashboard_url)
        self._initialized_here = True
        return ray

    def stop(self, failed: bool = False) -> None:
        """Shuts down what this run started, once its start has ended (a Ray half-started would
        outlive the run); `failed`: the run failed, which may leave the stop to the exit."""
        starting = self._ready is not None and not self._ready.is_set()
        if failed and starting and _failed_runs_stop_at_exit:
            if not self._stop_deferred:
                self._stop_deferred = True
                atexit.register(self.stop)
                # The error is the run's last word: the start's lines would come after it.
                for name in ("ray", __name__):
                    logging.getLogger(name).setLevel(logging.WARNING)
            return
        if self._ready is not None:
            self._ready.wait()  # a Ray half-started would outlive the run
            self._ready = None
        if self._initialized_here:
            import ray

            shutdown(ray)
            self._initialized_here = False
        if self._holder is not None:
            self._release.set()
            self._holder.join()
            self._holder = None


class _NoSigtermWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("SIGTERM handler is not set")


_SIGTERM_WARNING = _NoSigtermWarning()


def _hold_sigterm_for_ray() -> None:
    """What ray.init does in the main thread and cannot do in another: SIGTERM exits through
    sys.exit, so that Ray's atexit hook stops the Ray this process starts. Its warning that it
    could not, logged from the starting thread, is then dropped (a filter added once)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
        logging.getLogger("ray._private.worker").addFilter(_SIGTERM_WARNING)


class _NoTokenNotice(logging.Filter):
    """Ray says on every start of a local Ray that it turned token authentication on (as it
    does where ~/.ray/auth_token exists): for a Ray that lives as long as one run, every run's
    console repeated a setting nobody asked about. Its warning that authentication is off stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Token authentication is enabled for this Ray")


_TOKEN_NOTICE = _NoTokenNotice()


def quiet_token_notice() -> None:
    logging.getLogger("ray._private.authentication.authentication_token_setup").addFilter(
        _TOKEN_NOTICE
    )


_ACTIVE: RayRuntime | None = None  # the runtime of the command in progress (set by the Ray backend)


def activate(runtime: RayRuntime | None) -> None:
    global _ACTIVE
    _ACTIVE = runtime


def ray_starts_here() -> bool:
    """Whether the Ray this command uses is one it starts itself (not a cluster it attaches to,
    nor a session this process already has)."""
    return _ACTIVE is not None and not _ACTIVE.attaching


def require_ray(what: str, fix: str = "add backend=ray"):
    """The ray module, with Ray started or attached by the active runtime on first use;
    a UserError naming `what` when this run has no Ray."""
    if _ACTIVE is not None:
        return _ACTIVE.start()
    if session_active():
        return sys.modules["ray"]
    raise UserError(f"{what} runs on Ray; {fix}")


# Where this process's own Ray tasks go (scoring's block cuts, Dask's tasks): by default
# wherever Ray puts them (inside a placement group that captures its children, there). A
# Tune trial sets it (runner/sweeps/tune/placement.py): its group's strategy, or "DEFAULT" for
# a DDP trial, whose group holds no CPU for them.
_TASK_STRATEGY = None


def place_tasks(strategy) -> None:
    global _TASK_STRATEGY
    _TASK_STRATEGY = strategy


def task_options() -> dict:
    """Options for this process's own Ray tasks: `.options(**task_options())`."""
    return {} if _TASK_STRATEGY is None else {"scheduling_strategy": _TASK_STRATEGY}
