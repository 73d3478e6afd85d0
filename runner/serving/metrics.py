"""GET /metrics: the served model's Prometheus metrics, the same whichever replica answers.

Each replica counts its own requests in plain dicts (a few dict updates a request) and sends
its totals to one keeper actor (MetricsKeeper) at most once a second and whenever it answers
/metrics; the answer is the sum over every replica that ever reported, so a replaced replica's
requests still count. The text is prometheus_client's exposition format:

  runner_requests_total{route, status}        requests answered, by route and HTTP status
  runner_rows_total{route, status}            rows in those requests (POST /predict)
  runner_request_seconds{route}               a histogram of the time in the replica
  runner_model_load_seconds{replica}          how long each replica took to load the model
  runner_model_info{name, version}            1, labelled with the model's name and version

Every response is counted, by an ASGI middleware around the whole app (CountEveryResponse):
404 and 405 from the router, a route's own 4xx, an unhandled exception's 500 and GET /metrics
itself. Latency is measured inside the replica (routing, parsing, scoring, the response), not
the proxy's hop.
"""

from __future__ import annotations

import bisect
import hashlib
import time
from collections.abc import Iterable
from pathlib import Path

# Seconds; a single row is scored in a few milliseconds, a large batch in seconds.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
ROUTES = ("/predict", "/health", "/schema", "/metrics")  # any other path counts as "other"
KEEPER = "runner-serve-metrics"  # the keeper actor's name


def model_labels(model_dir: str) -> dict[str, str]:
    """The model's name (its run directory's) and version (a digest of its meta.json, which
    changes with every training)."""
    path = Path(model_dir)
    digest = hashlib.sha256((path / "meta.json").read_bytes()).hexdigest()[:12]
    return {"name": path.parent.name or path.name, "version": digest}


class ReplicaMetrics:
    """One replica's counts since it started (picklable totals: snapshot())."""

    def __init__(self, replica: str, load_seconds: float):
        self.replica, self.load_seconds = replica, load_seconds
        self.requests: dict[tuple[str, str], int] = {}
        self.rows: dict[tuple[str, str], int] = {}
        # route -> per-bucket counts (the last: above every bucket), the sum of seconds
        self.latency: dict[str, list[float]] = {}
        self.changed = False

    def observe(self, path: str, status: int, seconds: float, rows: int = 0) -> None:
        route = path if path in ROUTES else "other"
        key = (route, str(status))
        self.requests[key] = self.requests.get(key, 0) + 1
        if rows:
            self.rows[key] = self.rows.get(key, 0) + rows
        counts = self.latency.setdefault(route, [0.0] * (len(BUCKETS) + 2))
        counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        counts[-1] += seconds
        self.changed = True

    def snapshot(self) -> dict:
        self.changed = False
        return {
            "load_seconds": self.load_seconds,
            "requests": dict(self.requests),
            "rows": dict(self.rows),
            "latency": {route: list(counts) for route, counts in self.latency.items()},
        }


# The replica's counts: one replica per process (a Serve replica is an actor). Looked up here
# by the middleware, because Serve pickles the deployment class by value: a middleware that
# held the instance's counts would see a copy.
_replica: ReplicaMetrics | None = None


def count_in(counts: ReplicaMetrics | None) -> None:
    """Count this process's responses in `counts` from now on."""
    global _replica
    _replica = counts


class CountEveryResponse:
    """ASGI middleware: each HTTP response's route, status, seconds and rows (a route sets
    request.state.rows) into the replica's counts. A plain ASGI wrapper rather than
    Starlette's BaseHTTPMiddleware, which would add a task and a stream to every request. An
    exception that escapes the app counts as the 500 that Starlette answers it with."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500
        # The route's request.state lives in this dict, whether or not a layer copies the scope.
        state = scope.setdefault("state", {})

        async def sending(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if _replica is not None:
                seconds = time.perf_counter() - started
                _replica.observe(scope["path"], status, seconds, state.get("rows", 0))


def merge(snapshots: dict[str, dict]) -> dict:
    """Every replica's totals summed (and each one's load time kept)."""
    merged: dict = {"load_seconds": {}, "requests": {}, "rows": {}, "latency": {}}
    for replica, snap in snapshots.items():
        merged["load_seconds"][replica] = snap["load_seconds"]
        for name in ("requests", "rows"):
            for key, value in snap[name].items():
                merged[name][key] = merged[name].get(key, 0) + value
        for route, counts in snap["latency"].items():
            total = merged["latency"].setdefault(route, [0.0] * len(counts))
            for i, value in enumerate(counts):
                total[i] += value
    return merged


def render(merged: dict, labels: dict[str, str]) -> bytes:
    """The Prometheus text exposition of merged totals (prometheus_client's format)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

    class Totals:
        def collect(self) -> Iterable:
            requests, rows = (
                _by_route_and_status(CounterMetricFamily, f"runner_{name}", text, merged[name])
                for name, text in (
                    ("requests", "Requests answered, by route and status"),
                    ("rows", "Rows in the requests, by route and status"),
                )
            )
            latency = HistogramMetricFamily(
                "runner_request_seconds", "Time in the replica per request", labels=["route"]
            )
            for route, counts in sorted(merged["latency"].items()):
                cumulative, buckets = 0.0, []
                for bound, count in zip((*BUCKETS, float("inf")), counts[:-1], strict=True):
                    cumulative += count
                    buckets.append((_bound(bound), cumulative))
                latency.add_metric([route], buckets, sum_value=counts[-1])
            load = GaugeMetricFamily(
                "runner_model_load_seconds",
                "Seconds each replica took to load the model",
                labels=["replica"],
            )
            for replica, seconds in sorted(merged["load_seconds"].items()):
                load.add_metric([replica], seconds)
            info = GaugeMetricFamily(
                "runner_model_info", "The served model", labels=["name", "version"]
            )
            info.add_metric([labels["name"], labels["version"]], 1)
            yield from (requests, rows, latency, load, info)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Totals())
    return generate_latest(registry)


def _by_route_and_status(family, name: str, text: str, totals: dict):
    counter = family(name, text, labels=["route", "status"])
    for (route, status), value in sorted(totals.items()):
        counter.add_metric([route, status], value)
    return counter


def _bound(value: float) -> str:
    return "+Inf" if value == float("inf") else repr(value)


class MetricsKeeper:
    """The replicas' last totals, one entry per replica (a Ray actor: serve.server starts it
    before the deployment, named KEEPER)."""

    def __init__(self):
        self.snapshots: dict[str, dict] = {}

    def put(self, replica: str, snapshot: dict) -> None:
        self.snapshots[replica] = snapshot

    def merged(self) -> dict:
        return merge(self.snapshots)
