"""The driver's view of distributed training: rank 0's own log lines (its epochs, its first
step, early stopping) repeated in the driver's log while the workers train, as a local run
shows them. Workers' output is not forwarded by default (backend.worker_logs=false, which
spares Ray's log monitor), and before this a distributed run said nothing between its start
and its summary.

Read from rank 0's log file (runner/training/workers.py: <trainer.logdir>/rank-0.log), which
the driver sees when the workers run on its machine or write to a shared filesystem; where it
does not, the first line of the run says where the file is."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

# The workers' log lines (workers.log_to_file writes them), and how this module reads them back.
WORKER_LOG_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"
_LINE = re.compile(
    r"^\[[^\]]*\]\[(?P<logger>runner[^\]]*)\]\[(?P<level>[A-Z]+)\] - (?P<message>.*)$"
)
POLL_S = 0.5


def log_dir(logdir: str | None, run_dir: str) -> Path:
    """trainer.logdir, or <run dir>/workers."""
    return Path(logdir or Path(run_dir) / "workers")


@contextlib.contextmanager
def following_rank_zero(logdir: Path) -> Iterator[None]:
    """While the block runs, rank 0's runner lines (INFO and up) from <logdir>/rank-0.log are
    logged here under their own logger names, at most POLL_S late; a retry's or a resumed
    run's earlier lines are not repeated."""
    path = logdir / "rank-0.log"
    log.info("workers log to %s (rank-N.log); rank 0's lines follow here", logdir)
    position = path.stat().st_size if path.exists() else 0
    stop = threading.Event()

    def follow() -> None:
        nonlocal position
        while True:
            stopped = stop.wait(POLL_S)
            position = relay_new_lines(path, position)
            if stopped:
                return

    thread = threading.Thread(target=follow, name="rank-0-log", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2 * POLL_S + 1)


def relay_new_lines(path: Path, position: int) -> int:
    """Logs the whole lines written to `path` after `position`; returns the new position (a
    line still being written waits for the next call)."""
    try:
        with path.open("rb") as handle:
            handle.seek(position)
            chunk = handle.read()
    except OSError:  # not there (yet, or on another machine)
        return position
    end = chunk.rfind(b"\n") + 1
    for raw in chunk[:end].decode("utf-8", errors="replace").splitlines():
        line = _LINE.match(raw)
        if line is not None:
            level = logging.getLevelName(line["level"])
            if isinstance(level, int) and level >= logging.INFO:
                logging.getLogger(line["logger"]).log(level, "%s", line["message"])
    return position + end
