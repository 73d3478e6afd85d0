"""Evaluation plots of one scored split, drawn from the merged statistics its metrics came
from (runner/scoring/metrics.py), so every scoring path (this process, horovodrun ranks,
Ray's actor pool) draws the same pictures as it computes the same metrics. Each output type
draws its own (its model side's `plot`); learning curves are drawn here."""

from __future__ import annotations

import math
import os
from pathlib import Path

from runner.model.layout import Layout
from runner.processing.features.model_side.plots import (
    binary_curves,
    confusion_matrix,
    per_class_f1,
    pyplot,
)

__all__ = ["binary_curves", "confusion_matrix", "per_class_f1", "plot_outputs", "save_figure"]


def save_figure(fig, path: Path, dpi: int = 90) -> None:
    """Written under a temporary name and renamed: a plot is whole or absent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("tmp-" + path.name)
    fig.savefig(tmp, dpi=dpi)
    pyplot().close(fig)
    os.replace(tmp, path)


def plot_learning_curves(history: list[dict], metric: str, path: Path) -> None:
    """Loss and the main metric per epoch, train and validation."""
    plt = pyplot()
    epochs = [h["epoch"] for h in history]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, name in zip(axes, ("loss", metric), strict=True):
        for split, style in (("train", "-o"), ("validation", "-s")):
            values = [h[split].get(name, math.nan) for h in history]
            if any(not math.isnan(v) for v in values):
                ax.plot(epochs, values, style, label=split, markersize=3)
        ax.set_xlabel("epoch")
        ax.set_title(name)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


def plot_outputs(layout: Layout, merged: dict[str, dict], split: str, out_dir: Path) -> list[Path]:
    """One PNG per output of the split: <out_dir>/<split>_<output>.png."""
    paths = []
    for spec in layout.outputs:
        stats = merged.get(spec.name)
        if not stats or not stats.get("n"):
            continue
        fig = spec.head.plot(spec, stats, split)
        if fig is not None:
            path = out_dir / f"{split}_{_safe(spec.name)}.png"
            save_figure(fig, path)
            paths.append(path)
    return paths


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
