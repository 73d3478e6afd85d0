"""A server the bench or a test starts: `python run.py command=serve` on a free port, then GET
a URL until its answer is ready, while the server's process lives, up to a deadline."""

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_serve(model_dir, run_dir, *overrides: str, env=None, output=subprocess.PIPE):
    """python run.py command=serve of `model_dir` on a free port: (the process, its URL). Its
    output goes to `output` (piped: the caller reads it once the process ends). `env`: the
    whole environment (default: this one without RAY_ADDRESS, so a Ray of its own)."""
    from runner.ports import free_ports

    (port,) = free_ports(1)
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "run.py"),
            "command=serve",
            f"model_dir={model_dir}",
            f"serve.port={port}",
            *overrides,
            f"hydra.run.dir={run_dir}",
        ],
        cwd=ROOT,
        env=env if env is not None else {**os.environ, "RAY_ADDRESS": ""},
        stdout=output,
        stderr=subprocess.STDOUT if output == subprocess.PIPE else output,
        text=True,
    )
    return process, f"http://127.0.0.1:{port}"


def answers_200(answer) -> bool:
    return answer.status_code == 200


def replicas_running(count: int):
    """Ready once /health's JSON shows `count` replicas, all RUNNING."""

    def ready(answer) -> bool:
        try:
            return answer.json().get("replicas") == {"RUNNING": count}
        except ValueError:  # not JSON yet: the proxy answered before the app
            return False

    return ready


def until_ready(process, url: str, seconds: float, ready=answers_200, every: float = 0.5) -> bool:
    """True once GET `url` gives an answer `ready` accepts; False when `process` ends first or
    `seconds` pass (the caller decides how to fail)."""
    import requests

    deadline = time.monotonic() + seconds
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if ready(requests.get(url, timeout=2)):
                return True
        except requests.RequestException:  # not listening yet
            pass
        time.sleep(every)
    return False
