"""A binary feature: as an input one 0/1 float column; as an output one logit, the positive
class's."""

from __future__ import annotations

import numpy as np

from runner.processing.features.model_side.base import (
    EPS,
    InputColumns,
    ModelSide,
    auc_of,
    log_sigmoid,
    logit_of_mean_probability,
    scalar_columns,
    sigmoid,
    typed_labels,
)
from runner.processing.features.model_side.plots import (
    binary_curves,
    confusion_axes,
    confusion_matrix,
    pyplot,
)


class BinarySide(ModelSide):
    type_name = "binary"
    # accuracy, f1 (the positive class's), precision and recall at the output's decision
    # threshold (OutputSpec.threshold)
    metrics = ("roc_auc", "accuracy", "f1", "precision", "recall", "loss")
    output = True
    trees = True
    drops_unseen_classes = True

    def input_columns(self, name: str, stats: dict) -> InputColumns:
        return scalar_columns(name, stats)

    def labels(self, stats: dict) -> list:
        return stats["labels"]  # [negative, positive]

    def class_shares(self, stats: dict) -> list[float] | None:
        positive = float(stats.get("positive_rate", 0.5))
        return [1.0 - positive, positive]

    def loss(self, logits, target, weights=None):
        import torch

        row_weights = None if weights is None else weights[target.long()]
        return torch.nn.functional.binary_cross_entropy_with_logits(
            logits.squeeze(1), target, weight=row_weights
        )

    def mean_of_members(self, logits):
        return logit_of_mean_probability(logits)

    def tree_objective(self, spec) -> dict:
        return {"objective": "binary"}

    def to_space(self, logits):
        return sigmoid(logits.astype(np.float64))

    def to_logits(self, averaged):
        p = np.clip(averaged, EPS, 1 - EPS)
        return np.log(p / (1 - p))

    def selection_loss(self, averaged, target) -> float:
        p = np.clip(averaged.reshape(-1), EPS, 1 - EPS)
        y = target.reshape(-1)
        return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))

    def partial(self, logits, target, denormalize=None, predicted=None) -> dict:
        """ROC AUC needs every score: the logits of the positives and of the negatives are kept
        (one float32 a row, not the table)."""
        z = logits.reshape(-1).astype(np.float64)
        y = target.astype(np.float64)
        positive = y > 0.5
        scores = logits.reshape(-1)  # float32 from the model: 4 bytes a row
        return {
            "n": len(target),
            "loss_sum": float(-(y * log_sigmoid(z) + (1 - y) * log_sigmoid(-z)).sum()),
            "positive_scores": scores[positive],
            "negative_scores": scores[~positive],
        }

    def merge(self, parts, merged) -> None:
        for key in ("positive_scores", "negative_scores"):
            merged[key] = np.concatenate([p[key] for p in parts])

    def finish(self, stats) -> dict[str, float]:
        """The decision's metrics at stats["threshold_logit"] (the output's threshold; logit
        0, probability 0.5, where none is given)."""
        n = stats["n"]
        cut = stats.get("threshold_logit", 0.0)
        positive, negative = stats["positive_scores"], stats["negative_scores"]
        hits, false_alarms = int((positive > cut).sum()), int((negative > cut).sum())
        precision = hits / (hits + false_alarms) if hits + false_alarms else 0.0
        recall = hits / len(positive) if len(positive) else 0.0
        return {
            "roc_auc": auc_of(positive, negative),
            "accuracy": (hits + len(negative) - false_alarms) / n,
            "f1": 2 * hits / (2 * hits + false_alarms + len(positive) - hits),
            "precision": precision,
            "recall": recall,
            "loss": stats["loss_sum"] / n,
        }

    def majority_baseline(self, spec, counts, stats) -> dict[str, float]:
        positive = len(counts["positive_scores"]) / counts["n"]
        return {"accuracy": positive if stats["mode"] else 1.0 - positive}

    def plot(self, spec, stats: dict, split: str):
        positive = np.asarray(stats["positive_scores"])
        negative = np.asarray(stats["negative_scores"])
        if not len(positive) or not len(negative):
            return None  # one class only: no curve to draw
        plt = pyplot()
        curves = binary_curves(stats)
        fig, axes = plt.subplots(1, 4, figsize=(17, 4))
        confusion = confusion_matrix(spec, stats)
        confusion_axes(axes[0], confusion, [str(x) for x in spec.labels], f"{spec.name}: confusion")
        axes[1].plot(curves["fpr"], curves["tpr"])
        axes[1].plot([0, 1], [0, 1], "--", color="grey", linewidth=0.8)
        axes[1].set(xlabel="false positive rate", ylabel="true positive rate", title="ROC")
        axes[2].plot(curves["recall"], curves["precision"])
        axes[2].axhline(curves["prevalence"][0], linestyle="--", color="grey", linewidth=0.8)
        axes[2].set(xlabel="recall", ylabel="precision", title="precision-recall")
        axes[3].plot(
            curves["calibration_predicted"], curves["calibration_true"], "-o", markersize=3
        )
        axes[3].plot([0, 1], [0, 1], "--", color="grey", linewidth=0.8)
        axes[3].set(
            xlabel="mean predicted probability", ylabel="share positive", title="calibration"
        )
        fig.suptitle(f"{split}: {spec.name}")
        fig.tight_layout()
        return fig

    def prediction_columns(self, spec, decoders, logits, target) -> dict:
        labels = typed_labels(spec.labels)
        probability = sigmoid(logits.reshape(-1).astype(np.float64))
        columns = {
            f"{spec.name}_prediction": labels[(probability > spec.threshold).astype(int)],
            f"{spec.name}_probability": probability,
        }
        if target is not None:
            columns[spec.name] = labels[target.astype(int)]
        return columns
