"""Text features: words and word pairs as ids of a vocabulary fitted on the training split, and
the text's TF-IDF reduced to a few components fitted on the training split's sample."""

from __future__ import annotations

import base64
import zlib
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import scipy.sparse as sp

from runner.errors import UserError
from runner.processing.columns import (
    FIRST_TOKEN_ID,
    component_columns,
    score_column,
)
from runner.processing.features import text_score
from runner.processing.features.base import (
    Feature,
    bottom_k_sample,
    bounded_counts,
    merged_sample,
    merged_vocabulary,
    vocab_index,
)
from runner.processing.features.number import BIN_EDGES, bin_edges

if TYPE_CHECKING:
    from runner.processing.features.sampled_column import Inferred, SampledColumn

# Terms (the most frequent vocabulary tokens) the components are fitted on: a cap on the
# basis that travels in the statistics (terms x components float32).
COMPONENT_TERMS = 10000
# `components: auto`: this many from AUTO_MIN_ROWS training rows up, none below. Measured on
# the suite's film titles cut to fewer rows, they cost R2 up to 20k training rows (-0.022 at
# 5.6k, -0.014 at 20k) and gained at 41k (+0.0075); the small text tables lost with them too.
AUTO_COMPONENTS = 64
AUTO_MIN_ROWS = 30000
SAMPLE_CHARS_PER_TOKEN = 16  # the sample keeps 16 x max_tokens characters of each text
# A component whose singular value is below this share of the first carries only rounding
# noise (the sample's TF-IDF has a lower rank): z-scoring it would blow new texts up.
RANK_TOLERANCE = 1e-6


