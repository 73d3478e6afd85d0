"""A tracker defined in the tests alone (`+logger.probe._target_=probe_tracker.ProbeTracker`):
it writes each call it gets as a JSON line, so a test reads what the runner told it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


def _write(path: str, call: str, **facts) -> None:
    with open(path, "a") as out:
        out.write(json.dumps({"call": call, **facts}, default=str) + "\n")


@dataclass
class ProbeEpochs:
    path: str

    def log_epoch(self, record: dict) -> None:
        _write(self.path, "log_epoch", epoch=record["epoch"], validation=record["validation"])

    def close(self) -> None:
        _write(self.path, "close_epochs")


class ProbeTracker:
    name = "probe"

    def __init__(self, path: str):
        self.path = path

    def prepare(self, run_dir: Path, child) -> None:
        _write(self.path, "prepare", run_dir=run_dir)

    def start(self, run) -> None:
        _write(self.path, "start", tags=run.tags, seed=run.config["seed"], trial=run.trial)

    def epochs(self) -> ProbeEpochs:
        return ProbeEpochs(self.path)

    def log_model(self, model_dir: Path) -> None:
        _write(self.path, "log_model", files=sorted(p.name for p in Path(model_dir).iterdir()))

    def log_results(self, run_dir: Path, metrics: dict, extra: dict) -> None:
        _write(
            self.path, "log_results", metrics=metrics, best_epoch=extra["training"]["best_epoch"]
        )

    def finish(self, status: str) -> None:
        _write(self.path, "finish", status=status)

    def location(self) -> str:
        return self.path

    def open_sweep(self, sweep_dir: Path, tags: dict) -> None:
        _write(self.path, "open_sweep", sweep_dir=sweep_dir)

    def close_sweep(self, sweep_dir: Path, table, objective: str, failed: bool) -> None:
        _write(self.path, "close_sweep", trials=0 if table is None else len(table), failed=failed)


def calls(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]
