"""Metrics per output type, in numpy (no per-row Python)."""

from __future__ import annotations

import numpy as np

# Metric names per output type; the first is the "main" metric of curves and summaries.
METRICS = {
    "binary": ("roc_auc", "accuracy", "loss"),
    "category": ("accuracy", "macro_f1", "loss"),
    "number": ("r2", "mse", "mae", "loss"),
}
LOWER_IS_BETTER = ("loss", "mse", "mae")


def higher_is_better(metric: str) -> bool:
    return metric.split("/")[-1] not in LOWER_IS_BETTER


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Mann-Whitney U with average ranks for ties."""
    labels = labels.astype(bool)
    positives = int(labels.sum())
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    ranks = np.empty(len(scores), dtype=np.float64)
    # Average rank within each run of equal scores.
    boundaries = np.flatnonzero(np.diff(sorted_scores)) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(scores)]])
    average = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(average, ends - starts)
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def macro_f1(labels: np.ndarray, predicted: np.ndarray, classes: int) -> float:
    confusion = np.bincount(labels * classes + predicted, minlength=classes * classes).reshape(
        classes, classes
    )
    true_positive = np.diag(confusion).astype(np.float64)
    precision_den = confusion.sum(axis=0)
    recall_den = confusion.sum(axis=1)
    f1 = np.where(
        precision_den + recall_den > 0,
        2 * true_positive / np.maximum(precision_den + recall_den, 1),
        0.0,
    )
    present = (recall_den > 0) | (
        precision_den > 0
    )  # as scikit-learn: labels seen in truth or prediction
    return float(f1[present].mean()) if present.any() else 0.0


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def output_metrics(
    kind: str, logits: np.ndarray, target: np.ndarray, denormalize=None
) -> dict[str, float]:
    """Metrics of one output from raw logits and processed targets."""
    if len(target) == 0:
        return {}
    if kind == "binary":
        z = logits.reshape(-1).astype(np.float64)
        y = target.astype(np.float64)
        loss = -(y * _log_sigmoid(z) + (1 - y) * _log_sigmoid(-z)).mean()
        return {
            "roc_auc": roc_auc(y > 0.5, z),
            "accuracy": float(((z > 0) == (y > 0.5)).mean()),
            "loss": float(loss),
        }
    if kind == "category":
        z = logits.astype(np.float64)
        z = z - z.max(axis=1, keepdims=True)
        log_probs = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        y = target.astype(np.int64)
        predicted = z.argmax(axis=1)
        return {
            "accuracy": float((predicted == y).mean()),
            "macro_f1": macro_f1(y, predicted, logits.shape[1]),
            "loss": float(-log_probs[np.arange(len(y)), y].mean()),
        }
    z = logits.reshape(-1).astype(np.float64)
    y = target.astype(np.float64)
    loss = float(np.mean((z - y) ** 2))  # on the normalized scale, as trained
    if denormalize is not None:
        z, y = denormalize(z), denormalize(y)
    error = z - y
    variance = float(np.var(y))
    return {
        "r2": 1.0 - float(np.mean(error**2)) / variance if variance > 0 else float("nan"),
        "mse": float(np.mean(error**2)),
        "mae": float(np.mean(np.abs(error))),
        "loss": loss,
    }
