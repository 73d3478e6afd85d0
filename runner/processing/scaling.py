"""A number feature's normalization and its inverse, from its fitted statistics: numpy only,
so that a training worker or a scorer decodes a regression target's predictions without
importing the feature code (and pandas with it)."""

from __future__ import annotations

import numpy as np

SMOOTH_CLIP = 3.0  # robust-scaled values are squashed smoothly towards +-this


def normalization_in_use(stats: dict, configured: str | None) -> str | None:
    """The normalization in use: the one `auto` picked (stored in the statistics), else the
    configured one."""
    return stats.get("normalization", configured)


def signed_log1p(v: np.ndarray) -> np.ndarray:
    """log1p of the magnitude with the sign kept: defined for every real value."""
    return np.sign(v) * np.log1p(np.abs(v))


def normalize(v: np.ndarray, stats: dict, mode: str | None) -> np.ndarray:
    if mode == "robust":  # median-centred, IQR-scaled, outliers clipped smoothly
        x = signed_log1p(v) if stats["log"] else v
        z = (x - stats["center"]) / stats["scale"]
        return z / np.sqrt(1.0 + np.square(z / SMOOTH_CLIP))
    if mode == "zscore":
        return (v - stats["mean"]) / (stats["std"] or 1.0)
    if mode == "minmax":
        return (v - stats["min"]) / ((stats["max"] - stats["min"]) or 1.0)
    if mode == "log1p":  # right-skewed values (prices, counts): z-scored in log space
        return (signed_log1p(v) - stats["log_mean"]) / (stats["log_std"] or 1.0)
    if mode == "quantile":  # the training distribution's rank, as a uniform of unit variance
        q = np.asarray(stats["quantiles"])
        ranks = np.interp(v, q, np.linspace(0.0, 1.0, len(q)))
        return (ranks - 0.5) * np.sqrt(12.0)
    return v


def denormalize(v: np.ndarray, stats: dict, mode: str | None) -> np.ndarray:
    """normalize's inverse (robust's smooth clip has none: an output never uses it)."""
    if mode == "zscore":
        return v * (stats["std"] or 1.0) + stats["mean"]
    if mode == "minmax":
        return v * ((stats["max"] - stats["min"]) or 1.0) + stats["min"]
    if mode == "log1p":  # a target trained in log space is predicted in raw units
        logged = v * (stats["log_std"] or 1.0) + stats["log_mean"]
        return np.sign(logged) * np.expm1(np.minimum(np.abs(logged), 700.0))
    if mode == "quantile":
        q = np.asarray(stats["quantiles"])
        return np.interp(v / np.sqrt(12.0) + 0.5, np.linspace(0.0, 1.0, len(q)), q)
    return v
