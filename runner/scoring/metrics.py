"""Metrics per output, from mergeable partial statistics, so that shards scored on different
workers (Ray actors, horovodrun ranks) give the same numbers as one pass over the table:
partial() per shard -> merge() -> finish(). Each output type's statistics are its head's
(runner.processing.features.model_side); numpy only, no per-row Python."""

from __future__ import annotations

import numpy as np

from runner.processing.features.model_side import model_side
from runner.processing.features.model_side.base import auc_of, confusion, macro_f1_of

LOWER_IS_BETTER = ("loss", "mse", "mae")


def higher_is_better(metric: str) -> bool:
    return metric.split("/")[-1] not in LOWER_IS_BETTER


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    labels = labels.astype(bool)
    return auc_of(scores[labels], scores[~labels])


def macro_f1(labels: np.ndarray, predicted: np.ndarray, classes: int) -> float:
    return macro_f1_of(confusion(labels, predicted, classes))


def partial(
    kind: str, logits: np.ndarray, target: np.ndarray, denormalize=None, predicted=None
) -> dict:
    """The statistics of one shard that the metrics of one output need."""
    return model_side(kind).partial(logits, target, denormalize, predicted)


def merge(kind: str, parts: list[dict]) -> dict:
    """Partial statistics of several shards as those of their union."""
    parts = [p for p in parts if p["n"]] or parts[:1]
    if len(parts) == 1:
        return parts[0]
    merged = {"n": sum(p["n"] for p in parts), "loss_sum": sum(p["loss_sum"] for p in parts)}
    model_side(kind).merge(parts, merged)
    return merged


def finish(kind: str, stats: dict) -> dict[str, float]:
    """The metrics of one output from its (merged) partial statistics."""
    return model_side(kind).finish(stats) if stats["n"] else {}


def output_metrics(
    kind: str, logits: np.ndarray, target: np.ndarray, denormalize=None, predicted=None
) -> dict[str, float]:
    """Metrics of one output from raw logits and processed targets."""
    return finish(kind, partial(kind, logits, target, denormalize, predicted))
