"""What trees (LightGBM's, CatBoost's) read: the network's inputs as one feature matrix, its
columns' names and categorical positions, and the threads they run on."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from runner.model.layout import CATEGORY, NUMERIC, Layout


def feature_matrix(inputs: Mapping[str, torch.Tensor | np.ndarray], layout: Layout) -> np.ndarray:
    """The trees' features, in layout order: the numeric columns, then the category codes."""
    parts = []
    if layout.numeric:
        parts.append(np.asarray(inputs[NUMERIC], dtype=np.float32))
    if layout.categories:
        parts.append(np.asarray(inputs[CATEGORY]).astype(np.float32))
    rows = len(next(iter(inputs.values()))) if inputs else 0
    return np.hstack(parts) if parts else np.zeros((rows, 0), np.float32)


def tree_columns(layout: Layout) -> list[str]:
    """The feature matrix's columns by name: the numeric ones, then the categories."""
    return [*layout.numeric, *(name for name, *_ in layout.categories)]


def feature_names(layout: Layout) -> list[str]:
    return [
        f"f{i}_{''.join(c if c.isalnum() else '_' for c in n)}"
        for i, n in enumerate(tree_columns(layout))
    ]


def categorical_indices(layout: Layout) -> list[int]:
    return list(range(len(layout.numeric), len(layout.numeric) + len(layout.categories)))


def tree_threads(num_threads: int | None) -> int:
    """LightGBM's and CatBoost's threads, training and predicting: their num_threads setting,
    else torch's count,
    the process's share of the node where Ray or the scoring pool set one (a trial's, a fold's
    or an actor's OMP_NUM_THREADS), every core otherwise. LightGBM's own default is every core,
    and OpenMP threads past a process's share spin against its neighbours'."""
    return num_threads or torch.get_num_threads()
