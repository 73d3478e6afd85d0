"""Metrics per output type, in numpy (no per-row Python)."""

from __future__ import annotations

import numpy as np

# Metric names per output type; the first is the "main" metric of curves and summaries.
METRICS = {
    "binary": ("roc_auc", "accuracy", "loss"),
    "category": ("accuracy", "macro_f1", "loss"),
    "set": ("jaccard", "micro_f1", "macro_f1", "loss"),
    "number": ("r2", "mse", "mae", "loss"),
}
LOWER_IS_BETTER = ("loss", "mse", "mae")


def higher_is_better(metric: str) -> bool:
    return metric.split("/")[-1] not in LOWER_IS_BETTER


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    labels = labels.astype(bool)
    return auc_of(scores[labels], scores[~labels])


def auc_of(positive_scores: np.ndarray, negative_scores: np.ndarray) -> float:
    """Mann-Whitney U: for each positive, the negatives scored below it, a tie counting half.
    Searched in the sorted negatives: no rank arrays over all rows (at 1.5M rows those made
    the test split's scoring the peak of the 10M-row streaming bench)."""
    if len(positive_scores) == 0 or len(negative_scores) == 0:
        return float("nan")
    negatives = np.sort(negative_scores)
    below = np.searchsorted(negatives, positive_scores, side="left")
    ties = np.searchsorted(negatives, positive_scores, side="right") - below
    u = float(below.sum()) + 0.5 * float(ties.sum())
    return u / (len(positive_scores) * len(negative_scores))


def macro_f1_of(confusion: np.ndarray) -> float:
    """Macro F1 from a confusion matrix (rows: truth, columns: prediction)."""
    true_positive = np.diag(confusion).astype(np.float64)
    precision_den = confusion.sum(axis=0)
    recall_den = confusion.sum(axis=1)
    f1 = np.where(
        precision_den + recall_den > 0,
        2 * true_positive / np.maximum(precision_den + recall_den, 1),
        0.0,
    )
    # As scikit-learn: over the labels seen in truth or prediction.
    present = (recall_den > 0) | (precision_den > 0)
    return float(f1[present].mean()) if present.any() else 0.0


def macro_f1(labels: np.ndarray, predicted: np.ndarray, classes: int) -> float:
    return macro_f1_of(_confusion(labels, predicted, classes))