class TextFeature(Feature):
    """Words and adjacent word pairs (`ngrams: 2`; pairs carry what single words cannot: "not
    good") as ids of a vocabulary fitted on the training split: the tokens seen at least
    `min_count` times, at most `max_vocab_size` of them, most frequent first. Id 0 is padding,
    1 the unknown token: every token outside the vocabulary, and a text with no known token
    at all (an empty one too), so a text of words never seen in training encodes exactly as an
    empty text, through an embedding that training did see (rare words, empty cells and token
    dropout train it). `encoding: hashing` keeps the older stateless variant (tokens hashed
    into `num_buckets`, no fitting): a word never seen in training then lands in a bucket whose
    embedding was never trained.

    Beside the ids, `components` numbers per row (vocabulary encoding only): the text's TF-IDF
    over the vocabulary's most frequent tokens, projected on its leading singular vectors (a
    truncated SVD, as latent semantic analysis does) and z-scored, all fitted on the training
    split's shared sample. They carry what a mean of embeddings learns slowly from rare words,
    which token dropout mostly hides (language, genre, series in film titles). `auto` (the
    default) takes 64 from 30000 training rows up and none below, where they cost accuracy
    (docs/accuracy.md); a count or 0 overrides it. A text with none of the basis' tokens (an
    empty one, or one of words never seen in training) has a zero TF-IDF, so all such texts get
    the same components.

    And `target_score` (vocabulary encoding only; for a number or binary (first) output):
    one more number per row, the training split's mean target plus the smoothed deviations of
    the text's words from it, scored out of fold for the training rows
    (runner/processing/features/text_score.py). `auto`, the default, takes it for short texts
    (at most 32 distinct vocabulary words per row on average), where it gained; `true` for any,
    `false` never."""

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
        "components": "auto",
        "target_score": "auto",
    }
    FIRST_ID = FIRST_TOKEN_ID  # 0: padding, 1: unknown

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
        self.options["components"] = self._component_option(cfg)
        option = self.options["target_score"]
        if not (isinstance(option, bool) or option == "auto"):  # 0 and 1 are not true/false
            raise UserError(
                f"text feature '{self.name}' has target_score {self.options['target_score']!r}; "
                "use auto, true or false"
            )
        self._basis_cache: tuple[str, np.ndarray, np.ndarray] | None = None
        self._score_cache: tuple | None = None
        self.target: Feature | None = None  # the first output (FeatureSet sets it)

    @property
    def target_type(self) -> str | None:
        return self.target.type_name if self.target is not None else None

    def set_target(self, target: Feature) -> None:
        """The output the target score is fitted on; `true` needs one it scores."""
        self.target = target
        target_type = target.type_name
        option = self.options["target_score"]
        if option is True and target_type not in text_score.TARGET_TYPES:
            raise UserError(
                f"text feature '{self.name}' has target_score true, but the output is a "
                f"{target_type}; it scores a number or binary output (set target_score: false)"
            )
        if option is True and self.options["encoding"] == "hashing":
            raise UserError(
                f"text feature '{self.name}' has target_score true with encoding hashing; "
                "it needs encoding: vocabulary (or set target_score: false)"
            )

    @property
    def scores_target(self) -> bool:
        return (
            self.options["encoding"] == "vocabulary"
            and self.options["target_score"] is not False
            and self.target_type in text_score.TARGET_TYPES
        )

    def _component_option(self, cfg: dict) -> int | str:
        """`auto`, or a count of 0 or more (written as a number or a string of one)."""
        components = self.options["components"]
        if components == "auto":
            return components
        text = str(components).strip()
        # Digits only, written plainly ("64", not "064", "+64", "64.0" or True).
        if isinstance(components, bool) or not text.isdecimal() or str(int(text)) != text:
            raise UserError(
                f"text feature '{self.name}' has components {components!r}; use auto, 0 (none) "
                "or a positive count"
            )
        count = int(text)
        given = (cfg.get("preprocessing") or {}).get("components")
        if count and given is not None and self.options["encoding"] == "hashing":
            raise UserError(
                f"text feature '{self.name}' has components {count} with encoding hashing; "
                "components need encoding: vocabulary (or set components: 0)"
            )
        return count

    @property
    def _wants_components(self) -> bool:
        return self.options["encoding"] == "vocabulary" and self.options["components"] != 0

    def _components_for(self, rows: int) -> tuple[int, str | None]:
        """(how many components, the reason when `auto` chose)."""
        if self.options["components"] != "auto":
            return int(self.options["components"]), None
        if rows >= AUTO_MIN_ROWS:
            return AUTO_COMPONENTS, f"{rows} training rows, at least the {AUTO_MIN_ROWS} they need"
        return 0, (
            f"none: {rows} training rows, fewer than the {AUTO_MIN_ROWS} they need (on fewer "
            "they cost accuracy: docs/accuracy.md)"
        )

    def _words(self, series: pd.Series, max_tokens: int) -> list[list[str]]:
        """Each row's first max_tokens words: what the vocabulary's unigrams and the target
        score read (tokenized once per partition for both)."""
        text = series.fillna("").astype(str)
        if self.options["lowercase"]:
            text = text.str.lower()
        return [tokens[:max_tokens] for tokens in text.str.findall(r"\w+").tolist()]

    @staticmethod
    def _with_ngrams(words: list[list[str]], ngrams: int) -> list[list[str]]:
        if ngrams == 2:
            return [t + [f"{a} {b}" for a, b in zip(t, t[1:], strict=False)] for t in words]
        return words

    def _tokens(self, series: pd.Series, max_tokens: int, ngrams: int) -> list[list[str]]:
        return self._with_ngrams(self._words(series, max_tokens), ngrams)

    def partial_stats(self, series, row_ids, words: list[list[str]] | None = None):
        """`words`: the series' _words, when the caller has them already."""
        if self.options["encoding"] == "hashing":
            return {}
        if words is None:
            words = self._words(series, int(self.options["max_tokens"]))
        tokens = self._with_ngrams(words, int(self.options["ngrams"]))
        counts: Counter = Counter(t for row in tokens for t in row)
        stats: dict = {"counts": bounded_counts(counts, self.options["max_vocab_size"])}
        if self._wants_components or self.scores_target:
            stats["rows"] = len(series)
            # Cut to about max_tokens words (the transform reads no more): what travels to the
            # driver stays bounded per row.
            cut = SAMPLE_CHARS_PER_TOKEN * int(self.options["max_tokens"])
            texts = series.fillna("").astype(str).str.slice(0, cut)
            stats["sample"] = bottom_k_sample(texts.to_numpy(dtype=object), row_ids)
        return stats

    def partial_stats_of(self, frame: pd.DataFrame, row_ids: np.ndarray) -> dict:
        if not self.scores_target:
            return self.partial_stats(frame[self.name], row_ids)
        assert self.target is not None
        return self.partial_stats_and_score(frame[self.name], row_ids, frame[self.target.name])

    def partial_stats_and_score(self, series: pd.Series, row_ids, target: pd.Series) -> dict:
        """partial_stats, with the target score's statistics of the partition (its words'
        targets, per fold) under "score"."""
        assert self.target_type is not None
        words = self._words(series, int(self.options["max_tokens"]))
        stats = self.partial_stats(series, row_ids, words)
        stats["score"] = text_score.partial_stats(words, target, self.target_type)
        # The words the counts keep (all of them, unless bounded_counts cut them) keep their
        # scores: what travels stays bounded the same way.
        kept = stats["counts"]
        stats["score"]["words"] = {w: e for w, e in stats["score"]["words"].items() if w in kept}
        return stats

    def combine(self, partials):
        shape = {
            "max_tokens": int(self.options["max_tokens"]),
            "ngrams": int(self.options["ngrams"]),
        }
        if self.options["encoding"] == "hashing":
            return {"num_buckets": int(self.options["num_buckets"]), **shape}
        vocab, counts = merged_vocabulary(partials, self.options, with_counts=True)
        # Counts travel with the vocabulary: the model drops rare tokens more often.
        stats = {"vocab": vocab, "vocab_counts": counts, **shape}
        if self._wants_components:
            count, reason = self._components_for(sum(p["rows"] for p in partials))
            texts = pd.Series(merged_sample(partials, dtype=object), dtype=object)
            fitted = self._fit_components(texts, stats, count) if count else None
            if fitted:
                stats["components"] = fitted
            elif count:
                reason = "none: the training sample's text has too few distinct tokens"
            if reason:
                stats["components_reason"] = reason
        if self.scores_target and all("score" in p for p in partials):
            assert self.target_type is not None
            scored = [p["score"] for p in partials]
            keys = self._target_keys(scored)
            fitted = text_score.combine(scored, vocab, keys)
            if fitted and self.target_type == "binary":
                fitted["positive"] = keys[0] if keys else None
            words = fitted["words_per_row"] if fitted else 0.0
            if fitted and self.options["target_score"] == "auto":
                limit = text_score.AUTO_MAX_WORDS_PER_ROW
                if words > limit:
                    fitted = None
                    stats["score_reason"] = (
                        f"none: {words:.1f} vocabulary words per row on average, more than the "
                        f"{limit:g} it helps with (docs/accuracy.md)"
                    )
                else:
                    stats["score_reason"] = f"{words:.1f} vocabulary words per row on average"
            if fitted:
                texts = pd.Series(merged_sample(partials, dtype=object), dtype=object)
                stats["score"] = self._scale_score(fitted, texts)
        return stats

    def _target_keys(self, scored: list[dict]) -> list[str]:
        """Whose sums make the target: a number's value; a binary output's positive class, its
        spellings as the output's own fit reads them (yes and Yes are one class)."""
        if self.target_type == "number":
            return [""]
        assert self.target is not None
        counts = text_score.spelling_counts(scored)
        return list(self.target.combine([{"counts": counts}])["positive"])

    def _scale_score(self, fitted: dict, sample: pd.Series) -> dict:
        """The score z-scored, with quantile bin edges, as a number input gets them: both from
        the training sample's out-of-fold scores, the values training rows are given."""
        # Never empty: a fitted score had a training row with a target, and the sample holds
        # every training row up to its size.
        raw = self._raw_scores(sample, fitted, np.ones(len(sample), dtype=bool))
        std = float(raw.std())
        fitted["mean"] = float(raw.mean())
        fitted["std"] = std if std > 0 else 1.0
        fitted["sample_rows"] = len(raw)
        scaled = (raw - fitted["mean"]) / fitted["std"]
        fitted["bin_edges"] = np.unique(bin_edges(scaled, BIN_EDGES)).tolist()
        return fitted

    def _raw_scores(self, series: pd.Series, fitted: dict, training) -> np.ndarray:
        return self._scores_of(
            self._words(series, int(self.options["max_tokens"])), fitted, training
        )

    def _scores_of(self, words: list[list[str]], fitted: dict, training) -> np.ndarray:
        cached = self._score_cache
        if cached is None or cached[0] is not fitted["sums"]:
            index = pd.Index(fitted["words"], dtype=object)
            cached = self._score_cache = (fitted["sums"], index, text_score.deviations(fitted))
        return text_score.raw_scores(words, fitted, cached[1], cached[2], training)

    def _fit_components(self, texts: pd.Series, stats: dict, count: int) -> dict | None:
        """TF-IDF of the sample (smoothed idf, rows of unit length, as scikit-learn's
        TfidfVectorizer) reduced by a truncated SVD to at most `count` components, fewer where
        the sample's TF-IDF has a lower rank; None when nothing is left."""
        from sklearn.utils.extmath import randomized_svd

        terms = min(len(stats["vocab"]), COMPONENT_TERMS)
        k = min(count, terms - 1, len(texts) - 1)
        if k < 1:
            return None
        frequencies = _term_frequencies(*self._ids(texts, stats), terms)
        document_frequency = np.bincount(frequencies[1], minlength=terms)
        # float32, as stored: the sample's projections below are the transform's exactly.
        idf = (np.log((1 + len(texts)) / (1 + document_frequency)) + 1.0).astype(np.float32)
        weighted = _unit_tfidf(frequencies, idf, len(texts))
        # A fixed random state: the same sample gives the same basis in every processor.
        _, singular, vt = randomized_svd(weighted, k, n_iter=5, random_state=0)
        kept = singular > singular[0] * RANK_TOLERANCE if singular[0] > 0 else singular > 0
        if not kept.any():
            return None
        basis = vt[kept].T.astype(np.float32)
        projected = weighted @ basis.astype(np.float64)
        std = projected.std(axis=0)
        return {  # "terms": the basis' rows, vocabulary ids 2 .. terms + 1
            "terms": terms,
            "rows": len(texts),
            "idf": _pack(idf),
            "basis": _pack(basis),
            "mean": projected.mean(axis=0).tolist(),
            "std": np.where(std > 0, std, 1.0).tolist(),
        }

    def _project(self, ids: np.ndarray, lengths: np.ndarray, stats: dict) -> np.ndarray:
        """Rows x components float32: each row's TF-IDF on the fitted basis, z-scored."""
        fitted = stats["components"]
        idf, basis = self._basis(fitted)
        frequencies = _term_frequencies(ids, lengths, int(fitted["terms"]))
        projected = _unit_tfidf(frequencies, idf, len(lengths)) @ basis
        mean, std = np.asarray(fitted["mean"]), np.asarray(fitted["std"])
        return ((projected - mean) / std).astype(np.float32)

    def _basis(self, fitted: dict) -> tuple[np.ndarray, np.ndarray]:
        """(idf, basis) decoded once per fitted statistics: a server transforms many small
        frames with the same ones."""
        cached = self._basis_cache
        if cached is None or cached[0] is not fitted["basis"]:
            terms = int(fitted["terms"])
            basis = _unpack(fitted["basis"]).reshape(terms, -1).astype(np.float64)
            idf = _unpack(fitted["idf"]).astype(np.float64)
            cached = self._basis_cache = (fitted["basis"], idf, basis)
        return cached[1], cached[2]

    def _ids(self, series: pd.Series, stats: dict) -> tuple[np.ndarray, np.ndarray]:
        return self._ids_of(
            self._tokens(series, stats["max_tokens"], stats.get("ngrams", 1)), stats
        )

    def _ids_of(self, token_lists: list[list[str]], stats: dict) -> tuple[np.ndarray, np.ndarray]:
        """(flat vocabulary ids, tokens per row): 1 for a token outside the vocabulary; an empty
        text has no tokens here."""
        lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int32, count=len(token_lists))
        flat = [tok for tokens in token_lists for tok in tokens]
        if not flat:
            return np.zeros(0, dtype=np.int32), lengths
        codes, uniques = pd.factorize(pd.Series(flat, dtype=object))
        if "vocab" in stats:
            index = vocab_index(self, stats["vocab"])
            id_of = index.get_indexer(uniques.to_numpy(dtype=object)).astype(np.int32)
            id_of = np.where(id_of >= 0, id_of + self.FIRST_ID, 1).astype(np.int32)
        else:  # hashing: bucket 0 is padding, so hashed ids are 1..num_buckets-1
            id_of = np.array(
                [zlib.crc32(u.encode()) % (stats["num_buckets"] - 1) + 1 for u in uniques],
                dtype=np.int32,
            )
        return id_of[codes], lengths

    def transform_split(self, series, stats, row_ids, training):
        return self.transform(series, stats, row_ids, training)

    def transform(self, series, stats, row_ids, training: np.ndarray | None = None):
        """`training`: the rows of the training split (scored out of fold); None for rows
        that are not (a Predictor's, a server's)."""
        words = self._words(series, stats["max_tokens"])  # the score's too: tokenized once
        ids, counts = self._ids_of(self._with_ngrams(words, stats.get("ngrams", 1)), stats)
        keep = np.ones(len(counts), dtype=bool)
        if "vocab" not in stats:
            return list_column(ids, counts, series.index), keep
        # An empty text is one unknown token, so that it encodes as a text of words never seen
        # in training (their mean is that token too).
        empty = counts == 0
        starts = np.cumsum(counts) - counts
        values = np.insert(ids, starts[empty], 1).astype(np.int32)
        lengths = np.where(empty, 1, counts).astype(np.int32)
        tokens = list_column(values, lengths, series.index)
        if "components" not in stats and "score" not in stats:
            return tokens, keep
        columns = {self.name: tokens}
        if "components" in stats:
            projected = self._project(ids, counts, stats)
            for i, column in enumerate(component_columns(self.name, projected.shape[1])):
                columns[column] = projected[:, i]
        if "score" in stats:
            fitted = stats["score"]
            scaled = (self._scores_of(words, fitted, training) - fitted["mean"]) / fitted["std"]
            columns[score_column(self.name)] = scaled.astype(np.float32)
        return columns, keep


