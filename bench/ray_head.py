"""A long-lived local Ray for bench runs that attach to it (backend.address,
hydra.launcher.ray.init.address): the warm-Ray workflow of docs/scaling.md."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path


@contextlib.contextmanager
def warm_ray():
    """A long-lived local Ray as `ray start --head` makes one (2 CPUs, no dashboard), for runs
    that attach with backend.address; its address, and `ray stop` at the end."""
    import socket

    sockets = [socket.socket() for _ in range(2)]
    for s in sockets:  # both bound before either is read: two distinct free ports
        s.bind(("127.0.0.1", 0))
    port, dashboard = (s.getsockname()[1] for s in sockets)
    for s in sockets:
        s.close()
    ray = str(Path(sys.executable).parent / "ray")
    env = {**os.environ, "RAY_ADDRESS": ""}
    subprocess.run(
        [
            ray,
            "start",
            "--head",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            f"--dashboard-port={dashboard}",
        ],
        check=True,
        capture_output=True,
        env=env,
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True, env=env)
