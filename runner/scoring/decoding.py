"""From logits to metrics and to readable predictions, per output type."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from runner.model.layout import Layout
from runner.processing import scaling
from runner.processing.features.model_side import model_side
from runner.scoring import metrics

if TYPE_CHECKING:
    import pandas as pd


class Decoders:
    """Output features' fitted statistics and options, from metadata, to map model outputs back
    to raw labels and units. Numpy only (runner.processing.scaling): a training worker or a
    scorer never imports the feature code, and pandas with it, to decode (a fresh Ray actor
    saves 0.3-0.4 s of imports before its first step)."""

    def __init__(self, meta: dict):
        outputs = {name: meta["features"][name] for name in meta["output_features"]}
        self.types = {name: info["type"] for name, info in outputs.items()}
        self.stats = {name: info["stats"] for name, info in outputs.items()}
        self.options = {name: info["preprocessing"] for name, info in outputs.items()}

    def _normalization(self, name: str) -> str | None:
        return scaling.normalization_in_use(
            self.stats[name], self.options[name].get("normalization")
        )

    def normalizer(self, name: str):
        """Raw units -> the normalized values a number output trains on."""
        mode = self._normalization(name)
        return lambda v: scaling.normalize(v, self.stats[name], mode)

    def denormalizer(self, name: str):
        """Normalized values -> raw units (a number output's targets); None for other types."""
        if not model_side(self.types[name]).normalized:
            return None
        mode = self._normalization(name)
        return lambda v: scaling.denormalize(v, self.stats[name], mode)

    def predicted(self, name: str):
        """A number output's predictions in raw units, kept inside the training target's range
        as trees' are: a network extrapolates where the training data never went."""
        denormalize = self.denormalizer(name)
        if denormalize is None:
            return None
        low, high = self.stats[name]["min"], self.stats[name]["max"]
        return lambda v: np.clip(denormalize(v), low, high)


def constant_logits(layout: Layout, decoders: Decoders, rows: int) -> dict[str, np.ndarray]:
    """What the baseline predicts for every row, as logits: the training split's most frequent
    class (a category's vocabulary is frequency-ranked, so class 0), no positives (binary and set;
    ROC AUC 0.5), and a number target's training mean. Scored by the same metrics as the model,
    this is the mean/majority baseline the model has to beat."""
    return {
        spec.name: np.tile(spec.head.constant_row(spec, decoders), (rows, 1))
        for spec in layout.outputs
    }


# A model beats the baseline when its main metric (R², ROC AUC, accuracy, Jaccard: all on
# a 0-1 scale) is ahead by at least this: an untrained network's near-constant predictions can
# land a hair closer to the validation mean than the training mean does.
BASELINE_MARGIN = 0.01


def baseline_check(layout: Layout, scored: dict[str, float], baseline: dict[str, float]) -> dict:
    """Per output, its main metric against the baseline's on the same split: {output: {metric,
    value, baseline, better}}. `better` is false where the model does not beat the baseline by
    BASELINE_MARGIN."""
    check = {}
    for spec in layout.outputs:
        metric = f"{spec.name}/{spec.head.metrics[0]}"
        value, reference = scored.get(metric), baseline.get(metric)
        if value is None or reference is None:
            continue
        better = bool(value >= reference + BASELINE_MARGIN) if np.isfinite(value) else False
        check[spec.name] = {
            "metric": metric,
            "value": float(value),
            "baseline": float(reference),
            "better": better,
        }
    return check


def metric_names(layout: Layout) -> list[str]:
    return ["loss"] + [f"{spec.name}/{m}" for spec in layout.outputs for m in spec.head.metrics]


def partial_metrics(
    layout: Layout,
    decoders: Decoders,
    logits: dict[str, np.ndarray],
    targets: dict[str, np.ndarray],
) -> dict[str, dict]:
    """Each output's mergeable statistics over one shard (see metrics.partial)."""
    return {
        spec.name: metrics.partial(
            spec.type,
            logits[spec.name],
            targets[spec.name],
            decoders.denormalizer(spec.name),
            decoders.predicted(spec.name),
        )
        for spec in layout.outputs
    }


def merge_metrics(layout: Layout, parts: list[dict[str, dict]]) -> dict[str, dict]:
    """The statistics of several shards (any order) as those of their union."""
    return {
        spec.name: metrics.merge(spec.type, [p[spec.name] for p in parts])
        for spec in layout.outputs
    }


def finish_metrics(layout: Layout, stats: dict[str, dict]) -> dict[str, float]:
    """{"loss": the sum of the outputs' losses, "<output>/<metric>": value, ...}."""
    values: dict[str, float] = {}
    total = 0.0
    for spec in layout.outputs:
        output_stats = stats[spec.name]
        if spec.threshold != 0.5:  # a binary output's decision (OutputSpec.threshold)
            output_stats = {**output_stats, "threshold_logit": spec.threshold_logit}
        output = metrics.finish(spec.type, output_stats)
        total += output.get("loss", 0.0)
        values.update({f"{spec.name}/{k}": v for k, v in output.items()})
    return {"loss": total, **values}


def compute_metrics(
    layout: Layout,
    decoders: Decoders,
    logits: dict[str, np.ndarray],
    targets: dict[str, np.ndarray],
) -> dict[str, float]:
    """Metrics over one set of logits and targets: the same statistics as shards merge."""
    return finish_metrics(layout, partial_metrics(layout, decoders, logits, targets))


def prediction_columns(
    layout: Layout,
    decoders: Decoders,
    logits: dict[str, np.ndarray],
    row_ids: np.ndarray,
    targets: dict[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """The raw row number ("row"), each output's prediction (in the raw labels or units), its
    probabilities, and the true value where known: a column each."""
    columns: dict[str, np.ndarray] = {"row": row_ids}
    for spec in layout.outputs:
        target = None if targets is None else targets[spec.name]
        columns.update(spec.head.prediction_columns(spec, decoders, logits[spec.name], target))
    return columns


def prediction_frame(
    layout: Layout,
    decoders: Decoders,
    logits: dict[str, np.ndarray],
    row_ids: np.ndarray,
    targets: dict[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """prediction_columns as a DataFrame: one row per input row."""
    import pandas as pd

    return pd.DataFrame(prediction_columns(layout, decoders, logits, row_ids, targets))


def answers_by_row(columns: dict[str, np.ndarray], rows: int) -> list[dict]:
    """Prediction columns as one object of plain JSON values per input row (a served answer),
    in input order; nulls for a row that is not among them (dropped by preprocessing)."""
    names = [name for name in columns if name != "row"]
    # Column by column (tolist gives Python values): a frame's to_dict took a millisecond.
    values = [[_plain(v) for v in np.asarray(columns[n]).tolist()] for n in names]
    answers = [dict.fromkeys(names) for _ in range(rows)]
    for position, *row in zip(np.asarray(columns["row"]).tolist(), *values, strict=True):
        answers[int(position)] = dict(zip(names, row, strict=True))
    return answers


def _plain(value):
    """A JSON value: a numpy scalar as Python's, a non-finite float as null."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
