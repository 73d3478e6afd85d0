"""A vector input: one float column per position, without bins."""

from __future__ import annotations

from runner.processing.columns import vector_columns
from runner.processing.features.model_side.base import InputColumns, ModelSide


class VectorSide(ModelSide):
    type_name = "vector"

    def input_columns(self, name: str, stats: dict) -> InputColumns:
        columns = vector_columns(name, stats["length"])
        return InputColumns(numeric=[(column, []) for column in columns])
