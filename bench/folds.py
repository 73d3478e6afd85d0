"""k_fold's cost: `python run.py k_fold=5` against one experiment on the same table and cache
directory (the synthetic table's CSV, one process), interleaved twice, the best wall of each.
Each fold preprocesses its own training rows, trains and scores the test split."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDS = 5


def _wall(work: Path, name: str, csv: Path, *overrides: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            "backend=local",
            "trainer.progress_bar=false",
            f"dataset.path={csv}",
            "dataset.target=label",
            f"cache_dir={work / 'caches' / 'folds' / name}",
            f"hydra.run.dir={work / 'folds' / name}",
            *overrides,
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def folds_figures(work: Path, csv: Path, rounds: int = 2) -> dict:
    """{one_run_seconds, k_fold_seconds, folds, k_fold_over_one_run}; fresh caches each round."""
    one, many = [], []
    for round_ in range(rounds):
        one.append(_wall(work, f"one-{round_}", csv))
        many.append(_wall(work, f"k{FOLDS}-{round_}", csv, f"k_fold={FOLDS}"))
    return {
        "folds": FOLDS,
        "one_run_seconds": min(one),
        "k_fold_seconds": min(many),
        "k_fold_over_one_run": min(many) / min(one),
    }
