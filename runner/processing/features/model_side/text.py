"""A text input: its token ids, its TF-IDF components (z-scored: no bins) and its target score
(a number with its bins) where it has them."""

from __future__ import annotations

from runner.processing.columns import (
    component_columns,
    components_of,
    score_column,
    text_table_size,
)
from runner.processing.features.model_side.base import InputColumns, ModelSide


class TextSide(ModelSide):
    type_name = "text"

    def input_columns(self, name: str, stats: dict) -> InputColumns:
        numeric: list[tuple[str, list[float]]] = [
            (column, []) for column in component_columns(name, components_of(stats))
        ]
        if "score" in stats:
            numeric.append((score_column(name), list(stats["score"]["bin_edges"])))
        return InputColumns(
            numeric=numeric,
            token_ids=text_table_size(stats),
            unknown_token="vocab" in stats,
            token_counts=stats.get("vocab_counts") if "vocab" in stats else None,
        )
