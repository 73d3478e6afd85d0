"""The Ray backend: attach to a running cluster, or start a local one, and shut
down only what this run started. Ray starts lazily (runner.runtime), the first
time a component needs it."""

from __future__ import annotations

from runner import runtime
from runner.backends.local import LocalBackend


class RayBackend(LocalBackend):
    """The driver of a Ray job: the main process; Ray workers never run commands."""

    name = "ray"
    offers_ray = True

    def __init__(self, **settings):  # runner.config.RaySettings' fields
        self.runtime = runtime.RayRuntime(**settings)

    def __enter__(self):
        self.runtime.check()  # an unreachable cluster fails now, in seconds
        runtime.activate(self.runtime)
        return self

    def __exit__(self, exc_type, *exc) -> None:
        runtime.activate(None)
        self.runtime.stop(failed=exc_type is not None)
