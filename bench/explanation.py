"""command=explain's pace beside command=predict's: the same model and table (the synthetic
table's CSV), in one process, for the network (integrated gradients at explain.steps=64) and
the trees (TreeSHAP). Each figure is the rows/s of the scoring step (read, transform, score or
explain, write), from the run's own log line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = {"network": ["model.family=network"], "gbm": ["model.family=gbm"]}


def _run(work: Path, name: str, *overrides: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            "backend=local",
            "trainer.progress_bar=false",
            f"cache_dir={work / 'caches' / 'explanation'}",
            f"hydra.run.dir={work / 'explanation' / name}",
            *overrides,
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout + done.stderr


def _rows_per_second(log: str) -> float:
    found = re.search(r"scored (\d+) rows in ([\d.]+)s", log)
    assert found, log[-2000:]
    return int(found[1]) / max(float(found[2]), 1e-9)


def explanation_figures(work: Path, csv: Path, train_rows: int) -> dict:
    """{family: {predict_rows_per_second, explain_rows_per_second, explain_over_predict}}."""
    figures = {}
    for family, extra in FAMILIES.items():
        _run(
            work,
            f"train-{family}",
            "command=train",
            f"dataset.synthetic_rows={train_rows}",
            "trainer.epochs=1",
            *extra,
        )
        model = f"model_dir={work / 'explanation' / f'train-{family}' / 'model'}"
        data = f"dataset.path={csv}"
        predict = _rows_per_second(_run(work, f"predict-{family}", "command=predict", model, data))
        explain = _rows_per_second(_run(work, f"explain-{family}", "command=explain", model, data))
        figures[family] = {
            "predict_rows_per_second": predict,
            "explain_rows_per_second": explain,
            "explain_over_predict": explain / predict,
        }
    return figures
