"""time_limit=<seconds>: the wall-clock time by which fitting stops, so that the command ends
within its limit. The command sets it when it starts (`begin`); whatever fits reads it: the
training loop after each epoch (the job carries it to remote workers), LightGBM and CatBoost
after each round, a bagged portfolio between its folds (a fold narrows it with `until`).
Clock: time.time(), which every worker on a cluster's nodes shares closely enough."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

# Of the limit, what is kept for the work after fitting (saving the model, scoring the test
# split, plots, importance, the report): fitting stops this much before the command's end.
AFTER_FIT_SHARE = 0.1
AFTER_FIT_LEAST = 5.0
# `python run.py`'s first command counts from the process's start (Python's and Hydra's
# start-up are part of what the user waits for) where that was at most this long before.
STARTUP_AT_MOST = 30.0

_fit_deadline: float | None = None
_command_ends: float | None = None
_first_command = True


def command_start() -> float:
    """When the command the user waits for began: now, or, for the first command of a `python
    run.py` process, the process's start (not a Ray worker's or a multirun's later jobs)."""
    global _first_command
    now = time.time()
    first, _first_command = _first_command, False
    if first and os.path.basename(sys.argv[0] if sys.argv else "") == "run.py":
        import psutil

        created = psutil.Process().create_time()
        if now - created <= STARTUP_AT_MOST:
            return created
    return now


def begin(limit: float | None, started: float) -> None:
    """The command's limit in seconds from `started` (command_start); None: no limit."""
    global _fit_deadline, _command_ends
    if limit is None:
        end()
        return
    _command_ends = started + limit
    _fit_deadline = _command_ends - max(AFTER_FIT_LEAST, AFTER_FIT_SHARE * limit)


def end() -> None:
    """No limit from now on (the command is done: a process that runs more commands, or a Ray
    worker that runs more tasks, carries none over)."""
    global _fit_deadline, _command_ends
    _fit_deadline = _command_ends = None


def command_left() -> float | None:
    """Seconds left before the command's own limit (0 once past); None: no limit. What runs
    after fitting (permutation importance) sizes itself to it."""
    return None if _command_ends is None else max(0.0, _command_ends - time.time())


def deadline() -> float | None:
    """When fitting must stop (time.time()); None: no limit."""
    return _fit_deadline


def left() -> float | None:
    """Seconds left for fitting (0 once past); None: no limit."""
    return None if _fit_deadline is None else max(0.0, _fit_deadline - time.time())


@contextmanager
def until(at: float, outright: bool = False) -> Iterator[None]:
    """Fitting inside stops by `at` or the command's deadline, whichever comes first;
    `outright`: by `at` (a Ray task, whose process has no command of its own)."""
    global _fit_deadline
    before = _fit_deadline
    _fit_deadline = at if before is None or outright else min(before, at)
    try:
        yield
    finally:
        _fit_deadline = before


class LightGBMDeadline:
    """A LightGBM callback that ends boosting at the deadline and keeps the best round so far
    on the validation split (the rounds recorded in `evals`, lower loss better), as early
    stopping would have."""

    def __init__(self, at: float, evals: dict):
        self.order = 40  # after record_evaluation (20) and early stopping (30)
        self.at, self.evals = at, evals

    def __call__(self, env) -> None:
        if time.time() < self.at:
            return
        from lightgbm.callback import EarlyStopException

        losses: list = next(iter(self.evals.get("validation", {}).values()), [])
        best = int(min(range(len(losses)), key=losses.__getitem__)) if losses else env.iteration
        raise EarlyStopException(best, env.evaluation_result_list)


class CatBoostDeadline:
    """A CatBoost callback that ends boosting at the deadline (the model shrinks to its best
    validation round, as with early stopping)."""

    def __init__(self, at: float):
        self.at = at

    def after_iteration(self, info) -> bool:
        return time.time() < self.at
