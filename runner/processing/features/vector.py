"""Vector features: fixed-length numeric lists, each position z-scored."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.processing.columns import vector_columns
from runner.processing.features.base import Feature

if TYPE_CHECKING:
    from runner.processing.features.sampled_column import Inferred, SampledColumn


class VectorFeature(Feature):
    """Fixed-length numeric lists (`0.1,0.5,2` or `[0.1, 0.5, 2]` cells, or list cells from
    Parquet): the length is fitted on the training split, each position z-scored; a missing
    cell is the training mean."""

    type_name = "vector"
    output_allowed = False
    defaults = {"delimiter": None}

    def _parse(self, series: pd.Series, length: int | None):
        """([rows, length] float64 with NaN rows where missing, the length found, and the
        first problem as (position, what is wrong) or None)."""
        delimiter = self.options["delimiter"]
        rows: list = []
        for position, value in enumerate(series.tolist()):
            if isinstance(value, list | tuple | np.ndarray):
                items = list(value)
            elif value is None or (not isinstance(value, str) and pd.isna(value)):
                rows.append(None)
                continue
            else:
                text = str(value).strip().strip("[]()")
                items = text.split(delimiter) if delimiter else text.replace(",", " ").split()
            try:
                vector = [float(i) for i in items]
            except (TypeError, ValueError):
                return None, length, (position, f"a non-numeric member in {value!r}")
            if length is None:
                length = len(vector)
            if len(vector) != length or not vector:
                return (
                    None,
                    length,
                    (position, f"{len(vector)} values where the others have {length}"),
                )
            rows.append(vector)
        out = np.full((len(rows), length or 0), np.nan)
        for i, vector in enumerate(rows):
            if vector is not None:
                out[i] = vector
        return out, length, None

    def _vectors(self, series: pd.Series, row_ids: np.ndarray, length: int | None = None):
        matrix, length, problem = self._parse(series, length)
        if problem is not None:
            position, what = problem
            raise UserError(
                f"vector feature '{self.name}' has {what} at data row {int(row_ids[position]) + 1}; "
                "every vector needs the same length of numbers (preprocessing.delimiter splits them)"
            )
        return matrix, length

    def check_values(self, series: pd.Series, stats: dict) -> None:
        problem = self._parse(series, stats["length"])[2]
        if problem is not None:
            raise UserError(
                f"row {problem[0]} field {self.name!r} has {problem[1]}; send a list of numbers or null"
            )

    def partial_stats(self, series, row_ids):
        matrix, length = self._vectors(series, row_ids)
        present = matrix[~np.isnan(matrix).any(axis=1)] if length else np.zeros((0, 0))
        return {
            "length": length,
            "count": int(len(present)),
            "sum": present.sum(axis=0).tolist(),
            "sum_sq": np.square(present).sum(axis=0).tolist(),
        }

    def combine(self, partials):
        lengths = {p["length"] for p in partials if p["length"] is not None}
        count = sum(p["count"] for p in partials)
        if not count:
            raise UserError(
                f"vector feature '{self.name}' has no values in the training split; check the column"
            )
        if len(lengths) > 1:
            raise UserError(
                f"vector feature '{self.name}' has vectors of lengths {sorted(lengths)}; every "
                "vector needs the same length"
            )
        given = [p for p in partials if p["count"]]
        total = np.sum([p["sum"] for p in given], axis=0)
        squares = np.sum([p["sum_sq"] for p in given], axis=0)
        mean = total / count
        std = np.sqrt(np.maximum(squares / count - mean * mean, 0.0))
        return {"length": lengths.pop(), "mean": mean.tolist(), "std": std.tolist()}

    def transform(self, series, stats, row_ids):
        matrix, _ = self._vectors(series, row_ids, stats["length"])
        mean, std = np.asarray(stats["mean"]), np.asarray(stats["std"])
        matrix = np.where(np.isnan(matrix), mean, matrix)
        matrix = (matrix - mean) / np.where(std > 0, std, 1.0)
        columns = vector_columns(self.name, stats["length"])
        return {c: matrix[:, i].astype(np.float32) for i, c in enumerate(columns)}, np.ones(
            len(matrix), dtype=bool
        )


# -- inference rules (run in order by runner.processing.type_inference) ---------------------------

_NUMBER_LIST = re.compile(r"^\s*[\[(]?\s*-?\d[\d.eE+-]*(\s*[,\s]\s*-?\d[\d.eE+-]*)+\s*[\])]?\s*$")


def infer_lists(column: SampledColumn) -> Inferred | None:
    if column.is_list:
        return column.decided(VectorFeature.type_name, "lists of numbers")
    return None


def infer_written_lists(column: SampledColumn) -> Inferred | None:
    text = column.text
    if text.map(_NUMBER_LIST.match).notna().all() and _same_length(text):
        return column.decided(
            VectorFeature.type_name, "every value is a list of numbers of the same length"
        )
    return None


def _same_length(text: pd.Series) -> bool:
    lengths = text.str.strip("[]() ").str.replace(",", " ").str.split().str.len()
    return lengths.nunique() == 1
