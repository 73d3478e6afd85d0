"""A feature type of the tests' own, defined here and nowhere in runner/: percentages written
as text ('45%', '12.5 %', '0.3'), an input read as a fraction, z-scored, a missing value the
training mean. `type: percent_type` names this module; every process that preprocesses, trains
or scores imports it from PYTHONPATH (test_feature_types.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.processing.features.base import Feature, merged_moments, seen_count
from runner.processing.features.model_side.base import InputColumns, ModelSide


class PercentFeature(Feature):
    type_name = "percent_type"
    output_allowed = False

    def _fractions(self, series: pd.Series) -> np.ndarray:
        text = series.astype("string").str.strip()
        percent = text.str.endswith("%").fillna(False).to_numpy(dtype=bool)
        values = pd.to_numeric(text.str.rstrip("%").str.strip(), errors="coerce")
        bad = values.isna() & series.notna()
        if bad.any():
            raise UserError(f"percent feature '{self.name}' has {series[bad].iloc[0]!r}")
        fractions = values.to_numpy(dtype=np.float64, na_value=np.nan)
        return np.where(percent, fractions / 100.0, fractions)

    def check_values(self, series, stats):
        self._fractions(series)

    def partial_stats(self, series, row_ids):
        v = self._fractions(series)
        present = v[~np.isnan(v)]
        return {
            "count": int(present.size),
            "sum": float(present.sum()),
            "sum_sq": float(np.square(present).sum()),
        }

    def combine(self, partials):
        count = seen_count(partials, f"percent feature '{self.name}' has no values")
        mean, std = merged_moments(partials, "sum", "sum_sq", count)
        return {"mean": mean, "std": std}

    def transform(self, series, stats, row_ids):
        v = self._fractions(series)
        v = np.where(np.isnan(v), stats["mean"], v)
        scaled = (v - stats["mean"]) / (stats["std"] or 1.0)
        return scaled.astype(np.float32), np.ones(len(v), dtype=bool)


class PercentSide(ModelSide):
    type_name = "percent_type"

    def input_columns(self, name: str, stats: dict) -> InputColumns:
        return InputColumns(numeric=[(name, [])])  # one float column, no bins


FEATURE = PercentFeature
MODEL_SIDE = PercentSide()
