"""A binary output's decision threshold (model.decision_threshold): the probability above which
it predicts the positive class. `auto` picks the threshold of the best F1 on the validation
split where the positive class is rare (the AUC can be high while 0.5 predicts it almost
never), and keeps 0.5 otherwise; the pick is saved in the model's meta.json, so predict,
serve, the test metrics and export.json apply the same one."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from runner.config import ModelConfig
from runner.model.layout import Layout
from runner.processing.features.model_side.base import sigmoid

# The picked threshold stays inside this margin from 0 and 1.
EDGE = 1e-6
# A binary output's metrics that change with its threshold (the rest: AUC, loss, do not).
THRESHOLD_METRICS = ("accuracy", "f1", "precision", "recall")


def best_f1_threshold(probability: np.ndarray, target: np.ndarray) -> tuple[float, float]:
    """(threshold, F1 there): the positive class's best F1 over every cut between two distinct
    probabilities (a row is positive above the threshold, which lies midway between the
    lowest probability called positive and the next one down)."""
    order = np.argsort(-probability, kind="stable")
    p, y = probability[order], target[order] > 0.5
    hits, alarms = np.cumsum(y), np.cumsum(~y)
    f1 = 2 * hits / (hits + alarms + y.sum())
    cut_after = np.r_[p[1:] != p[:-1], True]  # ties are called together
    best = int(np.argmax(np.where(cut_after, f1, -1.0)))
    below = p[best + 1] if best + 1 < len(p) else 0.0
    threshold = float(np.clip((p[best] + below) / 2, EDGE, 1 - EDGE))
    return threshold, float(f1[best])


def decide(
    layout: Layout,
    model: ModelConfig,
    meta: dict,
    validation: Callable[[], tuple[dict, dict]],
) -> dict[str, dict]:
    """{output: {"threshold": t, "why": ...}} for each binary output; `validation()` gives the
    validation split's (logits, targets) by output, asked only where a threshold is picked
    there."""
    decisions: dict[str, dict] = {}
    for spec in _binary(layout):
        picked, share = _picked(spec, model, meta)
        if picked != "validation":
            why = (
                "model.decision_threshold"
                if model.decision_threshold != "auto"
                else f"the positive class is {share:.1%} of the training rows, not rare"
            )
            decisions[spec.name] = {"threshold": float(picked), "why": why}
            continue
        logits, targets = validation()
        target = targets[spec.name].reshape(-1)
        if not len(target) or target.min() == target.max():
            decisions[spec.name] = {"threshold": 0.5, "why": "one class in the validation split"}
            continue
        probability = sigmoid(logits[spec.name].reshape(-1).astype(np.float64))
        threshold, f1 = best_f1_threshold(probability, target)
        decisions[spec.name] = {
            "threshold": threshold,
            "why": (
                f"the best F1 ({f1:.4f}) on the validation split: the positive class is "
                f"{share:.1%} of the training rows"
            ),
        }
    return decisions


def _binary(layout: Layout):
    return [spec for spec in layout.outputs if spec.type == "binary"]


def _picked(spec, model: ModelConfig, meta: dict) -> tuple[float | str, float]:
    shares = spec.head.class_shares(meta["features"][spec.name]["stats"])
    share = shares[1] if shares else 0.5
    return model.threshold_of(share), share
