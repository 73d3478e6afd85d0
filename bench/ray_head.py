"""A long-lived local Ray for bench runs that attach to it (backend.address,
hydra.launcher.ray.init.address): the warm-Ray workflow of docs/scaling.md."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
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
        stop_ray(port)


def stop_ray(port: int, seconds: float = 10.0) -> None:
    """Stops the Ray cluster whose GCS listens on `port` (a `ray start` of ours) and nothing
    else: `ray stop` stops every Ray on the machine, other runs' and other tests' too. Its
    processes are those whose command line names its session dir (both nodes of a two-node
    cluster share it): terminated, then killed after `seconds`; and the machine's default
    Ray address where it names this cluster."""
    import re

    import psutil

    def command_line(process) -> str:
        try:
            return " ".join(process.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return ""

    def of_port(line: str) -> bool:  # its GCS, or a process that talks to it
        return f":{port} " in f"{line} " or f"--gcs_server_port={port}" in line

    processes = list(psutil.process_iter())
    sessions = set()
    for process in processes:
        line = command_line(process)
        if of_port(line):
            sessions.update(re.findall(r"/[^ =]*/session_[0-9_-]+[0-9]", line))
    own = [
        p
        for p in processes
        if p.pid != os.getpid()
        and (of_port(line := command_line(p)) or any(s in line for s in sessions))
    ]

    def running(process) -> bool:  # a zombie has ended (nobody may reap a daemon's children)
        try:
            return process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def stage(process) -> int:
        """The autoscaler's monitor first, then the raylets, then the rest (the GCS among
        them): terminated all at once, the monitor and the raylets outlived the GCS and
        waited out their retries, 12 s, before they exited; in this order all go in 1 s."""
        line = command_line(process)
        return 0 if "monitor.py" in line else 1 if "/raylet " in f"{line} " else 2

    deadline = time.monotonic() + seconds
    for number in range(3):
        these = [p for p in own if stage(p) == number]
        for process in these:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.terminate()
        while any(running(p) for p in these) and time.monotonic() < deadline:
            time.sleep(0.05)
    for process in own:
        if running(process):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
    # As `ray stop` does: the machine's default address (what `ray.init()` and backend=auto
    # attach to) no longer names this cluster, where it did.
    from ray._common.utils import get_ray_address_file

    address_file = Path(get_ray_address_file(None))
    with contextlib.suppress(OSError):
        if address_file.read_text().strip().endswith(f":{port}"):
            address_file.unlink()
