"""logger.tensorboard: each epoch's metrics as TensorBoard events in <run>/tensorboard (written
by training's rank 0), and a sweep's trials as hparams in <sweep>/tensorboard, so that
`tensorboard --logdir` compares them side by side."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.config import TensorBoardConfig, component_settings

FOLDER = "tensorboard"


@dataclass
class TensorBoardEpochs:
    """Rank 0's writer: plain data until the first epoch, so it pickles to a training worker."""

    logdir: str
    _writer: Any = field(default=None, repr=False)

    def log_epoch(self, record: dict) -> None:
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(self.logdir)
        step = record["epoch"]
        for split in ("train", "validation"):
            for name, value in record[split].items():
                self._writer.add_scalar(f"{split}/{name}", value, step)
        self._writer.add_scalar("learning_rate", record["learning_rate"], step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __getstate__(self) -> dict:
        return {"logdir": self.logdir, "_writer": None}


class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self, **keys):
        self.settings = component_settings(keys, TensorBoardConfig)
        self.run_dir: Path | None = None

    def prepare(self, run_dir: Path, child) -> None:
        pass  # the run dir is known at start (under horovodrun it becomes rank 0's)

    def start(self, run) -> None:
        self.run_dir = Path(run.run_dir)

    def epochs(self) -> TensorBoardEpochs | None:
        return TensorBoardEpochs(str(self.run_dir / FOLDER)) if self.run_dir else None

    def log_model(self, model_dir: Path) -> None:
        pass

    def log_results(self, run_dir: Path, metrics: dict, extra: dict) -> None:
        pass

    def finish(self, status: str) -> None:
        pass

    def location(self) -> str | None:
        found = self.run_dir / FOLDER if self.run_dir else None
        return str(found) if found is not None and found.exists() else None

    def open_sweep(self, sweep_dir: Path, tags: dict[str, str]) -> None:
        pass

    def close_sweep(self, sweep_dir: Path, table: Any, objective: str, failed: bool) -> None:
        """Each ended trial's swept values and objective as hparams (trial-<n>/)."""
        if table is None:
            return
        import pandas as pd
        from torch.utils.tensorboard import SummaryWriter

        params = [c for c in table.columns if c.startswith("param:")]
        for _, row in table.iterrows():
            if row["status"] not in ("completed", "pruned") or pd.isna(row["objective"]):
                continue
            with SummaryWriter(str(Path(sweep_dir) / FOLDER / f"trial-{row['trial']}")) as writer:
                hparams = {c.removeprefix("param:"): str(row[c]) for c in params}
                writer.add_hparams(
                    hparams, {f"hparam/{objective}": float(row["objective"])}, run_name="."
                )
