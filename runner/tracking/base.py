"""The tracker seam: where a run (and a sweep) is recorded besides metrics.json.

`conf/logger/<name>.yaml` lists a run's trackers, one node each with the `_target_` of its
class; commands.py and the sweep drivers reach them only through `Trackers` below, so a
new tracker is its module, its config file and its schema in runner/config/tracking.py.

The run's side, in the order the methods are called (by the main process only):
`prepare` once the run's background process exists, `start` when the command starts,
`epochs` for training's rank 0 (picklable: it travels with the TrainingJob), `log_model`,
`log_results`, `finish`; `location` for the summary. A sweep's driver calls `open_sweep`
before its trials start and `close_sweep` after them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runner.background import Background


@dataclass
class SweepTrial:
    """A run that is one trial of a `--multirun` sweep (Hydra's job number in its sweep dir)."""

    sweep_dir: str
    number: int
    overrides: list[str]

    @classmethod
    def current(cls) -> SweepTrial | None:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if not HydraConfig.initialized():
            return None
        hydra = HydraConfig.get()
        if hydra.mode != RunMode.MULTIRUN:
            return None
        sweep_dir = str(Path(str(hydra.sweep.dir)).resolve())
        return cls(sweep_dir, int(hydra.job.num), list(hydra.overrides.task))


@dataclass
class RunStart:
    """What a tracker is told when the command starts."""

    run_dir: Path
    config: dict  # the resolved config
    tags: dict[str, str]  # the components the run picked, the cluster it runs on
    trial: SweepTrial | None  # set when the run is a sweep's trial


class EpochLog(Protocol):
    """Rank 0's per-epoch record (train and validation metrics, the learning rate)."""

    def log_epoch(self, record: dict) -> None: ...

    def close(self) -> None: ...


class Tracker(Protocol):
    name: str  # the summary's label for `location()`

    def prepare(self, run_dir: Path, child: Background) -> None: ...

    def start(self, run: RunStart) -> None: ...

    def epochs(self) -> EpochLog | None: ...

    def log_model(self, model_dir: Path) -> None: ...

    def log_results(self, run_dir: Path, metrics: dict, extra: dict) -> None: ...

    # "completed", "pruned" (a sweep's scheduler stopped it) or "failed"
    def finish(self, status: str) -> None: ...

    def location(self) -> str | None: ...

    def open_sweep(self, sweep_dir: Path, tags: dict[str, str]) -> None: ...

    # `table`: the sweep report's rows (sweep_report.csv), best first; None when no trial ended
    def close_sweep(self, sweep_dir: Path, table: Any, objective: str, failed: bool) -> None: ...


class Trackers:
    """The run's trackers, called in turn (their order: the logger config's)."""

    def __init__(self, trackers: list[Tracker]):
        self.all = trackers

    @classmethod
    def from_config(cls, logger: Any) -> Trackers:
        """One tracker per non-null node of the `logger` config (each with its `_target_`)."""
        from runner.config import built

        nodes = [logger[name] for name in logger] if logger is not None else []
        return cls([built(node) for node in nodes if node is not None])

    @property
    def background(self) -> bool:
        """Whether one of them logs from the run's background process."""
        return any(getattr(t, "background", False) for t in self.all)

    def prepare(self, run_dir: Path, child: Background) -> None:
        for tracker in self.all:
            tracker.prepare(run_dir, child)

    def start(self, run: RunStart) -> None:
        for tracker in self.all:
            tracker.start(run)

    def epochs(self) -> list[EpochLog]:
        return [log for log in (t.epochs() for t in self.all) if log is not None]

    def log_model(self, model_dir: Path) -> None:
        for tracker in self.all:
            tracker.log_model(model_dir)

    def log_results(self, run_dir: Path, metrics: dict, extra: dict) -> None:
        for tracker in self.all:
            tracker.log_results(run_dir, metrics, extra)

    def finish(self, status: str) -> None:
        for tracker in self.all:
            tracker.finish(status)

    def locations(self) -> dict[str, str]:
        found = ((t.name, t.location()) for t in self.all)
        return {name: where for name, where in found if where}

    def open_sweep(self, sweep_dir: Path, tags: dict[str, str]) -> None:
        for tracker in self.all:
            tracker.open_sweep(sweep_dir, tags)

    def close_sweep(self, sweep_dir: Path, table: Any, objective: str, failed: bool) -> None:
        for tracker in self.all:
            tracker.close_sweep(sweep_dir, table, objective, failed)


def start_early(args: list[str], conf_dir: Path) -> None:
    """A single run whose command line picks `logger=<name>`: each of that option's trackers
    with a `start_early(args)` (a classmethod) starts what it can before Hydra composes the
    config (MLflow's background process and its imports)."""
    import importlib

    picked = [a.split("=", 1)[1] for a in args if a.startswith("logger=")]
    if not picked or any(a.startswith("-") for a in args):
        return  # not asked for, or a sweep, --help, --cfg: the command starts its own if any
    path = conf_dir / "logger" / f"{picked[-1]}.yaml"
    if not path.is_file():
        return  # the override's own check names the options
    for target in tracker_targets(path):
        module, _, name = target.rpartition(".")
        tracker = getattr(importlib.import_module(module), name)
        if hasattr(tracker, "start_early"):
            tracker.start_early(args)


def tracker_targets(path: Path) -> list[str]:
    """The `_target_` of each tracker a conf/logger/ option lists: its own where the node
    names one, else its schema's (runner/config/tracking.py LOGGER_SCHEMAS), where the built-in
    trackers keep theirs."""
    import yaml

    from runner.config import LOGGER_SCHEMAS

    nodes = yaml.safe_load(path.read_text()) or {}
    # A tracker is a node of its own or a schema the defaults list places: `/<schema>@<key>`.
    placed = [str(d).rpartition("@")[2] for d in nodes.get("defaults", []) if "@" in str(d)]
    targets = []
    for key in dict.fromkeys([*placed, *(k for k in nodes if k != "defaults")]):
        node = nodes.get(key)
        own = node.get("_target_") if isinstance(node, dict) else None
        target = own or getattr(LOGGER_SCHEMAS.get(key), "_target_", None)
        if target:
            targets.append(target)
    return targets
