"""Drawing helpers the output types' plots share (matplotlib, imported on first use)."""

from __future__ import annotations

import numpy as np


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def confusion_axes(ax, confusion: np.ndarray, labels: list[str], title: str) -> None:
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


def confusion_matrix(spec, stats: dict) -> np.ndarray:
    """Counts, rows: the true class, columns: the predicted one, in spec.labels' order (a
    binary output predicts its positive class above its decision threshold)."""
    if "confusion" in stats:  # a category's
        return np.asarray(stats["confusion"])
    positive = np.asarray(stats["positive_scores"])
    negative = np.asarray(stats["negative_scores"])
    cut = spec.threshold_logit
    return np.array(
        [
            [(negative <= cut).sum(), (negative > cut).sum()],
            [(positive <= cut).sum(), (positive > cut).sum()],
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


def per_class_f1(confusion: np.ndarray) -> np.ndarray:
    tp = np.diag(confusion).astype(np.float64)
    return f1_scores(tp, confusion.sum(axis=0) - tp, confusion.sum(axis=1) - tp)


def f1_scores(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """Per class or member: 2 tp / (2 tp + fp + fn), 0 where it was never true or predicted."""
    denominator = 2 * tp + fp + fn
    return np.divide(2 * tp, denominator, out=np.zeros_like(tp), where=denominator > 0)
