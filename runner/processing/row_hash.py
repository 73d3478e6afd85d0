"""A fixed pseudo-random number per row id, the same however a table is partitioned: the
random split's (runner.processing.split) and the features' quantile samples."""

import numpy as np


def uniform_from_ids(row_ids: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of (row id + seed x golden ratio) mapped to [0, 1): a fixed pseudo-random
    number per row that no partitioning changes (splits here, quantile samples in features)."""
    with np.errstate(over="ignore"):
        z = row_ids.astype(np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)
