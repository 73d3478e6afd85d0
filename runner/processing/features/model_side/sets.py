"""A set feature: as an input its members' token ids; as an output (multi-label) one
independent yes/no logit per member of the vocabulary."""

from __future__ import annotations

import numpy as np

from runner.processing.columns import FIRST_TOKEN_ID
from runner.processing.features.model_side.base import (
    InputColumns,
    ModelSide,
    log_sigmoid,
    logit_of_mean_probability,
    sigmoid,
)
from runner.processing.features.model_side.plots import f1_scores, pyplot


class SetSide(ModelSide):
    type_name = "set"
    output = True
    metrics = ("jaccard", "micro_f1", "macro_f1", "loss")
    drops_missing_rows = False  # a missing value is the empty set
    multi_hot = True

    def input_columns(self, name: str, stats: dict) -> InputColumns:
        """Its members as token ids: 0 (padding) and 1 (unseen) before the vocabulary."""
        return InputColumns(token_ids=len(stats["vocab"]) + FIRST_TOKEN_ID)

    def size(self, stats: dict) -> int:
        return len(stats["vocab"])

    def labels(self, stats: dict) -> list:
        return list(stats["vocab"])

    def empty_target(self, spec) -> np.ndarray:
        return np.zeros((0, spec.size), np.float32)

    def loss(self, logits, target, weights=None):  # no classes to weigh
        import torch

        return torch.nn.functional.binary_cross_entropy_with_logits(logits, target)

    def mean_of_members(self, logits):
        return logit_of_mean_probability(logits)

    def partial(self, logits, target, denormalize=None, predicted=None) -> dict:
        """Per member: true/false positives and false negatives; per row: Jaccard."""
        z = logits.astype(np.float64)
        y = target > 0.5
        chosen = z > 0
        union = (y | chosen).sum(axis=1)
        jaccard = np.where(union > 0, (y & chosen).sum(axis=1) / np.maximum(union, 1), 1.0)
        return {
            "n": len(target),
            "loss_sum": float(-(y * log_sigmoid(z) + (~y) * log_sigmoid(-z)).mean(axis=1).sum()),
            "jaccard_sum": float(jaccard.sum()),
            "tp": (y & chosen).sum(axis=0),
            "fp": (~y & chosen).sum(axis=0),
            "fn": (y & ~chosen).sum(axis=0),
        }

    def merge(self, parts, merged) -> None:
        for key in ("jaccard_sum", "tp", "fp", "fn"):
            merged[key] = sum(p[key] for p in parts)

    def finish(self, stats) -> dict[str, float]:
        n = stats["n"]
        tp, fp, fn = (np.asarray(stats[k], dtype=np.float64) for k in ("tp", "fp", "fn"))
        micro = 2 * tp.sum() / max(2 * tp.sum() + fp.sum() + fn.sum(), 1.0)
        seen = (tp + fp + fn) > 0  # members neither present nor predicted do not count
        per_member = 2 * tp[seen] / (2 * tp[seen] + fp[seen] + fn[seen])
        return {
            "jaccard": stats["jaccard_sum"] / n,
            "micro_f1": float(micro),
            "macro_f1": float(per_member.mean()) if seen.any() else 1.0,
            "loss": stats["loss_sum"] / n,
        }

    def plot(self, spec, stats: dict, split: str):
        plt = pyplot()
        tp, fp, fn = (np.asarray(stats[k], dtype=np.float64) for k in ("tp", "fp", "fn"))
        f1 = f1_scores(tp, fp, fn)
        labels = [str(x) for x in spec.labels]
        fig, ax = plt.subplots(figsize=(6, max(3, 0.25 * len(labels))))
        ax.barh(range(len(labels)), f1)
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        ax.set(xlabel="F1", xlim=(0, 1), title=f"{split}: {spec.name}, per-member F1")
        fig.tight_layout()
        return fig

    def prediction_columns(self, spec, decoders, logits, target) -> dict:
        labels = np.asarray(spec.labels, dtype=object)
        probabilities = sigmoid(logits.astype(np.float64))
        delimiter = str(decoders.options[spec.name]["delimiter"])
        columns = {f"{spec.name}_prediction": _joined(probabilities > 0.5, labels, delimiter)}
        for i, label in enumerate(spec.labels):
            columns[f"{spec.name}_probability_{label}"] = probabilities[:, i]
        if target is not None:
            columns[spec.name] = _joined(target > 0.5, labels, delimiter)
        return columns


def _joined(members: np.ndarray, labels: np.ndarray, delimiter: str) -> np.ndarray:
    """[rows, labels] booleans -> 'a|b' per row (in vocabulary order; '' for none)."""
    return np.array([delimiter.join(labels[row]) for row in members], dtype=object)
