"""Feature types: how each one is fitted on the training split and transformed.

`base` holds the contract every type follows (fitting is a map-reduce over partitions, then
one `transform` per partition, whatever the engine); each type lives in a module of its own
(`number`, `category`, `binary`, `text`, `sets`, `date`, `vector`), `registry` names them, and
`feature_set` validates, fits and applies the configured features together. A new type is a
module plus one line in `registry`.
"""

from runner.processing.columns import (
    DATE_CYCLES,
    ROW_ID,
    component_columns,
    components_of,
    date_columns,
    missing_column,
    score_column,
    vector_columns,
)
from runner.processing.features.base import (
    PREPROCESSING_VERSION,
    UNKNOWN_TOKEN,
    Feature,
    as_strings,
    numbers_from_text,
)
from runner.processing.features.feature_set import (
    FeatureSet,
    automatic_choices,
    combine_partials,
    fit_partial,
    transform_columns,
    transform_frame,
)
from runner.processing.features.number import BIN_EDGES
from runner.processing.features.registry import FEATURE_TYPES, build_feature
from runner.processing.features.sets import SetFeature
from runner.processing.features.text import TextFeature

__all__ = [
    "BIN_EDGES",
    "DATE_CYCLES",
    "FEATURE_TYPES",
    "PREPROCESSING_VERSION",
    "ROW_ID",
    "UNKNOWN_TOKEN",
    "Feature",
    "FeatureSet",
    "SetFeature",
    "TextFeature",
    "as_strings",
    "automatic_choices",
    "build_feature",
    "combine_partials",
    "component_columns",
    "components_of",
    "score_column",
    "date_columns",
    "fit_partial",
    "missing_column",
    "numbers_from_text",
    "transform_columns",
    "transform_frame",
    "vector_columns",
]
