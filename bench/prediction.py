"""Batch prediction figures: `python run.py command=predict` on a CSV of 1M and 10M rows, in
one process (backend=local) and on a local Ray with Dask and 2 scoring actors: rows/s of the
scoring step (read, transform, score, write) and the driver's peak memory, which should stay
flat on Ray while the data grows 10x."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _train(work: Path) -> Path:
    run_dir = work / "prediction" / "train"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            "command=train",
            "backend=local",
            "dataset.synthetic_rows=20000",
            "trainer.epochs=1",
            "trainer.progress_bar=false",
            f"cache_dir={work / 'caches' / 'prediction'}",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return run_dir / "model"


PATHS = {
    "local": ["backend=local"],
    "ray, dask, 2 actors": [
        "backend=ray",
        "backend.num_cpus=2",
        "processor=dask",
        "trainer.num_workers=2",
    ],
}


def prediction_figures(work: Path, data: dict[str, Path], measure) -> dict:
    """{"<path>, <size>": figures} for every path and table in `data` ({size label: csv})."""
    model_dir = _train(work)
    figures = {}
    for size, csv in data.items():
        for name, overrides in PATHS.items():
            run_dir = work / "prediction" / f"{name.split(',')[0]}-{size}"
            result = measure(
                [
                    sys.executable,
                    str(ROOT / "run.py"),
                    "command=predict",
                    f"model_dir={model_dir}",
                    f"dataset.path={csv}",
                    *overrides,
                    f"hydra.run.dir={run_dir}",
                ],
                env={"RAY_ADDRESS": ""},
            )
            text = result["stdout"] + result["stderr"]
            match = re.search(r"scored (\d+) rows in ([\d.]+)s", text)
            rows, seconds = int(match.group(1)), float(match.group(2))
            figures[f"{name}, {size}"] = {
                "rows": rows,
                "scoring_seconds": seconds,
                "rows_per_second": rows / seconds,
                "wall_seconds": result["wall_seconds"],
                "driver_peak_memory_mb": result["driver_peak_memory_mb"],
                "peak_memory_mb": result["peak_memory_mb"],
            }
    return figures
