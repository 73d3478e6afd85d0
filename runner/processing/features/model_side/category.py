"""A category feature: as an input one column of codes in the category matrix; as an output one
logit per class of the training split's frequency-ranked vocabulary."""

from __future__ import annotations

import math

import numpy as np

from runner.processing.features.model_side.base import (
    EPS,
    InputColumns,
    ModelSide,
    confusion,
    macro_f1_of,
    softmax,
    typed_labels,
)
from runner.processing.features.model_side.plots import (
    confusion_axes,
    confusion_matrix,
    per_class_f1,
    pyplot,
)


class CategorySide(ModelSide):
    type_name = "category"
    metrics = ("accuracy", "macro_f1", "loss")
    output = True
    trees = True
    drops_unseen_classes = True

    def input_columns(self, name: str, stats: dict) -> InputColumns:
        return InputColumns(category_ids=len(stats["vocab"]) + 1)  # 0: unseen

    def size(self, stats: dict) -> int:
        return len(stats["vocab"])

    def labels(self, stats: dict) -> list:
        return list(stats["vocab"])

    def target_dtype(self, exact: bool):
        return np.int64

    def class_shares(self, stats: dict) -> list[float] | None:
        counts = stats.get("counts")  # kept since PREPROCESSING_VERSION 6 (outputs)
        if not counts:
            return None
        total = sum(counts)
        return [c / total for c in counts]

    def loss(self, logits, target, weights=None):
        import torch

        return torch.nn.functional.cross_entropy(logits, target, weight=weights)

    def mean_of_members(self, logits):
        """The log of the members' mean class probabilities."""
        import torch

        return torch.log_softmax(logits, dim=2).logsumexp(dim=1) - math.log(logits.shape[1])

    def tree_objective(self, spec) -> dict:
        return {"objective": "multiclass", "num_class": spec.size}

    def to_space(self, logits):
        return softmax(logits.astype(np.float64))

    def to_logits(self, averaged):
        return np.log(np.clip(averaged, EPS, None))

    def selection_loss(self, averaged, target) -> float:
        rows = np.arange(len(target))
        return float(-np.mean(np.log(np.clip(averaged[rows, target.astype(int)], EPS, None))))

    def partial(self, logits, target, denormalize=None, predicted=None) -> dict:
        n = len(target)
        z = logits.astype(np.float64)
        z = z - z.max(axis=1, keepdims=True)
        log_probs = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        y = target.astype(np.int64)
        return {
            "n": n,
            "loss_sum": float(-log_probs[np.arange(n), y].sum()),
            "confusion": confusion(y, z.argmax(axis=1), logits.shape[1]),
        }

    def merge(self, parts, merged) -> None:
        merged["confusion"] = sum(p["confusion"] for p in parts)

    def finish(self, stats) -> dict[str, float]:
        n = stats["n"]
        return {
            "accuracy": float(np.trace(stats["confusion"])) / n,
            "macro_f1": macro_f1_of(stats["confusion"]),
            "loss": stats["loss_sum"] / n,
        }

    def constant_row(self, spec, decoders) -> np.ndarray:
        row = np.zeros(spec.size, dtype=np.float32)
        row[0] = 1.0  # the vocabulary is frequency-ranked: class 0 is the most frequent
        return row

    def majority_baseline(self, spec, counts, stats) -> dict[str, float]:
        return {"accuracy": float(counts["confusion"][0].sum()) / counts["n"]}

    def plot(self, spec, stats: dict, split: str):
        plt = pyplot()
        confusion = confusion_matrix(spec, stats)
        labels = [str(x) for x in spec.labels]
        fig, axes = plt.subplots(1, 2, figsize=(12, 5))
        confusion_axes(axes[0], confusion, labels, f"{spec.name}: confusion (row share)")
        f1 = per_class_f1(confusion)
        axes[1].barh(range(len(labels)), f1)
        axes[1].set_yticks(range(len(labels)), labels if len(labels) <= 40 else [""] * len(labels))
        axes[1].invert_yaxis()
        axes[1].set(xlabel="F1", xlim=(0, 1), title="per-class F1")
        fig.suptitle(f"{split}: {spec.name}")
        fig.tight_layout()
        return fig

    def prediction_columns(self, spec, decoders, logits, target) -> dict:
        labels = typed_labels(spec.labels)
        probabilities = softmax(logits.astype(np.float64))
        columns = {f"{spec.name}_prediction": labels[probabilities.argmax(axis=1)]}
        for i, label in enumerate(spec.labels):
            columns[f"{spec.name}_probability_{label}"] = probabilities[:, i]
        if target is not None:
            columns[spec.name] = labels[target]
        return columns
