"""What the network looks like from the data's side, derived from cache metadata.

Number and binary inputs (and a date's parts) share one float matrix, categories one
integer matrix, each text or set feature its own token matrix; that grouping keeps batches to a few
tensors however many columns the table has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.config import ModelConfig
from runner.processing.columns import (
    FIRST_TOKEN_ID,
    component_columns,
    components_of,
    date_columns,
    missing_column,
    score_column,
    text_table_size,
    vector_columns,
)

# The input groups of a batch (what the loader builds and the network reads).
NUMERIC = "numeric"
CATEGORY = "category"


def text_key(name: str) -> str:
    return f"text:{name}"


@dataclass
class OutputSpec:
    name: str
    type: str
    size: int  # logits per row
    labels: list[str] = field(default_factory=list)  # class labels (binary: [negative, positive])


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
            embedding = model.embedding_of(name, category=info["type"] == "category")
            if info["type"] in ("number", "binary"):
                numeric.append(name)
                edges.append(list(info["stats"].get("bin_edges", [])))
                if info["stats"].get("missing_flag"):
                    numeric.append(missing_column(name))
                    edges.append([])
            elif info["type"] in ("date", "vector"):  # several numeric columns, no bins
                columns = (
                    date_columns(name)
                    if info["type"] == "date"
                    else vector_columns(name, info["stats"]["length"])
                )
                numeric.extend(columns)
                edges.extend([] for _ in columns)
            elif info["type"] == "category":
                categories.append((name, len(info["stats"]["vocab"]) + 1, embedding))
            elif info["type"] == "text":
                texts.append((name, text_table_size(info["stats"]), embedding))
                # Its TF-IDF components join the numbers (z-scored already; no bins).
                columns = component_columns(name, components_of(info["stats"]))
                numeric.extend(columns)
                edges.extend([] for _ in columns)
                if "score" in info["stats"]:  # its target score: a number with its bins
                    numeric.append(score_column(name))
                    edges.append(list(info["stats"]["score"]["bin_edges"]))
                if "vocab" in info["stats"]:
                    unknown.append(name)
                    counts[name] = info["stats"].get("vocab_counts")
            elif info["type"] == "set":  # ids 0 (padding) and 1 (unseen) before the vocabulary
                texts.append((name, len(info["stats"]["vocab"]) + FIRST_TOKEN_ID, embedding))
        for name in meta["output_features"]:
            info = meta["features"][name]
            stats = info["stats"]
            if info["type"] == "binary":
                outputs.append(OutputSpec(name, "binary", 1, stats["labels"]))
            elif info["type"] == "category":
                outputs.append(
                    OutputSpec(name, "category", len(stats["vocab"]), list(stats["vocab"]))
                )
            elif info["type"] == "set":  # multi-label: one logit per member
                outputs.append(OutputSpec(name, "set", len(stats["vocab"]), list(stats["vocab"])))
            else:
                outputs.append(OutputSpec(name, "number", 1))
        train_rows = meta.get("rows", {}).get("train")
        return cls(numeric, categories, texts, outputs, unknown, edges, counts, train_rows)
