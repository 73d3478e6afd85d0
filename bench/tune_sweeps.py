"""Tune sweeper figure: the same random search with ASHA and without a scheduler, side by
side in one run (same seed, so the same trials): wall time and best objective of each."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from bench.sweeps import timed_run


def _common(rows: int, epochs: int, cache: Path) -> list[str]:
    return [
        "trainer.progress_bar=false",
        f"trainer.epochs={epochs}",
        "trainer.early_stopping.patience=100",  # the scheduler, not early stopping, cuts trials
        f"dataset.synthetic_rows={rows}",
        f"cache_dir={cache}",
    ]


def _sweep(scheduler: str, sweep_dir: Path, trials: int, common: list[str]) -> dict:
    shutil.rmtree(sweep_dir, ignore_errors=True)
    seconds = timed_run(
        "--multirun",
        "hydra/sweeper=tune",
        f"hydra.sweeper.scheduler={scheduler}",
        f"hydra.sweeper.num_samples={trials}",
        "hydra.sweeper.seed=7",
        "hydra.sweeper.num_cpus=2",
        "trainer.learning_rate=tag(log, interval(0.00001, 0.1))",
        "model.hidden_size=16,64",
        "sweep.objective=val/roc_auc",
        *common,
        f"hydra.sweep.dir={sweep_dir}",
    )
    report = pd.read_csv(sweep_dir / "sweep_report.csv")
    return {
        "seconds": seconds,
        "best_objective": float(report["objective"].max()),
        "pruned": int((report["status"] == "pruned").sum()),
        "epochs_trained": int(report["epochs"].sum()),
    }


def tune_figures(work: Path, smoke: bool = False) -> dict:
    trials, rows, epochs = (2, 2000, 2) if smoke else (8, 200_000, 8)
    cache = work / "caches" / "tune"
    common = _common(rows, epochs, cache)
    timed_run("command=preprocess", *common)  # beforehand: the sweeps compare trials alone
    none = _sweep("none", work / "tune" / "none", trials, common)
    asha = _sweep("asha", work / "tune" / "asha", trials, common)
    return {
        "trials": trials,
        "rows": rows,
        "epochs": epochs,
        "none": none,
        "asha": asha,
        "wall_ratio": asha["seconds"] / none["seconds"],
    }
