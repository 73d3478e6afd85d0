"""Category features: a vocabulary of the training split's values."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.processing.features.base import (
    UNKNOWN_TOKEN,
    Feature,
    as_strings,
    bounded_counts,
    merged_vocabulary,
    scalar_strings,
    vocab_index,
    vocab_positions,
)

if TYPE_CHECKING:
    from runner.processing.features.sampled_column import Inferred, SampledColumn


class CategoryFeature(Feature):
    type_name = "category"
    defaults = {
        "missing_value_strategy": "unknown",
        "fill_value": "",
        "max_vocab_size": 10000,
        "min_count": 1,
    }
    missing_strategies = ("unknown", "fill_mode", "fill_value", "drop_row")

    def partial_stats(self, series, row_ids):
        counts = as_strings(series).value_counts(dropna=True)
        counts = {str(k): int(c) for k, c in counts.items()}
        return {"counts": bounded_counts(counts, self.options["max_vocab_size"])}

    def combine(self, partials):
        kept, counts = merged_vocabulary(partials, self.options, with_counts=True)
        if self.role == "output" and len(kept) < 2:
            raise UserError(
                f"output feature '{self.name}' has {len(kept)} class(es) in the training split "
                f"({', '.join(kept) or 'none'}); a category target needs at least two"
            )
        if not kept:
            raise UserError(
                f"category feature '{self.name}' has no values in the training split; check the column"
            )
        stats = {"vocab": kept, "mode": kept[0]}
        if self.role == "output":  # each class's training rows (model.class_weights)
            stats["counts"] = counts
        return stats

    def vocabulary(self, stats: dict) -> list[str]:
        """Index -> label; inputs reserve index 0 for unknown and missing values."""
        return stats["vocab"] if self.role == "output" else [UNKNOWN_TOKEN, *stats["vocab"]]

    def transform(self, series, stats, row_ids):
        return self._codes(as_strings(series).to_numpy(), stats)

    record_kinds = (int, float, str)

    def transform_records(self, values, stats):
        # A dict's lookup: pandas' get_indexer makes an Index of every request's values.
        positions = vocab_positions(self, stats["vocab"])
        return self._codes(
            np.array(scalar_strings(values), dtype=object),
            stats,
            lambda strings: np.array([positions.get(v, -1) for v in strings], dtype=np.int64),
        )

    def _codes(self, values: np.ndarray, stats: dict, lookup=None):
        missing = pd.isna(values)
        strategy = self.options["missing_value_strategy"]
        if strategy in ("fill_mode", "fill_value"):
            fill = stats["mode"] if strategy == "fill_mode" else str(self.options["fill_value"])
            values = np.where(missing, fill, values)
        if lookup is None:
            codes = vocab_index(self, stats["vocab"]).get_indexer(values).astype(np.int64)
        else:
            codes = lookup(values)
        if self.role == "output":
            # Unseen or missing targets cannot be scored; those rows are dropped.
            return codes.astype(np.int32), codes >= 0
        keep = ~missing if strategy == "drop_row" else np.ones(len(codes), dtype=bool)
        return (codes + 1).astype(np.int32), keep  # -1 (unseen) becomes 0 (unknown)


# -- inference rules (run in order by runner.processing.type_inference) ---------------------------


def infer_two_values(column: SampledColumn) -> Inferred | None:
    if column.distinct == 2:
        return column.decided(CategoryFeature.type_name, "two distinct values")
    return None


def infer_integer_classes(column: SampledColumn) -> Inferred | None:
    numbers = column.numbers
    if numbers is not None and column.integer_classes(numbers):
        return column.decided(
            CategoryFeature.type_name, f"{numbers.distinct} distinct integer classes"
        )
    return None


def infer_any(column: SampledColumn) -> Inferred | None:
    """What no other rule took: a category."""
    return column.decided(
        CategoryFeature.type_name, f"{column.distinct} distinct values in {len(column.text)} rows"
    )
