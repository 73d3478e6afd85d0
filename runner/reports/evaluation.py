"""Evaluation plots of one scored split, drawn from the merged statistics its metrics came
from (runner/scoring/metrics.py), so every scoring path (this process, horovodrun ranks,
Ray's actor pool) draws the same pictures as it computes the same metrics:

    binary    confusion matrix, ROC and precision-recall curves, calibration curve
    category  confusion matrix (row-normalized), per-class F1
    set       per-member F1
    number    predicted vs true, residuals (on up to PAIRS_KEPT evenly spaced rows)
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from runner.model.layout import Layout, OutputSpec


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
        draw = {"binary": _binary, "category": _category, "set": _set, "number": _number}[spec.type]
        fig = draw(spec, stats, split)
        if fig is not None:
            path = out_dir / f"{split}_{_safe(spec.name)}.png"
            save_figure(fig, path)
            paths.append(path)
    return paths


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _confusion_axes(ax, confusion: np.ndarray, labels: list[str], title: str) -> None:
    rows = confusion.sum(axis=1, keepdims=True)
    share = np.divide(confusion, rows, out=np.zeros(confusion.shape), where=rows > 0)
    ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
    shown = len(labels) <= 20  # tick labels and counts stay legible
    if shown:
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        for i in range(len(labels)):
            for j in range(len(labels)):
                color = "white" if share[i, j] > 0.5 else "black"
                ax.text(
                    j,
                    i,
                    f"{int(confusion[i, j])}",
                    ha="center",
                    va="center",
                    color=color,
                    fontsize=7,
                )
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title)


def confusion_matrix(spec: OutputSpec, stats: dict) -> np.ndarray:
    """Counts, rows: the true class, columns: the predicted one, in spec.labels' order (a
    binary output predicts its positive class above probability 0.5, i.e. logit 0)."""
    if spec.type == "category":
        return np.asarray(stats["confusion"])
    positive = np.asarray(stats["positive_scores"])
    negative = np.asarray(stats["negative_scores"])
    return np.array(
        [
            [(negative <= 0).sum(), (negative > 0).sum()],
            [(positive <= 0).sum(), (positive > 0).sum()],
        ]
    )


def binary_curves(stats: dict) -> dict[str, np.ndarray]:
    """ROC, precision-recall and calibration points from the positive and negative scores
    (numpy: scikit-learn's import alone would cost a second of every run)."""
    positive = np.asarray(stats["positive_scores"], dtype=np.float64)
    negative = np.asarray(stats["negative_scores"], dtype=np.float64)
    y = np.concatenate([np.ones(len(positive)), np.zeros(len(negative))])
    p = 1.0 / (1.0 + np.exp(-np.concatenate([positive, negative])))
    order = np.argsort(-p, kind="stable")
    p_sorted, y_sorted = p[order], y[order]
    # one point per distinct threshold: the last row of each run of equal scores
    last = np.r_[np.flatnonzero(np.diff(p_sorted)), len(p_sorted) - 1]
    tps = np.cumsum(y_sorted)[last]
    fps = (last + 1) - tps
    tpr = np.r_[0.0, tps / max(len(positive), 1)]
    fpr = np.r_[0.0, fps / max(len(negative), 1)]
    precision = np.r_[1.0, tps / (tps + fps)]
    recall = np.r_[0.0, tps / max(len(positive), 1)]
    edges = np.quantile(p, np.linspace(0.0, 1.0, 11))
    bins = np.searchsorted(edges[1:-1], p, side="right")
    counts = np.bincount(bins, minlength=10)
    seen = counts > 0
    mean_predicted = np.bincount(bins, weights=p, minlength=10)[seen] / counts[seen]
    true_share = np.bincount(bins, weights=y, minlength=10)[seen] / counts[seen]
    return {
        "fpr": fpr,
        "tpr": tpr,
        "precision": precision,
        "recall": recall,
        "calibration_true": true_share,
        "calibration_predicted": mean_predicted,
        "prevalence": np.array([y.mean()]),
    }


def _binary(spec: OutputSpec, stats: dict, split: str):
    positive = np.asarray(stats["positive_scores"])
    negative = np.asarray(stats["negative_scores"])
    if not len(positive) or not len(negative):
        return None  # one class only: no curve to draw
    plt = pyplot()
    curves = binary_curves(stats)
    fig, axes = plt.subplots(1, 4, figsize=(17, 4))
    confusion = confusion_matrix(spec, stats)
    _confusion_axes(axes[0], confusion, [str(x) for x in spec.labels], f"{spec.name}: confusion")
    axes[1].plot(curves["fpr"], curves["tpr"])
    axes[1].plot([0, 1], [0, 1], "--", color="grey", linewidth=0.8)
    axes[1].set(xlabel="false positive rate", ylabel="true positive rate", title="ROC")
    axes[2].plot(curves["recall"], curves["precision"])
    axes[2].axhline(curves["prevalence"][0], linestyle="--", color="grey", linewidth=0.8)
    axes[2].set(xlabel="recall", ylabel="precision", title="precision-recall")
    axes[3].plot(curves["calibration_predicted"], curves["calibration_true"], "-o", markersize=3)
    axes[3].plot([0, 1], [0, 1], "--", color="grey", linewidth=0.8)
    axes[3].set(xlabel="mean predicted probability", ylabel="share positive", title="calibration")
    fig.suptitle(f"{split}: {spec.name}")
    fig.tight_layout()
    return fig


def per_class_f1(confusion: np.ndarray) -> np.ndarray:
    tp = np.diag(confusion).astype(np.float64)
    denominator = confusion.sum(axis=0) + confusion.sum(axis=1)
    return np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)


