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
    """An option whose object depends on the backend picked at run time."""

    def __init__(self, choose):
        self.choose = choose

    def resolve(self, backend_name: str):
        return self.choose(backend_name)


def processor(parallelism: int | None = None, persist: bool = True) -> ByBackend:
    def choose(backend_name: str):
        if backend_name == "ray":
            from runner.processing.dask_engine import DaskProcessor

            return DaskProcessor(parallelism=parallelism, persist=persist)
        from runner.processing.engines import PandasProcessor

        return PandasProcessor()

    return ByBackend(choose)


def loader(**settings) -> ByBackend:
    def choose(backend_name: str):
        if backend_name == "ray":
            from runner.loading.ray_data import RayDataLoader

            return RayDataLoader(**settings)
        from runner.loading.local import LocalLoader

        keep = ("batch_size", "shuffle", "drop_last", "eval_batch_size")
        return LocalLoader(**{k: v for k, v in settings.items() if k in keep})

    return ByBackend(choose)
