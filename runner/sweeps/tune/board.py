"""What the trials and the scheduler share through Ray: the scheduler's verdicts and each
trial's number (its sweep subdir)."""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path

NUMBERS = ".trial_numbers.json"  # trial id -> sweep subdir, inside the sweep dir


def trial_number(board, trial_id: str) -> int:
    import ray

    return ray.get(board.number.remote(trial_id))


def verdicts_name(sweep_dir: Path) -> str:
    import hashlib

    return "tune-verdicts-" + hashlib.sha1(str(sweep_dir).encode()).hexdigest()[:12]


class SweepBoard:
    """A Ray actor, found by name: the trials the scheduler stopped, for the trials to read,
    and each trial's number (its sweep subdir)."""

    def __init__(self, numbers_file: str):
        self._stopped: set[str] = set()
        self._file = Path(numbers_file)
        self._numbers: dict[str, int] = (
            json.loads(self._file.read_text()) if self._file.is_file() else {}
        )

    def stop(self, trial_id: str) -> None:
        self._stopped.add(trial_id)

    def stopped(self, trial_id: str) -> bool:
        return trial_id in self._stopped

    def number(self, trial_id: str) -> int:
        """The counter in Tune's ids from its basic generator (<uuid>_00003); a searcher's
        trials have random ids, numbered in the order they first ask. Kept in the sweep dir,
        so a resumed sweep gives every trial its old number."""
        if trial_id not in self._numbers:
            counter = re.fullmatch(r"[0-9a-f]+_(\d+)", trial_id)
            taken = set(self._numbers.values())
            self._numbers[trial_id] = (
                int(counter.group(1))
                if counter
                else next(n for n in itertools.count() if n not in taken)
            )
            partial = self._file.with_suffix(".partial")
            partial.write_text(json.dumps(self._numbers))
            os.replace(partial, self._file)
        return self._numbers[trial_id]


def verdict_scheduler(base: type):
    """A scheduler whose STOP becomes a verdict the trial reads after its report: the trial
    ends its epoch, writes its outputs and returns by itself. Tune's own stop would not wait
    for that (at the end of an experiment it kills trials still stopping after 5 s)."""
    from ray.tune.schedulers import TrialScheduler

    class VerdictScheduler(base):
        def __init__(self, verdicts: str, **kwargs):
            super().__init__(**kwargs)
            self._verdicts = verdicts  # a name: the scheduler is pickled into Tune's state

        def on_trial_result(self, tune_controller, trial, result: dict) -> str:
            import ray

            if super().on_trial_result(tune_controller, trial, result) == TrialScheduler.STOP:
                ray.get(ray.get_actor(self._verdicts).stop.remote(trial.trial_id))
            return TrialScheduler.CONTINUE

    VerdictScheduler.__name__ = f"Verdict{base.__name__}"
    return VerdictScheduler
