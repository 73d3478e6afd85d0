"""Sweep figure: wall time of N trials on the Ray launcher against the serial basic launcher."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.ray_head import warm_ray

ROOT = Path(__file__).resolve().parents[1]


def timed_run(*args: str) -> float:
    """Seconds of `python run.py <args>` on a local Ray of its own, as a user runs it."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "RAY_ADDRESS": ""},
    )
    return time.perf_counter() - started


def _sweep(launcher: list[str], sweep_dir: Path, cache: Path, rows: int, epochs: int) -> float:
    shutil.rmtree(sweep_dir, ignore_errors=True)
    return timed_run(
        "--multirun",
        *launcher,
        "trainer.progress_bar=false",
        "model.family=network",  # what auto trains at the full run's 100,000 rows
        f"trainer.epochs={epochs}",
        "trainer.early_stopping.patience=0",
        f"dataset.synthetic_rows={rows}",
        "trainer.learning_rate=0.001,0.003,0.01",
        f"cache_dir={cache}",
        f"hydra.sweep.dir={sweep_dir}",
    )


def sweep_figures(work: Path, smoke: bool = False) -> dict:
    rows, epochs = (2000, 1) if smoke else (100_000, 3)
    # Both sweeps start from a warm cache, so the figure compares trial execution alone.
    cache = work / "caches" / "sweeps"
    basic = _sweep(
        ["backend=local", "trainer.num_threads=1"], work / "sweeps" / "basic", cache, rows, epochs
    )
    on_ray = ["hydra/launcher=ray", "trainer.num_threads=1", "sweep.max_concurrent=2"]
    ray = _sweep(
        [*on_ray, "hydra.launcher.ray.init.num_cpus=2"],
        work / "sweeps" / "ray",
        cache,
        rows,
        epochs,
    )
    figures = {
        "trials": 3,
        "rows": rows,
        "epochs": epochs,
        "basic_seconds": basic,
        "ray_seconds": ray,
        "speedup": basic / ray,
    }
    with warm_ray() as address:  # the same sweep attached to a `ray start` Ray
        attach = [*on_ray, f"hydra.launcher.ray.init.address={address}"]
        figures["ray_attached_seconds"] = _sweep(
            attach, work / "sweeps" / "ray-attached", cache, rows, epochs
        )
        if not smoke:  # each trial in a fresh worker that imports everything (the old default)
            figures["ray_attached_fresh_seconds"] = _sweep(
                [*attach, "hydra.launcher.ray.remote.max_calls=1"],
                work / "sweeps" / "ray-attached-fresh",
                cache,
                rows,
                epochs,
            )
    return figures
