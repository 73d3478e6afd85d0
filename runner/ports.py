"""Free TCP ports for servers that bind them later: HAProxy's stats and metrics, Ray's
dashboard agent, and the tests' and the bench's own servers and clusters."""

from __future__ import annotations

import contextlib
import random
import socket
from pathlib import Path

# Ray's workers listen on 10002-19999 by default (min_worker_port, max_worker_port).
_ABOVE_RAYS_WORKER_PORTS = 20000


def free_ports(count: int) -> list[int]:
    """`count` distinct ports, free now on every interface, from between Ray's worker ports and
    the kernel's ephemeral range. A port got by binding to port 0 lies in that range, where,
    until its server binds it, any outgoing connection and any port Ray picks for itself
    (Node._get_unused_port binds port 0) may take it: CI's HAProxy once found its stats port
    taken so. Every socket stays bound until all are picked, so no two picks are the same."""
    low, high = _ABOVE_RAYS_WORKER_PORTS, ephemeral_range()[0] - 1
    picked: list[int] = []
    with contextlib.ExitStack() as held:
        candidates = range(low, high + 1) if high > low else range(0)
        for port in random.sample(candidates, k=min(200 * count, len(candidates))):
            s = held.enter_context(socket.socket())
            try:
                s.bind(("", port))
            except OSError:
                continue
            picked.append(port)
            if len(picked) == count:
                return picked
    return _kernels_pick(count)  # an unusual kernel setting, or all of those taken


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for ports nobody asked for (outgoing connections, binding port 0)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _kernels_pick(count: int) -> list[int]:
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in sockets]
