"""Cores handed to a training loop while it runs. The ensemble's trees, done beside the network,
give their cores back: the loop takes them at its next epoch. torch's thread count must be set
from the loop's own thread (OpenMP keeps it per thread), so the giver only leaves the number."""

from __future__ import annotations

import threading

_lock = threading.Lock()
_offered: int | None = None


def offer(threads: int) -> None:
    """The loop may train on `threads` threads from its next epoch on."""
    global _offered
    with _lock:
        _offered = threads


def take() -> int | None:
    """The thread count offered since the last take, if any (once)."""
    global _offered
    with _lock:
        threads, _offered = _offered, None
    return threads
