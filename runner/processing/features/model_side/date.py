"""A date input: its cyclic and linear parts, float columns without bins."""

from __future__ import annotations

from runner.processing.columns import date_columns
from runner.processing.features.model_side.base import InputColumns, ModelSide


class DateSide(ModelSide):
    type_name = "date"

    def input_columns(self, name: str, stats: dict) -> InputColumns:
        return InputColumns(numeric=[(column, []) for column in date_columns(name)])
