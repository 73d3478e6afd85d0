"""What a run's results cost: the default experiment (10,000 synthetic rows, backend=local)
bare (TensorBoard and metrics.json only: no plots, no importance), as it is by default
(evaluation plots, permutation importance, report.html), and with logger=mlflow besides
(the embedded SQLite store, params, every epoch's metrics, artifacts and the pyfunc model).
The three run interleaved, `repeats` times each after one warm-up that builds the cache; the
best wall of each counts (shared, noisy machines)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

VARIANTS = {
    "bare": ["report.plots=false", "report.importance_rows=0"],
    "default": [],
    "mlflow": ["logger=mlflow"],
}


def results_figures(work: Path, measure, smoke: bool = False) -> dict:
    rows, repeats = (2000, 1) if smoke else (10000, 5)
    base = [
        sys.executable,
        str(ROOT / "run.py"),
        "backend=local",
        f"dataset.synthetic_rows={rows}",
        "trainer.progress_bar=false",
        # One network, as before the ensemble became the default on small tables: its longer
        # training would make the results' fixed cost look smaller than it is.
        "model.ensemble_size=1",
        f"cache_dir={work / 'caches' / 'results'}",
    ]
    root = work / "results" / "outputs"  # the MLflow store goes to <outputs>/mlflow.db
    measure([*base, f"hydra.run.dir={root / 'warm-up'}"])
    best: dict[str, float] = {}
    for repeat in range(repeats):
        for name, overrides in VARIANTS.items():
            run = measure([*base, *overrides, f"hydra.run.dir={root / f'{name}-{repeat}'}"])
            best[name] = min(best.get(name, float("inf")), run["wall_seconds"])
    return {
        "rows": rows,
        "repeats": repeats,
        **{f"{name}_wall_seconds": seconds for name, seconds in best.items()},
    }
