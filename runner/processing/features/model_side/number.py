"""A number feature: as an input one float column with its bins (and its missing flag); as an
output one value, trained on the normalized scale, reported in raw units."""

from __future__ import annotations

import numpy as np

from runner.processing.features.model_side.base import InputColumns, ModelSide, scalar_columns
from runner.processing.features.model_side.plots import pyplot

PAIRS_KEPT = 5000  # (prediction, truth) pairs a number output's statistics keep


class NumberSide(ModelSide):
    type_name = "number"
    metrics = ("r2", "mse", "mae", "loss")
    output = True
    trees = True
    normalized = True

    def input_columns(self, name: str, stats: dict) -> InputColumns:
        return scalar_columns(name, stats)

    def target_dtype(self, exact: bool):
        return np.float64 if exact else np.float32

    def loss(self, logits, target, weights=None):  # no classes to weigh
        import torch

        return torch.nn.functional.mse_loss(logits.squeeze(1), target)

    def tree_objective(self, spec) -> dict:
        return {"objective": "regression"}

    def selection_loss(self, averaged, target) -> float:
        return float(np.mean((averaged.reshape(-1) - target.reshape(-1)) ** 2))

    def partial(self, logits, target, denormalize=None, predicted=None) -> dict:
        """The targets go through `denormalize`, the predictions through `predicted` (raw
        units, kept in the training range; `denormalize` when None)."""
        n = len(target)
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

    def merge(self, parts, merged) -> None:
        """Sums add; the target's spread merges by Chan's formula."""
        n = merged["n"]
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

    def finish(self, stats) -> dict[str, float]:
        n = stats["n"]
        variance = stats["target_m2"] / n
        mse = stats["squared_error"] / n
        return {
            "r2": 1.0 - mse / variance if variance > 0 else float("nan"),
            "mse": mse,
            "mae": stats["absolute_error"] / n,
            "loss": stats["loss_sum"] / n,
        }

    def constant_row(self, spec, decoders) -> np.ndarray:
        mean = np.array([decoders.stats[spec.name]["mean"]])
        return decoders.normalizer(spec.name)(mean).astype(np.float32)

    def majority_baseline(self, spec, counts, stats) -> dict[str, float]:
        """The training mean's mse and r2 over the scored rows (their mean and spread)."""
        if not counts["n"]:
            return {}
        n, spread = counts["n"], counts["target_m2"]
        offset = counts["target_mean"] - stats["mean"]
        squared_error = spread + n * offset**2
        return {"mse": squared_error / n, "r2": 1.0 - squared_error / spread if spread > 0 else 0.0}

    def plot(self, spec, stats: dict, split: str):
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

    def prediction_columns(self, spec, decoders, logits, target) -> dict:
        predict = decoders.predicted(spec.name)
        columns = {f"{spec.name}_prediction": predict(logits.reshape(-1).astype(np.float64))}
        if target is not None:
            denormalize = decoders.denormalizer(spec.name)
            columns[spec.name] = denormalize(target.astype(np.float64))
        return columns


def _spread(pairs: np.ndarray, most: int) -> np.ndarray:
    """At most `most` columns of a [2, rows] array, evenly spaced (all when fewer)."""
    if pairs.shape[1] <= most:
        return pairs
    return pairs[:, np.linspace(0, pairs.shape[1] - 1, most).astype(np.int64)]
