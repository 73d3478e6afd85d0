"""The configured features together: validated as a set, fitted and applied partition by
partition, and the choices fitting made."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.processing.columns import ROW_ID
from runner.processing.features.base import Feature
from runner.processing.features.registry import build_feature
from runner.processing.features.text import TextFeature


def automatic_choices(meta: dict) -> list[str]:
    """One line per choice that preprocessing made from the training split (stored in meta.json
    beside the statistics it came from): a number's normalization and why, a text's vocabulary."""
    lines = []
    for name, info in meta["features"].items():
        stats = info["stats"]
        if "reason" in stats:
            lines.append(
                f"feature '{name}': normalization {stats['normalization']}: {stats['reason']}"
            )
        if info["type"] == "text" and "vocab" in stats:
            options = {**TextFeature.defaults, **info["preprocessing"]}
            lines.append(
                f"feature '{name}': vocabulary of {len(stats['vocab'])} words and word pairs "
                f"(seen at least {options['min_count']} times in training; any other is unknown)"
            )
        if info["type"] == "text" and "components" in stats:
            fitted = stats["components"]
            why = f" ({stats['components_reason']})" if "components_reason" in stats else ""
            lines.append(
                f"feature '{name}': {len(fitted['mean'])} TF-IDF components of its "
                f"{fitted['terms']} most frequent tokens, fitted on {fitted['rows']} training "
                f"rows{why}; preprocessing.components sets the count, 0 none"
            )
        if info["type"] == "text" and "score" in stats:
            fitted = stats["score"]
            target = fitted.get("positive")
            of = "the target" if target is None else f"the rate of {target!r}"
            why = f"; {stats['score_reason']}" if "score_reason" in stats else ""
            lines.append(
                f"feature '{name}': a target score ({of}: its {len(fitted['words'])} words' "
                f"smoothed means over {fitted['training_rows']} training rows, out of fold for "
                f"them{why}); preprocessing.target_score: false turns it off"
            )
        elif info["type"] == "text" and "score_reason" in stats:
            lines.append(
                f"feature '{name}': target score {stats['score_reason']}; "
                "preprocessing.target_score: true takes it"
            )
        if info["type"] == "text" and "components_reason" in stats and "components" not in stats:
            lines.append(
                f"feature '{name}': TF-IDF components {stats['components_reason']}; "
                "preprocessing.components sets a count"
            )
    return lines


class FeatureSet:
    """The configured inputs and outputs, validated together."""

    def __init__(self, input_cfgs: list[dict], output_cfgs: list[dict]):
        if not input_cfgs:
            raise UserError("model.input_features is empty; name at least one input column")
        if not output_cfgs:
            raise UserError("model.output_features is empty; name at least one target column")
        self.inputs = [build_feature(c, "input") for c in input_cfgs]
        self.outputs = [build_feature(c, "output") for c in output_cfgs]
        for feature in self.inputs:  # a text's target score reads the first output
            feature.set_target(self.outputs[0])
        names = [f.name for f in self.all]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UserError(
                f"feature '{duplicates[0]}' is declared more than once; each column may be used once"
            )

    @classmethod
    def from_meta(cls, meta: dict) -> FeatureSet:
        """The features a cache entry or saved model was built with."""

        def described(name: str) -> dict:
            info = meta["features"][name]
            return {"name": name, "type": info["type"], "preprocessing": info["preprocessing"]}

        return cls(
            [described(n) for n in meta["input_features"]],
            [described(n) for n in meta["output_features"]],
        )

    @property
    def all(self) -> list[Feature]:
        return [*self.inputs, *self.outputs]

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.all]

    def describe(self) -> list[dict]:
        return [f.describe() for f in self.all]


def fit_partial(frame: pd.DataFrame, row_ids: np.ndarray, features: FeatureSet) -> dict:
    """Statistics of one partition of training rows (a text's target score reads the first
    output's values beside its own)."""
    return {feature.name: feature.partial_stats_of(frame, row_ids) for feature in features.all}


def combine_partials(partials: list[dict], features: FeatureSet) -> dict:
    return {f.name: f.combine([p[f.name] for p in partials]) for f in features.all}


def transform_columns(
    frame: pd.DataFrame,
    row_ids: np.ndarray,
    features: list[Feature],
    stats: dict,
    training: np.ndarray | None = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Processed columns of one partition (numpy arrays, or pandas' Arrow-backed arrays for
    lists), and the mask of rows every feature keeps. `training` marks the training split's
    rows (a text's target score is out of fold for them); None: no row is (new data)."""
    columns: dict[str, Any] = {}
    keep = np.ones(len(frame), dtype=bool)
    for feature in features:
        series, feature_stats = frame[feature.name], stats[feature.name]
        values, feature_keep = feature.transform_split(series, feature_stats, row_ids, training)
        # A feature is one column, or several named ones (a date's parts).
        for name, column in (
            values if isinstance(values, dict) else {feature.name: values}
        ).items():
            columns[name] = column.array if isinstance(column, pd.Series) else column
        keep &= feature_keep
    columns[ROW_ID] = row_ids
    return columns, keep


def transform_frame(
    frame: pd.DataFrame,
    row_ids: np.ndarray,
    features: list[Feature],
    stats: dict,
    training: np.ndarray | None = None,
) -> tuple[pd.DataFrame, np.ndarray]:
    """transform_columns as a DataFrame (what the processors write to the cache)."""
    columns, keep = transform_columns(frame, row_ids, features, stats, training)
    return pd.DataFrame(columns), keep