def _category(spec: OutputSpec, stats: dict, split: str):
    plt = pyplot()
    confusion = confusion_matrix(spec, stats)
    labels = [str(x) for x in spec.labels]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    _confusion_axes(axes[0], confusion, labels, f"{spec.name}: confusion (row share)")
    f1 = per_class_f1(confusion)
    axes[1].barh(range(len(labels)), f1)
    axes[1].set_yticks(range(len(labels)), labels if len(labels) <= 40 else [""] * len(labels))
    axes[1].invert_yaxis()
    axes[1].set(xlabel="F1", xlim=(0, 1), title="per-class F1")
    fig.suptitle(f"{split}: {spec.name}")
    fig.tight_layout()
    return fig


def _set(spec: OutputSpec, stats: dict, split: str):
    plt = pyplot()
    tp, fp, fn = (np.asarray(stats[k], dtype=np.float64) for k in ("tp", "fp", "fn"))
    denominator = 2 * tp + fp + fn
    f1 = np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)
    labels = [str(x) for x in spec.labels]
    fig, ax = plt.subplots(figsize=(6, max(3, 0.25 * len(labels))))
    ax.barh(range(len(labels)), f1)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set(xlabel="F1", xlim=(0, 1), title=f"{split}: {spec.name}, per-member F1")
    fig.tight_layout()
    return fig


def _number(spec: OutputSpec, stats: dict, split: str):
    if "pairs" not in stats:
        return None
    plt = pyplot()
    predicted, true = np.asarray(stats["pairs"], dtype=np.float64)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    axes[0].scatter(true, predicted, s=4, alpha=0.4)
    low, high = float(min(true.min(), predicted.min())), float(max(true.max(), predicted.max()))
    axes[0].plot([low, high], [low, high], "--", color="grey", linewidth=0.8)
    axes[0].set(xlabel="true", ylabel="predicted", title=f"{spec.name}: predicted vs true")
    axes[1].scatter(predicted, true - predicted, s=4, alpha=0.4)
    axes[1].axhline(0, linestyle="--", color="grey", linewidth=0.8)
    axes[1].set(xlabel="predicted", ylabel="true - predicted", title="residuals")
    fig.suptitle(f"{split}: {spec.name} ({len(true)} rows shown)")
    fig.tight_layout()
    return fig
