"""A trained model as a Python object: raw rows in, predictions out.

    from runner import Predictor
    predictor = Predictor.load("outputs/<run>/model")
    predictions = predictor.predict(frame)   # a DataFrame of raw values (strings or typed)

Preprocessing comes from model/meta.json (the statistics fitted on the training split):
no cache, no Hydra, no Ray. command=predict / evaluate and the HTTP server score
through this same object, so their answers are the same.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import torch

from runner.errors import UserError
from runner.loading.tensors import TensorTable
from runner.model.artifact import SavedModel, load_model_dir
from runner.processing.columns import ROW_ID
from runner.processing.features.feature_set import FeatureSet, transform_columns
from runner.scoring.decoding import (
    Decoders,
    answers_by_row,
    compute_metrics,
    prediction_columns,
    prediction_frame,
)
from runner.scoring.forward import ForwardPass, Scored, score

EVAL_CHUNK_ROWS = 4096


class Predictor:
    def __init__(self, saved: SavedModel, chunk_rows: int = EVAL_CHUNK_ROWS, device=None):
        self.saved = saved
        # The network on its device (the CPU unless a GPU actor moved it there).
        self.forward = ForwardPass(saved.model, device or torch.device("cpu"))
        self.layout = saved.layout
        self.features = FeatureSet.from_meta(saved.meta)
        self.stats = {name: info["stats"] for name, info in saved.meta["features"].items()}
        self.decoders = Decoders(saved.meta)
        self.chunk_rows = chunk_rows

    @classmethod
    def load(cls, model_dir) -> Predictor:
        return cls(load_model_dir(model_dir))

    @property
    def input_names(self) -> list[str]:
        return [f.name for f in self.features.inputs]

    def schema(self) -> dict:
        """The inputs with their types, the outputs with their types and classes."""
        outputs = []
        for spec in self.layout.outputs:
            entry: dict[str, str | list[str]] = {"name": spec.name, "type": spec.type}
            if spec.labels:
                entry["classes"] = list(spec.labels)
            outputs.append(entry)
        return {
            "inputs": [{"name": f.name, "type": f.type_name} for f in self.features.inputs],
            "outputs": outputs,
        }

    def _scored(
        self, frame: pd.DataFrame, with_targets: bool, first_row: int, row_ids=None
    ) -> Scored:
        return self.score_processed(
            self.processed(frame, with_targets, first_row, row_ids), with_targets
        )

    def processed(
        self, frame: pd.DataFrame, with_targets: bool, first_row: int = 0, row_ids=None
    ) -> pa.Table:
        """Raw rows through the saved feature transforms: the columns a cache split holds."""
        chosen = self.features.all if with_targets else self.features.inputs
        missing = [f.name for f in chosen if f.name not in frame.columns]
        if missing:
            raise UserError(
                f"the data has no column {missing[0]!r} ({'an output' if missing[0] not in self.input_names else 'an input'}"
                f" of this model); available columns: {', '.join(map(str, frame.columns))}"
            )
        if row_ids is None:
            row_ids = np.arange(first_row, first_row + len(frame), dtype=np.int64)
        columns, keep = transform_columns(frame.reset_index(drop=True), row_ids, chosen, self.stats)
        if not keep.all():
            columns = {name: values[keep] for name, values in columns.items()}
        # Straight to Arrow, no DataFrame in between: most of a one-row request's time was
        # pandas building one and pyarrow converting it.
        return pa.table({name: pa.array(values) for name, values in columns.items()})

    def score_processed(
        self, table: pa.Table, with_targets: bool, chunk_rows: int | None = None
    ) -> Scored:
        """Logits (and targets) of rows already through the feature transforms (a cache split),
        scored `chunk_rows` at a time (the Predictor's chunk by default)."""
        data = TensorTable.from_arrow(table, self.layout, with_targets, exact=True)
        chunks = data.chunks(chunk_rows or self.chunk_rows)
        return score(self.saved.model, chunks, self.layout, self.forward)

    def score_inputs(self, frame: pd.DataFrame, first_row: int = 0, row_ids=None) -> Scored:
        """Logits of every row the inputs keep (no targets needed)."""
        return self._scored(frame, False, first_row, row_ids)

    def predict(self, rows, first_row: int = 0, row_ids=None) -> pd.DataFrame:
        """One row per scored input row: `row` (its position, from first_row, or row_ids),
        each output's prediction in raw labels or units, and its probabilities. `rows`: a
        DataFrame, one row as a dict, or a list of row dicts (checked as a served request's)."""
        return self.prediction_frame(self.score_inputs(self.as_frame(rows), first_row, row_ids))

    def as_frame(self, rows) -> pd.DataFrame:
        if isinstance(rows, pd.DataFrame):
            return rows
        if isinstance(rows, dict):
            rows = [rows]
        if isinstance(rows, list | tuple):
            return self.records_frame(rows)
        raise UserError(
            f"predict takes a pandas DataFrame, a row as a dict or a list of row dicts, not "
            f"{type(rows).__name__}"
        )

    def prediction_frame(self, scored: Scored, with_targets: bool = False) -> pd.DataFrame:
        targets = scored.targets if with_targets else None
        return prediction_frame(self.layout, self.decoders, scored.logits, scored.row_ids, targets)

    def score_labelled(self, frame: pd.DataFrame, first_row: int = 0, row_ids=None) -> Scored:
        """Logits and targets of the rows with a known target (for evaluate)."""
        return self._scored(frame, True, first_row, row_ids)

    def metrics(self, scored: Scored) -> dict[str, float]:
        return compute_metrics(self.layout, self.decoders, scored.logits, scored.targets)

    def answer_records(self, records: Sequence, checked: bool = False) -> list[dict]:
        """JSON-style rows -> one JSON-style answer per row (keyed like the prediction columns;
        nulls for a row that preprocessing dropped), as predict answers them. Each input's
        values are read without pandas where its type can (Feature.transform_records), a row
        on its own; otherwise the request goes through records_frame and predict. `checked`:
        check_request passed them already (the server checks each request before batching)."""
        if not checked:
            self.check_records(records)
        if not self._reads_records(records):
            frame = self.predict(self._frame(records, check_values=not checked))
            columns = {name: frame[name].to_numpy() for name in frame.columns}
        else:
            data = TensorTable.from_columns(self._record_columns(records), self.layout)
            scored = score(self.saved.model, [data], self.layout, self.forward)
            columns = prediction_columns(self.layout, self.decoders, scored.logits, scored.row_ids)
        return answers_by_row(columns, len(records))

    def check_request(self, records: Sequence) -> None:
        """A request's rows checked on their own (check_records, and a type's check of its
        values where it cannot read them without pandas), so that one bad request fails alone,
        not the batch it would have joined."""
        self.check_records(records)
        if not self._reads_records(records):
            self._frame(records, check_values=True)

    def _reads_records(self, records: Sequence) -> bool:
        return all(f.reads_records([row[f.name] for row in records]) for f in self.features.inputs)

    def _record_columns(self, records: Sequence) -> dict[str, np.ndarray]:
        """The processed columns of checked records every input reads (_reads_records)."""
        columns: dict = {}
        keep = np.ones(len(records), dtype=bool)
        for feature in self.features.inputs:
            values = [row[feature.name] for row in records]
            processed, kept = feature.transform_records(values, self.stats[feature.name])
            columns.update(processed if isinstance(processed, dict) else {feature.name: processed})
            keep &= kept
        columns[ROW_ID] = np.arange(len(records), dtype=np.int64)
        if not keep.all():
            columns = {name: values[keep] for name, values in columns.items()}
        return columns

    def check_records(self, records: Sequence) -> None:
        """JSON-style rows (a list of objects) checked row by row: every input present (null
        for a missing value), numbers numeric. Errors name the row and field."""
        if not isinstance(records, list | tuple):
            raise UserError('the body must be a JSON array of row objects, e.g. [{"x1": 1.5}]')
        if not records:
            raise UserError("the array of rows is empty; send at least one row object")
        numbers_ = {f.name for f in self.features.inputs if f.numeric}
        for i, row in enumerate(records):
            if not isinstance(row, dict):
                raise UserError(
                    f'row {i} is not an object; send rows like {{"{self.input_names[0]}": ...}}'
                )
            for name in self.input_names:
                if name not in row:
                    raise UserError(f"row {i} has no field {name!r} (use null for a missing value)")
            for name in numbers_:
                value = row[name]
                if value is None or isinstance(value, bool):
                    continue
                if isinstance(value, numbers.Number):
                    if isinstance(value, float) and math.isinf(value):
                        raise UserError(
                            f"row {i} field {name!r} is infinite; send a finite number or null"
                        )
                    continue
                if not _numeric_text(value):
                    raise UserError(
                        f"row {i} field {name!r} has non-numeric value {value!r}; send a number or null"
                    )

    def records_frame(self, records: Sequence) -> pd.DataFrame:
        """JSON-style rows (a list of objects) -> a frame, checked as check_records checks
        them and by each input's type. Errors name the row and field."""
        self.check_records(records)
        return self._frame(records, check_values=True)

    def _frame(self, records: Sequence, check_values: bool) -> pd.DataFrame:
        """Records that check_records passed as a frame; `check_values`: each input's type
        checks its values too (answer_records(checked=True): check_request did)."""
        frame = pd.DataFrame.from_records(list(records), columns=self.input_names)
        if check_values:  # a bad value is this request's error, not the batch's
            for feature in self.features.inputs:
                feature.check_values(frame[feature.name], self.stats[feature.name])
        return frame


def _numeric_text(value) -> bool:
    if not isinstance(value, str):
        return False
    text = value.strip()
    if text == "" or text.lower() in ("nan", "null", "none"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True
