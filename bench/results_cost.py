"""What a run's results cost: the default experiment (10,000 synthetic rows, backend=local)
bare (TensorBoard and metrics.json only: no plots, no importance), as it is by default
(evaluation plots, permutation importance, report.html), and with logger=mlflow besides
(the embedded SQLite store, params, every epoch's metrics, artifacts and the pyfunc model).
The three run interleaved, `repeats` rounds after one warm-up that builds the cache. Each
layer's cost is the median over rounds of its wall over the layer below's in the same round
(a paired ratio: a slow minute of the shared machine hits both); the walls shown are the
medians, and the best of each is kept beside them."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

VARIANTS = {
    "bare": ["report.plots=false", "report.importance_rows=0"],
    "default": [],
    "mlflow": ["logger=mlflow"],
}


def results_figures(work: Path, measure, smoke: bool = False) -> dict:
    rows, repeats = (2000, 1) if smoke else (10000, 9)
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
    walls: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for repeat in range(repeats):
        for name, overrides in VARIANTS.items():
            run = measure(
                [*base, *overrides, f"hydra.run.dir={root / f'{name}-{repeat}'}"], memory=False
            )
            walls[name].append(run["wall_seconds"])
    figures: dict = {"rows": rows, "repeats": repeats}
    for name, seconds in walls.items():
        figures[f"{name}_wall_seconds"] = statistics.median(seconds)
        figures[f"{name}_best_wall_seconds"] = min(seconds)
    for layer, below in (("default", "bare"), ("mlflow", "default")):
        paired = [a / b for a, b in zip(walls[layer], walls[below], strict=True)]
        figures[f"{layer}_ratio"] = statistics.median(paired)
    return figures
