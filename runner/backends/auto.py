"""backend=auto (the default): Horovod when launched by horovodrun, Ray when a
cluster is reachable or this run is part of a Ray job, local otherwise. Logs
what it picked and why."""

from __future__ import annotations

import logging
import os

from runner.backends.horovod import HorovodBackend, launched_by_horovodrun
from runner.backends.local import LocalBackend
from runner.backends.ray import RayBackend
from runner.runtime import running_cluster_address, session_active

log = logging.getLogger(__name__)


class AutoBackend:
    """Decided at assembly (runner.assembly), when the trainer's needs are known too."""

    name = "auto"

    def __init__(self, ray: dict):
        self.ray = dict(ray)

    def detect(self, wants_ray_reason: str | None = None):
        """The backend for where this run finds itself; wants_ray_reason (e.g. more than one
        training worker) makes it start a local Ray when no cluster is found."""
        ray = dict(self.ray)
        variable = launched_by_horovodrun()
        if variable:
            log.info("backend=auto picked horovod: %s is set (launched by horovodrun)", variable)
            return HorovodBackend()
        reason = None
        if session_active():
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
            elif wants_ray_reason:
                reason = f"{wants_ray_reason}; no cluster is reachable, so a local Ray starts"
        if reason:
            log.info("backend=auto picked ray: %s", reason)
            return RayBackend(**ray)
        log.info("backend=auto picked local: no Ray cluster is reachable and RAY_ADDRESS is unset")
        return LocalBackend()
