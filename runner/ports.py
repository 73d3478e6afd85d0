"""Free local TCP ports, for servers this process starts (HAProxy's stats and metrics) and for
the tests' and the bench's own."""

from __future__ import annotations

import contextlib
import socket


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free local ports (on `host`; "": on every interface). Every socket stays
    bound until all are picked: two separate picks can get the same port back (CI's `ray start`
    once got one port for both its GCS and its dashboard)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in sockets]
