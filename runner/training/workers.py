"""What every training worker does about itself: threads, its log file, its record."""

from __future__ import annotations

import json
import logging
import os
import socket
from pathlib import Path

import torch

from runner.runtime import current_node
from runner.training.follow import WORKER_LOG_FORMAT


def set_threads(num_threads: int | None, strategy) -> None:
    threads = num_threads
    if not threads and strategy.world_size > 1:
        # Workers on one machine share its cores: workers x threads must not exceed them.
        threads = max(1, (os.cpu_count() or 1) // max(strategy.local_size, 1))
    if threads:
        torch.set_num_threads(int(threads))


class _WorkerLog(logging.FileHandler):
    _runner_worker = True  # what tells log_to_file the process has one already


def log_to_file(logdir: Path, rank: int) -> None:
    """Workers log to <logdir>/rank-N.log (and to stderr, which Ray forwards)."""
    logdir.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    if not any(getattr(h, "_runner_worker", False) for h in root.handlers):
        handler = _WorkerLog(logdir / f"rank-{rank}.log")
        handler.setFormatter(logging.Formatter(WORKER_LOG_FORMAT))
        root.addHandler(handler)
        root.setLevel(logging.INFO)


def record(run_dir: Path, strategy) -> None:
    """workers/rank-N.json: where each worker ran (process, host, Ray node)."""
    (run_dir / "workers").mkdir(parents=True, exist_ok=True)
    info = {
        "rank": strategy.rank,
        "world_size": strategy.world_size,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "node": current_node(),
        "device": str(strategy.device),
    }
    if strategy.name.startswith("horovod"):  # None: Horovod's own default (1 ms)
        info["horovod_cycle_time_ms"] = os.environ.get("HOROVOD_CYCLE_TIME")
    (run_dir / "workers" / f"rank-{strategy.rank}.json").write_text(json.dumps(info))
