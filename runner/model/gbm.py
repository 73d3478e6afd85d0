"""Gradient-boosted trees (LightGBM) as a scoring model: the network's inputs as one feature
matrix (numbers, binaries, a date's parts, a text's components and target score as they are;
category codes as LightGBM's native categoricals), one booster per run, its raw scores as the
network's logits. Sets and a text's tokens are not tree inputs (their counts and components
are where the cache has them)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from runner.model.changed_columns import ChangedColumns
from runner.model.layout import Layout
from runner.model.tree_features import feature_matrix, tree_threads

BOOSTER_FILE = "booster.txt"


class TreeModel:
    """A LightGBM booster behind the ScoringModel seam: its raw scores at the best iteration."""

    def __init__(self, booster, layout: Layout, num_threads: int | None = None):
        self.booster = booster
        self.layout = layout
        self.num_threads = num_threads
        self.changed_columns: ChangedColumns | None = None

    def eval(self):
        return self

    @contextmanager
    def against_reference(self):
        """Within it, rows that differ from the first rows scored in it in a few columns are
        scored through the trees that split on those columns (runner/model/changed_columns.py:
        permutation importance)."""
        best = self.booster.best_iteration
        threads = tree_threads(self.num_threads)

        def predict(booster, matrix, num_iteration):
            return booster.predict(
                matrix, num_iteration=num_iteration, raw_score=True, num_threads=threads
            )

        self.changed_columns = ChangedColumns(self.booster, best if best > 0 else None, predict)
        try:
            yield
        finally:
            self.changed_columns = None

    def __call__(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {name: torch.from_numpy(z) for name, z in self.raw_scores(inputs).items()}

    def raw_scores(self, inputs) -> dict[str, np.ndarray]:
        spec = self.layout.outputs[0]
        matrix = feature_matrix(inputs, self.layout)
        if self.changed_columns is not None:
            z = np.asarray(self.changed_columns.scores_of(matrix), dtype=np.float32)
        else:
            z = np.asarray(self.predict(matrix, raw_score=True), dtype=np.float32)
        return {spec.name: z.reshape(len(matrix), -1)}  # [rows, logits per row]

    def predict(self, matrix: np.ndarray, **kind):
        """The booster on a feature matrix at its best iteration and thread count; `kind`:
        raw_score=True (the logits) or pred_contrib=True (TreeSHAP, command=explain)."""
        options = {"num_threads": tree_threads(self.num_threads)}
        best = self.booster.best_iteration
        return self.booster.predict(
            matrix, num_iteration=best if best > 0 else None, **kind, **options
        )


class GBMFamily:
    name = "gbm"
    files: tuple[str, ...] = (BOOSTER_FILE,)
    export_formats: tuple[str, ...] = ("lightgbm", "onnx")
    explain_method = "tree SHAP"
    packages: tuple[str, ...] = ("lightgbm",)

    def onnx_graph(self, model, layout: Layout):
        from runner.model.onnx_graph import tree_graph  # onnx and its converter: export only

        return tree_graph(model.booster, layout)

    def save(self, model, directory: Path) -> None:
        model.booster.save_model(str(directory / BOOSTER_FILE))

    def load(self, directory: Path, layout: Layout, settings) -> TreeModel:
        from runner.fast_start import import_lightgbm

        booster = import_lightgbm().Booster(model_file=str(directory / BOOSTER_FILE))
        return TreeModel(booster, layout, settings.gbm.num_threads)