def _term_frequencies(ids: np.ndarray, lengths: np.ndarray, terms: int):
    """(row, term, count) of each distinct vocabulary token among the first `terms` (the most
    frequent) in each row, sorted by row and term."""
    rows = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    columns = ids.astype(np.int64) - TextFeature.FIRST_ID
    known = (columns >= 0) & (columns < terms)
    keys, counts = np.unique(rows[known] * terms + columns[known], return_counts=True)
    return keys // terms, keys % terms, counts, terms


def _unit_tfidf(frequencies, idf: np.ndarray, rows: int) -> sp.csr_matrix:
    """Rows x terms TF-IDF (raw counts times idf), each row of unit length (as scikit-learn's
    TfidfVectorizer); a row without a counted token stays zero."""
    row, column, count, terms = frequencies
    weight = count * idf[column].astype(np.float64)
    norm = np.sqrt(np.bincount(row, weights=weight * weight, minlength=rows))
    weight = weight / norm[row]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=rows))])
    return sp.csr_matrix((weight, column, indptr), shape=(rows, terms))


def _pack(array: np.ndarray) -> str:
    """A float32 array as base64 (a JSON string a tenth the size of a list of numbers)."""
    return base64.b64encode(np.ascontiguousarray(array, dtype="<f4").tobytes()).decode("ascii")


def _unpack(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4")


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


# -- inference rules (run in order by runner.processing.type_inference) ---------------------------

# A column of strings whose values average at least this many words is free text.
TEXT_WORDS = 3.0
# A string column with more distinct values than this share of the rows, made of several
# words, is text rather than a category.
TEXT_SHARE = 0.5


def infer_free_text(column: SampledColumn) -> Inferred | None:
    words, share = column.words.mean(), column.distinct_share
    if words >= TEXT_WORDS or (share > TEXT_SHARE and words > 1.5):
        return column.decided(
            TextFeature.type_name, f"free text: {words:.1f} words a value, {share:.0%} distinct"
        )
    return None
