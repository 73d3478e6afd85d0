"""Binary features: two values, read as true/false words or a named positive label."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.processing.features.base import Feature, as_strings, scalar_strings

if TYPE_CHECKING:
    from runner.processing.features.sampled_column import Inferred, SampledColumn

_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


class BinaryFeature(Feature):
    type_name = "binary"
    defaults = {"missing_value_strategy": "fill_mode", "fill_value": False, "positive_label": None}
    missing_strategies = ("fill_mode", "fill_value", "drop_row")

    def partial_stats(self, series, row_ids):
        counts = as_strings(series).value_counts(dropna=True)
        return {"counts": {str(k): int(c) for k, c in counts.items()}}

    def combine(self, partials):
        counts: Counter = Counter()
        for p in partials:
            counts.update(p["counts"])
        values = sorted(counts)
        lowered = {v.strip().lower() for v in values}
        positive_label = self.options["positive_label"]
        if positive_label is not None:
            positive = [v for v in values if v == str(positive_label)]
            negative = [v for v in values if v != str(positive_label)]
            if len(negative) > 1:
                raise UserError(
                    f"binary feature '{self.name}' has more than two values ({', '.join(values[:10])}); "
                    "declare it as type category"
                )
        elif lowered <= _TRUE | _FALSE:
            positive = [v for v in values if v.strip().lower() in _TRUE]
            negative = [v for v in values if v.strip().lower() in _FALSE]
        elif len(values) <= 2:
            negative, positive = values[:1], values[1:]
        else:
            raise UserError(
                f"binary feature '{self.name}' has more than two values ({', '.join(values[:10])}); "
                "declare it as type category"
            )
        if self.role == "output" and (
            not positive or not negative or sum(counts[v] for v in positive) == 0
        ):
            raise UserError(
                f"output feature '{self.name}' has a single class ({', '.join(values) or 'none'}) in the "
                "training split; a binary target needs both classes"
            )
        if not values:
            raise UserError(
                f"binary feature '{self.name}' has no values in the training split; check the column"
            )
        positives = sum(counts[v] for v in positive)
        negatives = sum(counts[v] for v in negative)
        labels = [negative[0] if negative else "False", positive[0] if positive else "True"]
        return {
            "positive": positive,
            "negative": negative,
            "labels": labels,
            "mode": int(positives > negatives),
            "positive_rate": positives / max(positives + negatives, 1),
        }

    def transform(self, series, stats, row_ids):
        values = as_strings(series)
        is_pos = values.isin(stats["positive"]).to_numpy()
        is_neg = values.isin(stats["negative"]).to_numpy()
        return self._flags(is_pos, is_neg, stats)

    record_kinds = (int, float, str)

    def transform_records(self, values, stats):
        strings = scalar_strings(values)
        positive, negative = set(stats["positive"]), set(stats["negative"])
        is_pos = np.array([v in positive for v in strings], dtype=bool)
        is_neg = np.array([v in negative for v in strings], dtype=bool)
        return self._flags(is_pos, is_neg, stats)

    def _flags(self, is_pos: np.ndarray, is_neg: np.ndarray, stats: dict):
        missing = ~(is_pos | is_neg)  # missing, or a value never seen in training
        fill = (
            stats["mode"]
            if self.options["missing_value_strategy"] == "fill_mode"
            else int(bool(self.options["fill_value"]))
        )
        out = np.where(missing, fill, is_pos).astype(np.float32)
        keep = ~missing if self.drops_missing else np.ones(len(out), dtype=bool)
        return out, keep


# -- inference rules (run in order by runner.processing.type_inference) ---------------------------

_BOOLEAN_WORDS = {"true", "false", "t", "f"}


def infer_two_values(column: SampledColumn) -> Inferred | None:
    """Two distinct values: a target's two classes, or an input's booleans (typed or written
    out, a CSV's True/False). As an input, two numbers or two strings are a number or a
    category, not a binary flag: on the accuracy suite the flag's single 0/1 column trailed
    both (docs/accuracy.md)."""
    if column.distinct != 2:
        return None
    if column.as_target:
        return column.decided(BinaryFeature.type_name, "two distinct values")
    if pd.api.types.is_bool_dtype(column.present) or set(column.text.str.lower()) <= _BOOLEAN_WORDS:
        return column.decided(BinaryFeature.type_name, "true/false values")
    return None
