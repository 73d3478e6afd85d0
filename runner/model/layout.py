"""What the network looks like from the data's side, derived from cache metadata.

Number and binary inputs (and a date's parts) share one float matrix, categories one
integer matrix, each text or set feature its own token matrix; that grouping keeps batches to a few
tensors however many columns the table has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from runner.config import ModelConfig
from runner.processing.features.model_side import ModelSide, model_side

# The input groups of a batch (what the loader builds and the network reads).
NUMERIC = "numeric"
CATEGORY = "category"


def text_key(name: str) -> str:
    return f"text:{name}"


def feature_columns(columns: list[str], features: list[str]) -> dict[str, list[str]]:
    """Each input's processed columns: its name, and `<name>.<part>` unless a longer input
    name claims the column."""
    owned: dict[str, list[str]] = {f: [] for f in features}
    by_length = sorted(features, key=len, reverse=True)
    for column in columns:
        for feature in by_length:
            if column == feature or column.startswith(feature + "."):
                owned[feature].append(column)
                break
    return {f: c for f, c in owned.items() if c}


@dataclass
class OutputSpec:
    name: str
    type: str
    size: int  # logits per row
    labels: list[str] = field(default_factory=list)  # class labels (binary: [negative, positive])
    # A binary output's decision: the positive class above this probability
    # (model.decision_threshold; the one picked on validation is in the saved meta.json).
    threshold: float = 0.5
    class_weights: list[float] | None = None  # each class's in the loss (model.class_weights)

    @property
    def threshold_logit(self) -> float:
        return math.log(self.threshold / (1 - self.threshold))

    @property
    def head(self) -> ModelSide:
        """What the output's type means to the model: loss, metrics, decoding (features/model_side/)."""
        return model_side(self.type)


@dataclass
class Layout:
    numeric: list[str]
    categories: list[tuple[str, int, int]]  # name, vocabulary size, embedding size
    texts: list[tuple[str, int, int]]  # name, token ids (vocabulary or buckets), embedding size
    outputs: list[OutputSpec]
    # Text features whose id 1 is a trained unknown token (a fitted vocabulary): training
    # replaces some of their tokens by it (model.token_dropout).
    unknown_token_texts: list[str] = field(default_factory=list)
    # Per numeric column, its quantile bin edges in the normalized space (number inputs
    # preprocessed since they were kept); [] where there are none (flags, a date's parts).
    bin_edges: list[list[float]] = field(default_factory=list)
    # Per vocabulary text, each vocabulary token's training count (ids 2, 3, ... in order).
    token_counts: dict[str, list[int] | None] = field(default_factory=dict)
    train_rows: int | None = None  # the training split's (model.ensemble_size=null reads it)

    @classmethod
    def from_meta(cls, meta: dict, model: ModelConfig) -> Layout:
        numeric, categories, texts, outputs, unknown, edges = [], [], [], [], [], []
        counts: dict[str, list[int] | None] = {}
        for name in meta["input_features"]:
            info = meta["features"][name]
            columns = model_side(info["type"]).input_columns(name, info["stats"])
            for column, column_edges in columns.numeric:
                numeric.append(column)
                edges.append(column_edges)
            if columns.category_ids is not None:
                embedding = model.embedding_of(name, category=True)
                categories.append((name, columns.category_ids, embedding))
            if columns.token_ids is not None:
                embedding = model.embedding_of(name, category=False)
                texts.append((name, columns.token_ids, embedding))
            if columns.unknown_token:
                unknown.append(name)
                counts[name] = columns.token_counts
        for name in meta["output_features"]:
            info = meta["features"][name]
            head, stats = model_side(info["type"]), info["stats"]
            labels, shares = head.labels(stats), head.class_shares(stats)
            spec = OutputSpec(name, info["type"], head.size(stats), labels)
            if shares is not None:
                spec.class_weights = model.class_weights_of(labels, shares)
            decided = meta.get("decisions", {}).get(name, {}).get("threshold")
            if decided is not None:
                spec.threshold = float(decided)
            elif model.decision_threshold != "auto":
                spec.threshold = float(model.decision_threshold)
            outputs.append(spec)
        train_rows = meta.get("rows", {}).get("train")
        return cls(numeric, categories, texts, outputs, unknown, edges, counts, train_rows)
