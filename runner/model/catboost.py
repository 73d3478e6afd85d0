"""model.family=catboost: CatBoost's gradient-boosted oblivious trees on the trees' inputs (the
numeric matrix as numbers, the category codes as CatBoost's own categoricals, which it
encodes with ordered target statistics), its raw scores as the network's logits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from runner.model.layout import Layout
from runner.model.tree_features import feature_matrix, tree_threads

MODEL_FILE = "model.cbm"


def catboost_pool(matrix: np.ndarray, layout: Layout, target=None, weight=None):
    """A CatBoost Pool of the trees' feature matrix: its numeric columns as numbers, its
    category codes as categorical values (CatBoost takes those as text or integers)."""
    from catboost import FeaturesData, Pool

    numeric = len(layout.numeric)
    codes = matrix[:, numeric:].astype(np.int64).astype(str).astype(object)
    data = FeaturesData(
        num_feature_data=np.ascontiguousarray(matrix[:, :numeric], dtype=np.float32)
        if numeric
        else None,
        cat_feature_data=codes if layout.categories else None,
    )
    return Pool(data, label=target, weight=weight)


class CatBoostModel:
    """A trained CatBoost model behind the ScoringModel seam: its raw scores (the kept trees:
    early stopping shrinks the model to its best iteration)."""

    def __init__(self, booster, layout: Layout, num_threads: int | None = None):
        self.booster = booster
        self.layout = layout
        self.num_threads = num_threads

    def eval(self):
        return self

    def __call__(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        spec = self.layout.outputs[0]
        matrix = feature_matrix(inputs, self.layout)
        z = np.asarray(self.predict(matrix), dtype=np.float32)
        return {spec.name: torch.from_numpy(z.reshape(len(matrix), -1))}

    def predict(self, matrix: np.ndarray, pred_contrib: bool = False) -> np.ndarray:
        """The raw scores of a feature matrix; pred_contrib=True: each feature's SHAP value and
        the expected value, per class, in LightGBM's layout ([rows, classes x (columns + 1)]:
        command=explain's tree SHAP reads both alike)."""
        pool = catboost_pool(matrix, self.layout)
        threads = tree_threads(self.num_threads)
        if pred_contrib:
            values = self.booster.get_feature_importance(
                pool, type="ShapValues", thread_count=threads
            )
            return np.asarray(values).reshape(len(matrix), -1)
        return self.booster.predict(pool, prediction_type="RawFormulaVal", thread_count=threads)


class CatBoostFamily:
    name = "catboost"
    files: tuple[str, ...] = (MODEL_FILE,)
    # CatBoost's ONNX exporter refuses categorical features, which the runner's trees use.
    export_formats: tuple[str, ...] = ("catboost",)
    explain_method = "tree SHAP"
    packages: tuple[str, ...] = ("catboost",)

    def save(self, model, directory: Path) -> None:
        model.booster.save_model(str(directory / MODEL_FILE))

    def load(self, directory: Path, layout: Layout, settings) -> CatBoostModel:
        from catboost import CatBoost

        booster = CatBoost()
        booster.load_model(str(directory / MODEL_FILE))
        return CatBoostModel(booster, layout, settings.catboost.num_threads)
