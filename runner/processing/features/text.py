"""Text features: words and word pairs as ids of a vocabulary fitted on the training split."""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np
import pandas as pd
import pyarrow as pa

from runner.errors import UserError
from runner.processing.features.base import (
    Feature,
    merged_vocabulary,
    vocab_index,
)


class TextFeature(Feature):
    """Words and adjacent word pairs (`ngrams: 2`; pairs carry what single words cannot: "not
    good") as ids of a vocabulary fitted on the training split: the tokens seen at least
    `min_count` times, at most `max_vocab_size` of them, most frequent first. Id 0 is padding,
    1 the unknown token: every token outside the vocabulary, and a text with no known token
    at all (an empty one too), so a text of words never seen in training encodes exactly as an
    empty text, through an embedding that training did see (rare words, empty cells and token
    dropout train it). `encoding: hashing` keeps the older stateless variant (tokens hashed
    into `num_buckets`, no fitting): a word never seen in training then lands in a bucket whose
    embedding was never trained."""

    type_name = "text"
    output_allowed = False
    # Measured on a review table (accuracy suite): 32 tokens lost most of the signal to
    # truncation (ROC AUC 0.78 -> 0.86 at 256).
    defaults = {
        "encoding": "vocabulary",
        "max_tokens": 256,
        "min_count": 2,
        "max_vocab_size": 50000,
        "num_buckets": 262144,
        "lowercase": True,
        "ngrams": 2,
    }
    FIRST_ID = 2  # 0: padding, 1: unknown

    def __init__(self, cfg: dict, role: str):
        super().__init__(cfg, role)
        if self.options["ngrams"] not in (1, 2):
            raise UserError(
                f"text feature '{self.name}' has ngrams {self.options['ngrams']}; use 1 or 2"
            )
        if self.options["encoding"] not in ("vocabulary", "hashing"):
            raise UserError(
                f"text feature '{self.name}' has encoding {self.options['encoding']!r}; "
                "use vocabulary or hashing"
            )
        for key in ("min_count", "max_vocab_size", "max_tokens"):
            if int(self.options[key]) < 1:
                raise UserError(f"text feature '{self.name}' has {key} < 1; use at least 1")

    def _tokens(self, series: pd.Series, max_tokens: int, ngrams: int) -> list[list[str]]:
        text = series.fillna("").astype(str)
        if self.options["lowercase"]:
            text = text.str.lower()
        token_lists = [tokens[:max_tokens] for tokens in text.str.findall(r"\w+").tolist()]
        if ngrams == 2:
            token_lists = [
                t + [f"{a} {b}" for a, b in zip(t, t[1:], strict=False)] for t in token_lists
            ]
        return token_lists

    def partial_stats(self, series, row_ids):
        if self.options["encoding"] == "hashing":
            return {}
        tokens = self._tokens(series, int(self.options["max_tokens"]), int(self.options["ngrams"]))
        counts: Counter = Counter(t for row in tokens for t in row)
        return {"counts": dict(counts)}

    def combine(self, partials):
        shape = {
            "max_tokens": int(self.options["max_tokens"]),
            "ngrams": int(self.options["ngrams"]),
        }
        if self.options["encoding"] == "hashing":
            return {"num_buckets": int(self.options["num_buckets"]), **shape}
        vocab, counts = merged_vocabulary(partials, self.options, with_counts=True)
        # Counts travel with the vocabulary: the model drops rare tokens more often.
        return {"vocab": vocab, "vocab_counts": counts, **shape}

    @staticmethod
    def size(stats: dict) -> int:
        """Rows of the embedding table: padding, unknown and the vocabulary (or the buckets)."""
        if "vocab" in stats:
            return len(stats["vocab"]) + TextFeature.FIRST_ID
        return int(stats["num_buckets"])

    def transform(self, series, stats, row_ids):
        token_lists = self._tokens(series, stats["max_tokens"], stats.get("ngrams", 1))
        lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int32, count=len(token_lists))
        flat = [tok for tokens in token_lists for tok in tokens]
        codes, uniques = pd.factorize(pd.Series(flat, dtype=object))
        if "vocab" in stats:
            # Tokens outside the vocabulary are 1; an empty text is one unknown token, so that it
            # encodes as a text of words never seen in training (their mean is that token too).
            index = vocab_index(self, stats["vocab"])
            id_of = index.get_indexer(uniques.to_numpy(dtype=object)).astype(np.int32)
            id_of = np.where(id_of >= 0, id_of + self.FIRST_ID, 1).astype(np.int32)
            values = id_of[codes] if len(flat) else np.zeros(0, dtype=np.int32)
            empty = lengths == 0
            starts = np.cumsum(lengths) - lengths
            values = np.insert(values, starts[empty], 1).astype(np.int32)
            lengths = np.where(empty, 1, lengths).astype(np.int32)
            return list_column(values, lengths, series.index), np.ones(len(lengths), dtype=bool)
        # Hashing: bucket 0 is padding, so hashed ids are 1..num_buckets-1.
        bucket_of = np.array(
            [zlib.crc32(u.encode()) % (stats["num_buckets"] - 1) + 1 for u in uniques],
            dtype=np.int32,
        )
        values = bucket_of[codes] if len(flat) else np.zeros(0, dtype=np.int32)
        return list_column(values, lengths, series.index), np.ones(len(lengths), dtype=bool)


def list_column(values: np.ndarray, lengths: np.ndarray, index) -> pd.Series:
    """Flat int32 ids and each row's count -> a list<int32> column (text and set features)."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    array = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=pa.int32()))
    return pd.Series(array, dtype=pd.ArrowDtype(array.type), index=index)


def token_lists(ids: list[np.ndarray], index) -> pd.Series:
    """Per-row int32 id arrays -> a list<int32> column."""
    lengths = np.fromiter((len(i) for i in ids), dtype=np.int32, count=len(ids))
    values = np.concatenate(ids).astype(np.int32) if len(ids) else np.zeros(0, dtype=np.int32)
    return list_column(values, lengths, index)
