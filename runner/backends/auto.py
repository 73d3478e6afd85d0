"""backend=auto (the default): Horovod when launched by horovodrun, Ray when a
cluster is reachable or this run is part of a Ray job, local otherwise. Logs
what it picked and why.

processor=auto and loader=auto follow the backend: Dask and Ray Data on Ray,
pandas and the local Arrow reader otherwise."""

from __future__ import annotations

import logging
import os

from runner.backends.horovod import launched_by_horovodrun
from runner.backends.local import LocalBackend
from runner.backends.ray import RayBackend, running_cluster_address

log = logging.getLogger(__name__)


def detect(ray: dict | None = None):
    """The backend object for where this run finds itself, and why."""
    ray = dict(ray or {})
    variable = launched_by_horovodrun()
    if variable:
        log.info("backend=auto picked horovod: %s is set (launched by horovodrun)", variable)
        from runner.backends.horovod import HorovodBackend

        return HorovodBackend()
    reason = None
    if _ray_session_active():
        reason = "this process is already connected to Ray"
    elif os.environ.get("RAY_ADDRESS"):
        reason = f"RAY_ADDRESS={os.environ['RAY_ADDRESS']} is set"
    elif ray.get("address"):
        reason = f"backend.ray.address={ray['address']} is set"
    else:
        address = running_cluster_address()
        if address:
            reason = f"a Ray cluster answers at {address}"
            ray["address"] = address
    if reason:
        log.info("backend=auto picked ray: %s", reason)
        return RayBackend(**ray)
    log.info("backend=auto picked local: no Ray cluster is reachable and RAY_ADDRESS is unset")
    return LocalBackend()


def _ray_session_active() -> bool:
    import sys

    if "ray" not in sys.modules:  # never import Ray just to find out
        return False
    return sys.modules["ray"].is_initialized()


class ByBackend:
    """An option whose object is picked at run time from the backend, the data and the trainer."""

    def __init__(self, choose):
        self.choose = choose

    def resolve(self, backend_name: str, source=None, trainer=None):
        return self.choose(backend_name, source, trainer)


def processor(
    parallelism: int | None = None, persist: bool = True, dask_min_bytes: int = 256 * 2**20
) -> ByBackend:
    """Dask on Ray for data of dask_min_bytes or more; pandas for smaller data, where
    spreading it over tasks costs more than it saves (and locally)."""

    def choose(backend_name: str, source, trainer):
        if backend_name == "ray":
            size = source.size_bytes() if source is not None else dask_min_bytes
            if size >= dask_min_bytes:
                from runner.processing.dask_engine import DaskProcessor

                log.info(
                    "processor=auto picked dask: %.0f MB of data (processor.dask_min_bytes=%.0f MB)",
                    size / 2**20,
                    dask_min_bytes / 2**20,
                )
                return DaskProcessor(parallelism=parallelism, persist=persist)
            log.info(
                "processor=auto picked pandas: %.1f MB of data is below processor.dask_min_bytes=%.0f MB",
                size / 2**20,
                dask_min_bytes / 2**20,
            )
        from runner.processing.engines import PandasProcessor

        return PandasProcessor()

    return ByBackend(choose)


def loader(**settings) -> ByBackend:
    """Ray Data for distributed or windowed training; the local Arrow reader when one
    process trains from data that fits (Ray Data's per-batch machinery buys nothing there)."""

    def choose(backend_name: str, source, trainer):
        distributed = trainer is not None and getattr(trainer, "name", "local") != "local"
        if backend_name == "ray" and (distributed or settings.get("window_size_bytes")):
            from runner.loading.ray_data import RayDataLoader

            log.info(
                "loader=auto picked ray: %s",
                "distributed training" if distributed else "windowed loading",
            )
            return RayDataLoader(**settings)
        from runner.loading.local import LocalLoader

        keep = ("batch_size", "shuffle", "drop_last", "eval_batch_size")
        return LocalLoader(**{k: v for k, v in settings.items() if k in keep})

    return ByBackend(choose)