def _confusion(labels: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    return np.bincount(labels * classes + predicted, minlength=classes * classes).reshape(
        classes, classes
    )


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


# Metrics are computed from mergeable partial statistics, so that shards scored on different
# workers (Ray actors, horovodrun ranks) give the same numbers as one pass over the table:
# partial() per shard -> merge() -> finish(). Sums and counts merge by addition, the target's
# variance by Chan's formula; ROC AUC needs every score, so its partial keeps the logits of
# the positives and of the negatives (one float32 a row, not the table).


def partial(
    kind: str, logits: np.ndarray, target: np.ndarray, denormalize=None, predicted=None
) -> dict:
    """The statistics of one shard that the metrics of one output need. A number output's
    targets go through `denormalize`, its predictions through `predicted` (raw units, kept in
    the training range; `denormalize` when None)."""
    n = len(target)
    if kind == "binary":
        z = logits.reshape(-1).astype(np.float64)
        y: np.ndarray = target.astype(np.float64)  # the set branch's y holds booleans
        positive = y > 0.5
        scores = logits.reshape(-1)  # float32 from the model: 4 bytes a row
        return {
            "n": n,
            "loss_sum": float(-(y * _log_sigmoid(z) + (1 - y) * _log_sigmoid(-z)).sum()),
            "correct": int(((z > 0) == positive).sum()),
            "positive_scores": scores[positive],
            "negative_scores": scores[~positive],
        }
    if kind == "set":  # per member: true/false positives and false negatives; per row: Jaccard
        z = logits.astype(np.float64)
        y = target > 0.5
        predicted = z > 0
        union = (y | predicted).sum(axis=1)
        jaccard = np.where(union > 0, (y & predicted).sum(axis=1) / np.maximum(union, 1), 1.0)
        return {
            "n": n,
            "loss_sum": float(-(y * _log_sigmoid(z) + (~y) * _log_sigmoid(-z)).mean(axis=1).sum()),
            "jaccard_sum": float(jaccard.sum()),
            "tp": (y & predicted).sum(axis=0),
            "fp": (~y & predicted).sum(axis=0),
            "fn": (y & ~predicted).sum(axis=0),
        }
    if kind == "category":
        z = logits.astype(np.float64)
        z = z - z.max(axis=1, keepdims=True)
        log_probs = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        y = target.astype(np.int64)
        return {
            "n": n,
            "loss_sum": float(-log_probs[np.arange(n), y].sum()),
            "confusion": _confusion(y, z.argmax(axis=1), logits.shape[1]),
        }
    z = logits.reshape(-1).astype(np.float64)
    y = target.astype(np.float64)
    loss_sum = float(np.sum((z - y) ** 2))  # on the normalized scale, as trained
    if denormalize is not None:
        z, y = (predicted or denormalize)(z), denormalize(y)
    error = z - y
    mean = float(y.mean()) if n else 0.0
    return {
        "n": n,
        "loss_sum": loss_sum,
        "squared_error": float(np.sum(error**2)),
        "absolute_error": float(np.sum(np.abs(error))),
        "target_mean": mean,
        "target_m2": float(np.sum((y - mean) ** 2)),
        # (prediction, truth) of evenly spaced rows, in raw units: the evaluation plots
        "pairs": _spread(np.stack([z, y]).astype(np.float32), PAIRS_KEPT),
    }


PAIRS_KEPT = 5000  # (prediction, truth) pairs a number output's statistics keep


def _spread(pairs: np.ndarray, most: int) -> np.ndarray:
    """At most `most` columns of a [2, rows] array, evenly spaced (all when fewer)."""
    if pairs.shape[1] <= most:
        return pairs
    return pairs[:, np.linspace(0, pairs.shape[1] - 1, most).astype(np.int64)]


def merge(kind: str, parts: list[dict]) -> dict:
    """Partial statistics of several shards as those of their union."""
    parts = [p for p in parts if p["n"]] or parts[:1]
    if len(parts) == 1:
        return parts[0]
    n = sum(p["n"] for p in parts)
    merged = {"n": n, "loss_sum": sum(p["loss_sum"] for p in parts)}
    if kind == "binary":
        merged["correct"] = sum(p["correct"] for p in parts)
        for key in ("positive_scores", "negative_scores"):
            merged[key] = np.concatenate([p[key] for p in parts])
    elif kind == "category":
        merged["confusion"] = sum(p["confusion"] for p in parts)
    elif kind == "set":
        for key in ("jaccard_sum", "tp", "fp", "fn"):
            merged[key] = sum(p[key] for p in parts)
    else:
        for key in ("squared_error", "absolute_error"):
            merged[key] = sum(p[key] for p in parts)
        mean = sum(p["n"] * p["target_mean"] for p in parts) / n
        merged["target_mean"] = mean
        merged["target_m2"] = sum(
            p["target_m2"] + p["n"] * (p["target_mean"] - mean) ** 2 for p in parts
        )
        if all("pairs" in p for p in parts):
            merged["pairs"] = _spread(
                np.concatenate([p["pairs"] for p in parts], axis=1), PAIRS_KEPT
            )
    return merged


def finish(kind: str, stats: dict) -> dict[str, float]:
    """The metrics of one output from its (merged) partial statistics."""
    n = stats["n"]
    if n == 0:
        return {}
    loss = stats["loss_sum"] / n
    if kind == "binary":
        return {
            "roc_auc": auc_of(stats["positive_scores"], stats["negative_scores"]),
            "accuracy": stats["correct"] / n,
            "loss": loss,
        }
    if kind == "set":
        tp, fp, fn = (np.asarray(stats[k], dtype=np.float64) for k in ("tp", "fp", "fn"))
        micro = 2 * tp.sum() / max(2 * tp.sum() + fp.sum() + fn.sum(), 1.0)
        seen = (tp + fp + fn) > 0  # members neither present nor predicted do not count
        per_member = 2 * tp[seen] / (2 * tp[seen] + fp[seen] + fn[seen])
        return {
            "jaccard": stats["jaccard_sum"] / n,
            "micro_f1": float(micro),
            "macro_f1": float(per_member.mean()) if seen.any() else 1.0,
            "loss": loss,
        }
    if kind == "category":
        confusion = stats["confusion"]
        return {
            "accuracy": float(np.trace(confusion)) / n,
            "macro_f1": macro_f1_of(confusion),
            "loss": loss,
        }
    variance = stats["target_m2"] / n
    mse = stats["squared_error"] / n
    return {
        "r2": 1.0 - mse / variance if variance > 0 else float("nan"),
        "mse": mse,
        "mae": stats["absolute_error"] / n,
        "loss": loss,
    }


def output_metrics(
    kind: str, logits: np.ndarray, target: np.ndarray, denormalize=None, predicted=None
) -> dict[str, float]:
    """Metrics of one output from raw logits and processed targets."""
    return finish(kind, partial(kind, logits, target, denormalize, predicted))
