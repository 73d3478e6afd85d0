"""The backend seam: who owns the compute of a command.

A backend starts (or attaches to) what the run computes on, says which process is
the main one, and shuts down what it started. Components ask it what it can do
(its capability flags) instead of comparing names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar, runtime_checkable

from runner.errors import UserError

T = TypeVar("T")


@runtime_checkable
class Backend(Protocol):
    name: str
    # Capabilities, fixed per backend:
    offers_ray: bool  # components may use Ray (processors, loaders, trainers, scorers)
    launched_ranks: bool  # this process is one of N ranks started by horovodrun / mpirun

    @property
    def is_main(self) -> bool:
        """The process that writes the run's outputs (rank 0; the driver on Ray)."""

    @property
    def rank(self) -> int: ...

    @property
    def size(self) -> int:
        """Processes of the launch (horovodrun's -np; 1 otherwise)."""

    def main_first(self, fn: Callable[[], T]) -> T:
        """fn on the main process, then on the others (which find its work, e.g. the cache)."""

    def share(self, value: T) -> T:
        """The main process's value, on every process (e.g. its run dir)."""

    def gather(self, value: T) -> list[T]:
        """Every process's value, in rank order (a barrier: all processes reach it)."""

    def __enter__(self) -> Backend: ...

    def __exit__(self, *exc) -> None: ...


def require_ray_backend(
    backend: Backend, what: str, fix: str = "add backend=ray", layer: str = "Ray"
) -> None:
    """For a component that requires Ray: the UserError "<what> runs on <layer>: <fix>"
    unless the backend offers Ray."""
    if not backend.offers_ray:
        raise UserError(f"{what} runs on {layer}: {fix}")
