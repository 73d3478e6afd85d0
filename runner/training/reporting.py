"""Per-epoch reports to whatever schedules this run (a Tune sweep's scheduler, set up by
runner/sweeps/tune/ in the trial's process): the epoch loop reports each finished
epoch on the main worker and ends, as early stopping does, when the answer is no.

Training workers in other processes (Horovod or DDP on Ray) reach the trial's process
through a small relay actor: rank 0 puts its record there and waits for the verdict, a
thread in the trial's process takes it, asks the scheduler and answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

_reporter: Callable[[dict], bool] | None = None
_epochs = 0
_stopped = False


def set_epoch_reporter(reporter: Callable[[dict], bool] | None) -> None:
    """reporter(epoch record) -> False when the run should stop; None: nobody listens."""
    global _reporter, _epochs, _stopped
    _reporter, _epochs, _stopped = reporter, 0, False


def report_epoch(record: dict, final: bool, forward: Callable | None = None) -> bool:
    """True: train on; False: the scheduler stopped this run. A stop after the run's final
    epoch (ASHA stops every trial that reaches its last rung) is no pruning. `forward`: a
    worker in another process hands the decision to the trial's process (RelayReporter)."""
    global _epochs, _stopped
    slim = {"epoch": record["epoch"], "train": record["train"], "validation": record["validation"]}
    if forward is not None:
        return forward(slim, final)
    _epochs = record["epoch"]
    if _reporter is None or _stopped:
        return not _stopped
    _stopped = not _reporter(slim) and not final
    return not _stopped


@contextmanager
def silenced() -> Iterator[None]:
    """Nobody listens inside (a bagged portfolio's folds: their epochs are not the run's);
    the run's reporter, and whether it had stopped the run, come back after."""
    global _reporter, _epochs, _stopped
    kept = _reporter, _epochs, _stopped
    _reporter = None
    try:
        yield
    finally:
        _reporter, _epochs, _stopped = kept


def listening() -> bool:
    """A scheduler hears this process's epochs (a Tune trial's)."""
    return _reporter is not None


def stopped_by_scheduler() -> bool:
    return _stopped


def epochs_reported() -> int:
    return _epochs


class _EpochRelay:
    """A Ray actor: rank 0's records one way, the trial's verdicts the other."""

    def __init__(self):
        import asyncio

        self.records: asyncio.Queue = asyncio.Queue()
        self.verdicts: asyncio.Queue = asyncio.Queue()

    async def put(self, record: dict, final: bool) -> bool:
        await self.records.put((record, final))
        return await self.verdicts.get()

    async def take(self):
        return await self.records.get()

    async def answer(self, go_on: bool) -> None:
        await self.verdicts.put(go_on)


@dataclass
class RelayReporter:
    """Travels to the workers in the TrainingJob (an actor handle pickles)."""

    relay: Any

    def __call__(self, record: dict, final: bool) -> bool:
        import ray

        return bool(ray.get(self.relay.put.remote(record, final)))


@contextmanager
def relayed_reports() -> Iterator[RelayReporter | None]:
    """A reporter for training workers in other processes, when this process has a reporter."""
    if _reporter is None:
        yield None
        return
    import ray

    # Any: Ray types an actor handle's methods without their .remote.
    relay: Any = ray.remote(num_cpus=0)(_EpochRelay).remote()
    done = threading.Event()

    def pump() -> None:
        pending = relay.take.remote()
        while not done.is_set():
            ready, _ = ray.wait([pending], timeout=0.5)
            if not ready:
                continue
            record, final = ray.get(pending)
            relay.answer.remote(report_epoch(record, final))
            pending = relay.take.remote()

    thread = threading.Thread(target=pump, name="epoch-relay", daemon=True)
    thread.start()
    try:
        yield RelayReporter(relay)
    finally:
        done.set()
        thread.join(timeout=5)
        ray.kill(relay)
