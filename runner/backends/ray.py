"""The Ray backend: attach to a running cluster, or start a local one, and shut
down only what this run started."""

from __future__ import annotations

import logging
import os
import socket

from runner.errors import UserError

log = logging.getLogger(__name__)
CURRENT_CLUSTER_FILE = "/tmp/ray/ray_current_cluster"


def running_cluster_address() -> str | None:
    """The address of the Ray cluster started on this machine (`ray start`), if it answers."""
    try:
        with open(CURRENT_CLUSTER_FILE) as handle:
            address = handle.read().strip()
    except OSError:
        return None
    return address if address and reachable(address, timeout=1.0) else None


def reachable(address: str, timeout: float) -> bool:
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


_ACTIVE: RayBackend | None = None  # the Ray backend of the command in progress


def ensure_ray(what: str):
    """The ray module, with Ray started or attached by the active Ray backend on first use.
    Only the backend calls ray.init; components that need Ray call this."""
    import ray

    if _ACTIVE is not None and not _ACTIVE.started:
        _ACTIVE.start()
    elif not ray.is_initialized():
        raise UserError(f"{what} runs on Ray; add backend=ray")
    return ray


class RayBackend:
    """Ray starts (or is attached) lazily, the first time a component needs it: a small run
    whose auto choices are all local never pays Ray's start-up."""

    name = "ray"
    is_main = True  # the driver; Ray workers never run commands

    def main_first(self, fn):
        return fn()

    def __init__(
        self,
        address: str | None = None,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        object_store_memory: int | None = None,
        connect_timeout_s: float = 5.0,
    ):
        self.address = address
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.object_store_memory = object_store_memory
        self.connect_timeout_s = connect_timeout_s
        self._initialized_here = False
        self._address = None
        self.started = False

    def _target_address(self) -> str | None:
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

    def __enter__(self):
        global _ACTIVE
        import sys

        if "ray" not in sys.modules or not sys.modules["ray"].is_initialized():
            self._address = self._target_address()  # an unreachable cluster fails now, in seconds
        _ACTIVE = self
        return self

    def start(self) -> None:
        import ray

        self.started = True
        self.quiet_ray_data()
        if ray.is_initialized():
            log.info("ray backend: using the Ray session this process already has")
            return
        address = self._address
        if address:
            try:
                ray.init(address=address, log_to_driver=True)
            except ConnectionError as exc:
                raise UserError(
                    f"cannot attach to the Ray cluster at {address} ({exc}); check backend.address "
                    "(or RAY_ADDRESS) and that the cluster runs the same Ray version"
                ) from None
            log.info("ray backend: attached to the cluster at %s", address)
        else:
            ray.init(
                num_cpus=self.num_cpus,
                num_gpus=self.num_gpus,
                object_store_memory=self.object_store_memory,
                include_dashboard=False,
            )
            log.info(
                "ray backend: started a local Ray (%s CPUs)", ray.cluster_resources().get("CPU")
            )
        self._initialized_here = True

    @staticmethod
    def quiet_ray_data() -> None:
        """Ray Data logs every execution at INFO and draws progress bars; the run's own log says enough."""
        import ray.data

        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)

    def __exit__(self, *exc) -> None:
        global _ACTIVE
        _ACTIVE = None
        if self._initialized_here:
            import ray

            ray.shutdown()  # disconnects from an attached cluster; stops one we started
            self._initialized_here = False
