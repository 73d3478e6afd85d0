"""Feature types: how each one is fitted on the training split and transformed.

Fitting is a map-reduce: `partial_stats` runs on one partition of training rows
and returns a small JSON-able summary, `combine` merges the summaries into the
final statistics. pandas calls them once; Dask and Modin call `partial_stats`
per partition. `transform` maps one partition with the final statistics and is
the only code that turns raw values into model inputs, whatever the engine.
"""

from __future__ import annotations

import zlib
from collections import Counter
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from runner.errors import UserError
from runner.processing.split import uniform_from_ids

# Bump when a transform's output changes: it is part of every cache key.
PREPROCESSING_VERSION = 3

UNKNOWN_TOKEN = "<UNK>"
ROW_ID = "__row__"  # the raw row number, kept beside the processed columns
_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


# What pandas' to_numeric would read as a number (inf and nan included, any case).
_NUMBER_TEXT = r"(?i)[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|inf(?:inity)?|nan)"


def numbers_from_text(series: pd.Series) -> pd.Series:
    """Like pd.to_numeric(series, errors="coerce") (float64; NaN where a value is no number),
    without its crash: pandas 2.3 ends the process (a segmentation fault) on some strings with
    a huge exponent, such as '3e42320041052' or the hex key '3973e42320041052-100'. Only values
    that look like numbers are converted, by pyarrow."""
    text = series.astype(str).str.strip()
    looks = (text.str.fullmatch(_NUMBER_TEXT) & series.notna()).to_numpy(dtype=bool)
    values = np.full(len(series), np.nan)
    if looks.any():
        parsed = pc.cast(pa.array(text[looks].tolist(), pa.string()), pa.float64())
        values[looks] = parsed.to_numpy(zero_copy_only=False)
    return pd.Series(values, index=series.index)


def as_strings(series: pd.Series) -> pd.Series:
    """Values as strings (missing stays missing), the same for every partition and
    engine: integer-valued floats print as integers, so 3.0 from one file and 3
    from another are one category."""
    if pd.api.types.is_bool_dtype(series):
        return series.map({True: "True", False: "False"}).astype(object)
    if pd.api.types.is_float_dtype(series):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
        whole = np.isfinite(values) & (values == np.floor(values))
        out = np.where(
            whole, np.where(missing, 0, values).astype(np.int64).astype(str), values.astype(str)
        )
        return pd.Series(np.where(missing, None, out), index=series.index, dtype=object)
    if pd.api.types.is_integer_dtype(series):
        return series.astype(str).astype(object).where(series.notna(), None)
    if pd.api.types.is_string_dtype(series) and pd.api.types.infer_dtype(series, skipna=True) in (
        "string",
        "empty",
    ):
        return series.astype(object).where(series.notna(), None)
    return series.map(
        lambda v: None if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)
    ).astype(object)


class Feature:
    """One configured feature. Subclasses define the type's behaviour."""

    type_name: ClassVar[str]
    output_allowed: ClassVar[bool] = True
    # Preprocessing options and their defaults; anything else is a config error.
    defaults: ClassVar[dict[str, Any]] = {}
    missing_strategies: ClassVar[tuple[str, ...]] = ()

    def __init__(self, cfg: dict, role: str):
        self.name = cfg["name"]
        self.role = role
        self.embedding_size = cfg.get("embedding_size")
        given = dict(cfg.get("preprocessing") or {})
        unknown = sorted(set(given) - set(self.defaults))
        if unknown:
            raise UserError(
                f"{role} feature '{self.name}' ({self.type_name}) has unknown preprocessing option "
                f"'{unknown[0]}'; known options: {', '.join(sorted(self.defaults)) or 'none'}"
            )
        self.options = {**self.defaults, **given}
        strategy = self.options.get("missing_value_strategy")
        if self.missing_strategies and strategy not in self.missing_strategies:
            raise UserError(
                f"{role} feature '{self.name}' has missing_value_strategy '{strategy}'; "
                f"use one of: {', '.join(self.missing_strategies)}"
            )

    @property
    def drops_missing(self) -> bool:
        # A row without a target teaches nothing; inputs drop only when asked to.
        return self.role == "output" or self.options.get("missing_value_strategy") == "drop_row"

    def describe(self) -> dict:
        """What identifies this feature's processed data (part of the cache key)."""
        return {
            "name": self.name,
            "type": self.type_name,
            "role": self.role,
            "preprocessing": self.options,
        }

    def check_values(self, series: pd.Series, stats: dict) -> None:
        """For a request's rows (serving): raise a UserError naming the first bad value's row
        and field, so one bad request fails alone, not the batch it would have joined."""

    def partial_stats(self, series: pd.Series, row_ids: np.ndarray) -> dict:
        raise NotImplementedError

    def combine(self, partials: list[dict]) -> dict:
        raise NotImplementedError

    def transform(
        self, series: pd.Series, stats: dict, row_ids: np.ndarray
    ) -> tuple[Any, np.ndarray]:
        """(processed values, mask of rows to keep)."""
        raise NotImplementedError


class NumberFeature(Feature):
    """Numbers. The default normalization, `auto`, is decided on the training split and stored
    with its reason: an input is scaled robustly (median and interquartile range) and its
    outliers clipped smoothly (x / sqrt(1 + (x/3)^2), as RealMLP does), after a sign-kept
    log1p when it is right-skewed and never negative; an output (a regression target) is
    z-scored, in log space when it is right-skewed and never negative (prices, counts).
    Inputs also keep quantile bin edges for the piecewise-linear number encoder."""

    type_name = "number"
    defaults = {
        "missing_value_strategy": "fill_mean",
        "fill_value": 0.0,
        "normalization": "auto",
        "num_quantiles": 1000,
    }
    missing_strategies = ("fill_mean", "fill_zero", "fill_value", "drop_row")
    normalizations = ("auto", "robust", "zscore", "minmax", "log1p", "quantile", "none", None)

    def __init__(self, cfg: dict, role: str):
        super().__init__(cfg, role)
        if self.options["normalization"] not in self.normalizations:
            raise UserError(
                f"feature '{self.name}' has normalization '{self.options['normalization']}'; "
                "use auto, robust, zscore, minmax, log1p, quantile or none"
            )
        if int(self.options["num_quantiles"]) < 2:
            raise UserError(f"feature '{self.name}' has num_quantiles < 2; use at least 2")
        if role == "output" and self.options["normalization"] == "robust":
            # Smooth clipping cannot be inverted: predictions would not come back in raw units.
            raise UserError(
                f"output feature '{self.name}' has normalization 'robust', which cannot be "
                "inverted; use auto, zscore, log1p, quantile, minmax or none"
            )

    def _numeric(self, series: pd.Series, row_ids: np.ndarray) -> np.ndarray:
        if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
            return series.to_numpy(dtype=np.float64, na_value=np.nan)
        coerced = numbers_from_text(series)
        failed = coerced.isna() & series.notna()
        if failed.any():  # only the values that did not parse are looked at as text
            text = series[failed].astype(str).str.strip()
            bad = text[(text != "") & (text.str.lower() != "nan")]
            if len(bad):
                position = series.index.get_loc(bad.index[0])
                raise UserError(
                    f"number feature '{self.name}' has non-numeric value {bad.iloc[0]!r} at data row "
                    f"{int(row_ids[position]) + 1}; fix the value or declare '{self.name}' as type category"
                )
        return coerced.to_numpy(dtype=np.float64, na_value=np.nan)

    @property
    def _needs_sample(self) -> bool:
        # Inputs always (bin edges); an output only to decide or apply its transform.
        return self.role == "input" or self.options["normalization"] in ("auto", "quantile")

    def partial_stats(self, series, row_ids):
        v = self._numeric(series, row_ids)
        present = v[~np.isnan(v)]
        stats = {
            "count": int(present.size),
            "rows": len(v),
            "sum": float(present.sum()),
            "sum_sq": float(np.square(present).sum()),
            "min": float(present.min()) if present.size else None,
            "max": float(present.max()) if present.size else None,
        }
        if self.options["normalization"] == "log1p":
            logged = _signed_log1p(present)
            stats.update(log_sum=float(logged.sum()), log_sum_sq=float(np.square(logged).sum()))
        if self._needs_sample:
            stats["sample"] = _bottom_k(present, row_ids[~np.isnan(v)])
        return stats

    def combine(self, partials):
        count = _count(partials, f"number feature '{self.name}' has no values")
        mean, std = _moments(partials, "sum", "sum_sq", count)
        stats = {
            "mean": mean,
            "std": std,
            "min": min(p["min"] for p in partials if p["min"] is not None),
            "max": max(p["max"] for p in partials if p["max"] is not None),
        }
        mode = self.options["normalization"]
        sample = _merged_sample(partials) if self._needs_sample else None
        if mode == "log1p":
            stats["log_mean"], stats["log_std"] = _moments(partials, "log_sum", "log_sum_sq", count)
        elif mode == "quantile":
            stats["quantiles"] = _quantiles(sample, int(self.options["num_quantiles"]))
        elif mode in ("auto", "robust"):
            stats.update(self._decide(sample, stats["min"], mode))
        if self.role == "input":
            edges = _bin_edges(sample, BIN_EDGES)
            stats["bin_edges"] = np.unique(self.normalize(edges, stats)).tolist()
            # Missing in training: a flag column beside the filled value, so that the model can
            # tell "missing" from the fill value (trees send missing values their own way).
            rows = sum(p.get("rows", p["count"]) for p in partials)
            stats["missing_flag"] = bool(rows > count and not self.drops_missing)
        return stats

    def _decide(self, sample: np.ndarray, low: float, mode: str) -> dict:
        """`auto` and `robust` made concrete on the training split's sample, with the reason."""
        skew = _skewness(sample)
        skewed = low >= 0 and skew >= SKEW_FOR_LOG
        why = f"skewness {skew:.2f}, minimum {low:g}"
        if self.role == "output":  # a target must invert exactly: z-scored, maybe in log space
            if mode == "auto" and skewed:
                logged = _signed_log1p(sample)
                return {
                    "normalization": "log1p",
                    "log_mean": float(logged.mean()),
                    "log_std": float(logged.std()),
                    "reason": f"log1p target: right-skewed and never negative ({why})",
                }
            if mode == "auto":
                return {"normalization": "zscore", "reason": f"z-scored target ({why})"}
        log = mode == "auto" and skewed
        values = _signed_log1p(sample) if log else sample
        q1, median, q3 = np.quantile(values, [0.25, 0.5, 0.75])
        scale = (q3 - q1) / IQR_OF_NORMAL or (values.max() - values.min()) / 2 or 1.0
        reason = "robust scaling, smooth clipping"
        return {
            "normalization": "robust",
            "log": bool(log),
            "center": float(median),
            "scale": float(scale),
            "reason": f"{'log1p, ' if log else ''}{reason} ({why})",
        }

    def fill_value(self, stats: dict) -> float:
        strategy = self.options["missing_value_strategy"]
        return {"fill_mean": stats["mean"], "fill_zero": 0.0}.get(
            strategy, float(self.options["fill_value"])
        )

    def mode(self, stats: dict) -> str:
        """The normalization in use: the one `auto` picked, else the configured one."""
        return stats.get("normalization", self.options["normalization"])

    def normalize(self, v: np.ndarray, stats: dict) -> np.ndarray:
        mode = self.mode(stats)
        if mode == "robust":  # median-centred, IQR-scaled, outliers clipped smoothly
            x = _signed_log1p(v) if stats["log"] else v
            z = (x - stats["center"]) / stats["scale"]
            return z / np.sqrt(1.0 + np.square(z / SMOOTH_CLIP))
        if mode == "zscore":
            return (v - stats["mean"]) / (stats["std"] or 1.0)
        if mode == "minmax":
            return (v - stats["min"]) / ((stats["max"] - stats["min"]) or 1.0)
        if mode == "log1p":  # right-skewed values (prices, counts): z-scored in log space
            return (_signed_log1p(v) - stats["log_mean"]) / (stats["log_std"] or 1.0)
        if mode == "quantile":  # the training distribution's rank, as a uniform of unit variance
            q = np.asarray(stats["quantiles"])
            ranks = np.interp(v, q, np.linspace(0.0, 1.0, len(q)))
            return (ranks - 0.5) * np.sqrt(12.0)
        return v

    def denormalize(self, v: np.ndarray, stats: dict) -> np.ndarray:
        mode = self.mode(stats)
        if mode == "zscore":
            return v * (stats["std"] or 1.0) + stats["mean"]
        if mode == "minmax":
            return v * ((stats["max"] - stats["min"]) or 1.0) + stats["min"]
        if mode == "log1p":  # a target trained in log space is predicted in raw units
            logged = v * (stats["log_std"] or 1.0) + stats["log_mean"]
            return np.sign(logged) * np.expm1(np.minimum(np.abs(logged), 700.0))
        if mode == "quantile":
            q = np.asarray(stats["quantiles"])
            return np.interp(v / np.sqrt(12.0) + 0.5, np.linspace(0.0, 1.0, len(q)), q)
        return v

    def transform(self, series, stats, row_ids):
        v = self._numeric(series, row_ids)
        missing = np.isnan(v)
        keep = ~missing if self.drops_missing else np.ones(len(v), dtype=bool)
        v = np.where(missing, self.fill_value(stats), v)
        values = self.normalize(v, stats).astype(np.float32)
        if stats.get("missing_flag"):
            return {self.name: values, missing_column(self.name): missing.astype(np.float32)}, keep
        return values, keep


def missing_column(name: str) -> str:
    """The processed flag column of a number input that had missing values in training."""
    return f"{name}.missing"


BIN_EDGES = 33  # quantile edges kept per number input: up to 32 bins for the encoder
SKEW_FOR_LOG = 1.0  # a never-negative column this right-skewed is taken in log space
IQR_OF_NORMAL = 1.3489795  # a normal's interquartile range in standard deviations
SMOOTH_CLIP = 3.0  # robust-scaled values are squashed smoothly towards +-this


def _skewness(sample: np.ndarray) -> float:
    """Skewness of the sample winsorized at its 1st and 99th percentiles: a handful of
    outliers (which smooth clipping handles) must not decide that a column is skewed."""
    low, high = np.quantile(sample, [0.01, 0.99])
    x = np.clip(sample, low, high)
    std = x.std()
    return float(np.mean((x - x.mean()) ** 3) / std**3) if std > 0 else 0.0


def _signed_log1p(v: np.ndarray) -> np.ndarray:
    """log1p of the magnitude with the sign kept: defined for every real value."""
    return np.sign(v) * np.log1p(np.abs(v))


SAMPLE_SIZE = 20000  # values kept for quantiles
SAMPLE_SEED = 1  # of the row hash that picks them


def _bottom_k(values: np.ndarray, row_ids: np.ndarray) -> list[list[float]]:
    """The values of the SAMPLE_SIZE rows whose row-number hash is smallest, with those
    hashes: merged bottom-k samples are the bottom-k sample of the union, so the quantiles
    do not depend on how the rows were partitioned (engines cut them differently)."""
    hashes = uniform_from_ids(row_ids, SAMPLE_SEED)
    # Every number input takes this sample now (bin edges): a partition of the hashes instead
    # of a full sort (62 -> 3 ms for 700k rows), with ties at the cut kept as a full stable
    # sort would keep them, so the sample is exactly the same.
    candidates = np.arange(len(hashes))
    if len(hashes) > SAMPLE_SIZE:
        kth = np.partition(hashes, SAMPLE_SIZE - 1)[SAMPLE_SIZE - 1]
        candidates = np.flatnonzero(hashes <= kth)
    order = candidates[np.argsort(hashes[candidates], kind="stable")][:SAMPLE_SIZE]
    return [hashes[order].tolist(), values[order].tolist()]


def _merged_sample(partials: list[dict]) -> np.ndarray:
    """The bottom-k sample of the union of the partitions' samples, in hash order."""
    hashes = np.concatenate([np.asarray(p["sample"][0], dtype=np.float64) for p in partials])
    values = np.concatenate([np.asarray(p["sample"][1], dtype=np.float64) for p in partials])
    return values[np.argsort(hashes, kind="stable")[:SAMPLE_SIZE]]


def _bin_edges(sample: np.ndarray, count: int) -> np.ndarray:
    """At most `count` increasing edges that cut the sample into bins of similar mass, with a
    value that holds much of the mass (the zeros of a capital gain, the 40 of hours worked)
    taking one edge instead of the bins it covers: plain quantiles give such a column 2 or 3
    bins over the values that vary, where trees find their thresholds. A column with few
    distinct values gets an edge at each."""
    distinct = np.unique(sample)
    if len(distinct) <= count:
        return distinct
    points = count
    edges = np.unique(np.quantile(sample, np.linspace(0.0, 1.0, points)))
    # Finer quantiles until enough distinct edges; then every edge is still a quantile.
    while len(edges) < count and points < len(sample):
        points *= 2
        edges = np.unique(np.quantile(sample, np.linspace(0.0, 1.0, points)))
    if len(edges) > count:  # evenly among the distinct edges, both ends kept
        edges = edges[np.round(np.linspace(0, len(edges) - 1, count)).astype(int)]
    return edges


def _quantiles(sample: np.ndarray, count: int) -> list[float]:
    return np.quantile(sample, np.linspace(0.0, 1.0, count)).tolist()


def _count(partials: list[dict], problem: str) -> int:
    """Values seen in the training split; none is an error."""
    count = sum(p["count"] for p in partials)
    if count == 0:
        raise UserError(f"{problem} in the training split; check the column")
    return count


def _moments(partials: list[dict], total: str, squares: str, count: int) -> tuple[float, float]:
    mean = sum(p[total] for p in partials) / count
    var = max(sum(p[squares] for p in partials) / count - mean * mean, 0.0)
    return mean, float(np.sqrt(var))


def _vocabulary(partials: list[dict], options: dict, with_counts: bool = False):
    """Merged value counts -> the values kept (at least min_count, at most max_vocab_size),
    most frequent first, ties by value: the same list whatever the partitioning (and, when
    asked, each value's training count beside it)."""
    counts: Counter = Counter()
    for p in partials:
        counts.update(p["counts"])
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    kept = [(k, c) for k, c in ranked if c >= options["min_count"]][: options["max_vocab_size"]]
    values = [k for k, _ in kept]
    return (values, [int(c) for _, c in kept]) if with_counts else values


def _vocab_index(owner: Feature, vocab: list[str]) -> pd.Index:
    """A hash index of a vocabulary (value -> position, -1 when unseen), built once per
    vocabulary object: a Predictor or server transforms many small frames with the same one."""
    cached = getattr(owner, "_vocab_cache", None)
    if cached is None or cached[0] is not vocab:
        cached = owner._vocab_cache = (vocab, pd.Index(vocab, dtype=object))
    return cached[1]


class CategoryFeature(Feature):
    type_name = "category"
    defaults = {
        "missing_value_strategy": "unknown",
        "fill_value": "",
        "max_vocab_size": 10000,
        "min_count": 1,
    }
    missing_strategies = ("unknown", "fill_mode", "fill_value", "drop_row")

    def partial_stats(self, series, row_ids):
        counts = as_strings(series).value_counts(dropna=True)
        return {"counts": {str(k): int(c) for k, c in counts.items()}}

    def combine(self, partials):
        kept = _vocabulary(partials, self.options)
        if self.role == "output" and len(kept) < 2:
            raise UserError(
                f"output feature '{self.name}' has {len(kept)} class(es) in the training split "
                f"({', '.join(kept) or 'none'}); a category target needs at least two"
            )
        if not kept:
            raise UserError(
                f"category feature '{self.name}' has no values in the training split; check the column"
            )
        return {"vocab": kept, "mode": kept[0]}

    def vocabulary(self, stats: dict) -> list[str]:
        """Index -> label; inputs reserve index 0 for unknown and missing values."""
        return stats["vocab"] if self.role == "output" else [UNKNOWN_TOKEN, *stats["vocab"]]

    def transform(self, series, stats, row_ids):
        values = as_strings(series)
        missing = values.isna().to_numpy()
        strategy = self.options["missing_value_strategy"]
        if strategy == "fill_mode":
            values = values.fillna(stats["mode"])
        elif strategy == "fill_value":
            values = values.fillna(str(self.options["fill_value"]))
        codes = _vocab_index(self, stats["vocab"]).get_indexer(values.to_numpy()).astype(np.int64)
        if self.role == "output":
            # Unseen or missing targets cannot be scored; those rows are dropped.
            return codes.astype(np.int32), codes >= 0
        keep = ~missing if strategy == "drop_row" else np.ones(len(codes), dtype=bool)
        return (codes + 1).astype(np.int32), keep  # -1 (unseen) becomes 0 (unknown)


class BinaryFeature(Feature):
    type_name = "binary"
    defaults = {"missing_value_strategy": "fill_mode", "fill_value": False, "positive_label": None}
    missing_strategies = ("fill_mode", "fill_value", "drop_row")

    def partial_stats(self, series, row_ids):
        counts = as_strings(series).value_counts(dropna=True)
        return {"counts": {str(k): int(c) for k, c in counts.items()}}

    def combine(self, partials):
        counts: Counter = Counter()
        for p in partials:
            counts.update(p["counts"])
        values = sorted(counts)
        lowered = {v.strip().lower() for v in values}
        positive_label = self.options["positive_label"]
        if positive_label is not None:
            positive = [v for v in values if v == str(positive_label)]
            negative = [v for v in values if v != str(positive_label)]
            if len(negative) > 1:
                raise UserError(
                    f"binary feature '{self.name}' has more than two values ({', '.join(values[:10])}); "
                    "declare it as type category"
                )
        elif lowered <= _TRUE | _FALSE:
            positive = [v for v in values if v.strip().lower() in _TRUE]
            negative = [v for v in values if v.strip().lower() in _FALSE]
        elif len(values) <= 2:
            negative, positive = values[:1], values[1:]
        else:
            raise UserError(
                f"binary feature '{self.name}' has more than two values ({', '.join(values[:10])}); "
                "declare it as type category"
            )
        if self.role == "output" and (
            not positive or not negative or sum(counts[v] for v in positive) == 0
        ):
            raise UserError(
                f"output feature '{self.name}' has a single class ({', '.join(values) or 'none'}) in the "
                "training split; a binary target needs both classes"
            )
        if not values:
            raise UserError(
                f"binary feature '{self.name}' has no values in the training split; check the column"
            )
        positives = sum(counts[v] for v in positive)
        negatives = sum(counts[v] for v in negative)
        labels = [negative[0] if negative else "False", positive[0] if positive else "True"]
        return {
            "positive": positive,
            "negative": negative,
            "labels": labels,
            "mode": int(positives > negatives),
            "positive_rate": positives / max(positives + negatives, 1),
        }

    def transform(self, series, stats, row_ids):
        values = as_strings(series)
        is_pos = values.isin(stats["positive"]).to_numpy()
        is_neg = values.isin(stats["negative"]).to_numpy()
        missing = ~(is_pos | is_neg)  # missing, or a value never seen in training
        fill = (
            stats["mode"]
            if self.options["missing_value_strategy"] == "fill_mode"
            else int(bool(self.options["fill_value"]))
        )
        out = np.where(missing, fill, is_pos).astype(np.float32)
        keep = ~missing if self.drops_missing else np.ones(len(out), dtype=bool)
        return out, keep


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
        vocab, counts = _vocabulary(partials, self.options, with_counts=True)
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
            index = _vocab_index(self, stats["vocab"])
            id_of = index.get_indexer(uniques.to_numpy(dtype=object)).astype(np.int32)
            id_of = np.where(id_of >= 0, id_of + self.FIRST_ID, 1).astype(np.int32)
            values = id_of[codes] if len(flat) else np.zeros(0, dtype=np.int32)
            empty = lengths == 0
            starts = np.cumsum(lengths) - lengths
            values = np.insert(values, starts[empty], 1).astype(np.int32)
            lengths = np.where(empty, 1, lengths).astype(np.int32)
            return _list_column(values, lengths, series.index), np.ones(len(lengths), dtype=bool)
        # Hashing: bucket 0 is padding, so hashed ids are 1..num_buckets-1.
        bucket_of = np.array(
            [zlib.crc32(u.encode()) % (stats["num_buckets"] - 1) + 1 for u in uniques],
            dtype=np.int32,
        )
        values = bucket_of[codes] if len(flat) else np.zeros(0, dtype=np.int32)
        return _list_column(values, lengths, series.index), np.ones(len(lengths), dtype=bool)


def _list_column(values: np.ndarray, lengths: np.ndarray, index) -> pd.Series:
    """Flat int32 ids and each row's count -> a list<int32> column (text and set features)."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    array = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=pa.int32()))
    return pd.Series(array, dtype=pd.ArrowDtype(array.type), index=index)


def _token_lists(ids: list[np.ndarray], index) -> pd.Series:
    """Per-row int32 id arrays -> a list<int32> column."""
    lengths = np.fromiter((len(i) for i in ids), dtype=np.int32, count=len(ids))
    values = np.concatenate(ids).astype(np.int32) if len(ids) else np.zeros(0, dtype=np.int32)
    return _list_column(values, lengths, index)


class SetFeature(Feature):
    """Multi-valued cells (`red|large|sale`, or list cells from Parquet): a vocabulary fitted
    on the training split, each row's members as ids (an input: a mean-pooled embedding bag;
    an output: multi-label, one sigmoid per member). Id 0 is padding and 1 stands for
    members never seen in training (dropped from an output's targets)."""

    type_name = "set"
    defaults = {"delimiter": "|", "max_vocab_size": 10000, "min_count": 1, "lowercase": False}
    FIRST_ID = 2

    def _members(self, series: pd.Series) -> list[list[str]]:
        delimiter, lowercase = str(self.options["delimiter"]), self.options["lowercase"]
        rows = []
        for value in series.tolist():
            if isinstance(value, list | tuple | np.ndarray):
                items = [str(v) for v in value if v is not None]
            elif value is None or (not isinstance(value, str) and pd.isna(value)):
                items = []
            else:
                items = str(value).split(delimiter)
            items = [i.strip().lower() if lowercase else i.strip() for i in items]
            rows.append(sorted({i for i in items if i}))  # a set: order and repeats do not count
        return rows

    def partial_stats(self, series, row_ids):
        counts: Counter = Counter(m for members in self._members(series) for m in members)
        return {"counts": dict(counts)}

    def combine(self, partials):
        kept = _vocabulary(partials, self.options)
        if not kept:
            raise UserError(
                f"set feature '{self.name}' has no members in the training split; check the column "
                f"and its delimiter ({self.options['delimiter']!r})"
            )
        return {"vocab": kept}

    def transform(self, series, stats, row_ids):
        index = {m: i + self.FIRST_ID for i, m in enumerate(stats["vocab"])}
        ids = [
            np.fromiter((index.get(m, 1) for m in members), dtype=np.int32, count=len(members))
            for members in self._members(series)
        ]
        if self.role == "output":  # members never seen in training cannot be predicted
            ids = [i[i >= self.FIRST_ID] for i in ids]
        # A missing cell is the empty set (a CSV cannot tell them apart): for an output, "none
        # of the labels" is a target like any other.
        return _token_lists(ids, series.index), np.ones(len(ids), dtype=bool)


# A date becomes these numbers: its place in time (z-scored seconds), its year (z-scored),
# and each calendar cycle as a point on a circle, so December sits next to January.
DATE_CYCLES = {
    "month": 12,
    "day": 31,
    "weekday": 7,
    "dayofyear": 366,
    "hour": 24,
    "minute": 60,
}


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
    return lines


def date_columns(name: str) -> list[str]:
    """The processed columns of a date feature, in order (the model reads them as numbers)."""
    cycles = [f"{name}.{part}_{f}" for part in DATE_CYCLES for f in ("sin", "cos")]
    return [f"{name}.time", f"{name}.year", *cycles, f"{name}.missing"]


class DateFeature(Feature):
    """Dates and times: ISO strings (`2024-03-05`, `2024-03-05 14:30`, with a zone or not),
    other common formats element by element, epoch seconds, or datetime columns;
    `datetime_format` (strptime codes) pins one format. Missing dates get the training mean
    and a missing flag."""

    type_name = "date"
    output_allowed = False
    defaults = {"datetime_format": None, "missing_value_strategy": "fill_mean"}
    missing_strategies = ("fill_mean", "drop_row")

    def _parse(self, series: pd.Series) -> tuple[np.ndarray, int | None, str]:
        """Seconds since 1970 (UTC), NaN where missing; and the position and text of the
        first value that is no date (None when all are)."""
        if pd.api.types.is_datetime64_any_dtype(series):
            parsed = pd.to_datetime(series, utc=True)
        elif pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
            return series.to_numpy(dtype=np.float64, na_value=np.nan), None, ""
        else:
            text = as_strings(series)
            fmt = self.options["datetime_format"]
            parsed = pd.to_datetime(text, format=fmt or "ISO8601", utc=True, errors="coerce")
            failed = parsed.isna() & text.notna() & (text.str.strip() != "")
            if failed.any() and not fmt:
                # Each value alone (no format inferred from a partition's first value, which
                # could differ between engines): epoch seconds, then dateutil's parser.
                retry = text[failed]
                numbers = numbers_from_text(retry)
                # Only the numbers: pandas 2.3.3 casts a float array holding NaN by unit through
                # uninitialised memory, which at random overflows (FloatingPointError).
                as_epoch = pd.Series(pd.NaT, index=retry.index, dtype="datetime64[ns, UTC]")
                if numbers.notna().any():
                    present = numbers.dropna()
                    as_epoch[present.index] = pd.to_datetime(
                        present, unit="s", utc=True, errors="coerce"
                    )
                other = pd.to_datetime(
                    retry[numbers.isna()], format="mixed", utc=True, errors="coerce"
                ).reindex(retry.index)
                parsed = parsed.copy()
                parsed[failed] = as_epoch.where(numbers.notna(), other)
                failed = parsed.isna() & text.notna() & (text.str.strip() != "")
            if failed.any():
                first = failed[failed].index[0]
                return np.zeros(0), int(series.index.get_loc(first)), str(text[first])
        nanos = parsed.to_numpy(dtype="datetime64[ns]").astype(np.int64).astype(np.float64)
        return np.where(parsed.isna().to_numpy(), np.nan, nanos / 1e9), None, ""

    def _fix(self) -> str:
        fmt = self.options["datetime_format"]
        return f"match datetime_format {fmt!r}" if fmt else "set preprocessing.datetime_format"

    def _seconds(self, series: pd.Series, row_ids: np.ndarray) -> np.ndarray:
        seconds, bad, text = self._parse(series)
        if bad is not None:
            raise UserError(
                f"date feature '{self.name}' has value {text!r} that is no date at data row "
                f"{int(row_ids[bad]) + 1}; fix the value or {self._fix()}"
            )
        return seconds

    def check_values(self, series: pd.Series, stats: dict) -> None:
        """For a request's rows: the first value that is no date, by row and field."""
        _, bad, text = self._parse(series)
        if bad is not None:
            raise UserError(
                f"row {bad} field {self.name!r} has value {text!r} that is no date; send a date "
                "(e.g. 2024-03-05 or 2024-03-05 14:30) or null"
            )

    def partial_stats(self, series, row_ids):
        seconds = self._seconds(series, row_ids)
        present = seconds[~np.isnan(seconds)]
        years = pd.to_datetime(present, unit="s").year.to_numpy(dtype=np.float64)
        return {
            "count": int(present.size),
            "sum": float(present.sum()),
            "sum_sq": float(np.square(present).sum()),
            "year_sum": float(years.sum()),
            "year_sum_sq": float(np.square(years).sum()),
        }

    def combine(self, partials):
        count = _count(partials, f"date feature '{self.name}' has no dates")
        mean, std = _moments(partials, "sum", "sum_sq", count)
        year_mean, year_std = _moments(partials, "year_sum", "year_sum_sq", count)
        return {"mean": mean, "std": std, "year_mean": year_mean, "year_std": year_std}

    def transform(self, series, stats, row_ids):
        seconds = self._seconds(series, row_ids)
        missing = np.isnan(seconds)
        seconds = np.where(missing, stats["mean"], seconds)
        when = pd.DatetimeIndex(pd.to_datetime(seconds, unit="s"))
        parts = {
            "month": when.month - 1,
            "day": when.day - 1,
            "weekday": when.weekday,
            "dayofyear": when.dayofyear - 1,
            "hour": when.hour,
            "minute": when.minute,
        }
        columns = date_columns(self.name)
        values = [
            (seconds - stats["mean"]) / (stats["std"] or 1.0),
            (when.year.to_numpy(dtype=np.float64) - stats["year_mean"])
            / (stats["year_std"] or 1.0),
        ]
        for part, period in DATE_CYCLES.items():
            angle = 2 * np.pi * np.asarray(parts[part], dtype=np.float64) / period
            values += [np.sin(angle), np.cos(angle)]
        values.append(missing.astype(np.float64))
        keep = ~missing if self.drops_missing else np.ones(len(seconds), dtype=bool)
        return {c: v.astype(np.float32) for c, v in zip(columns, values, strict=True)}, keep


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


def vector_columns(name: str, length: int) -> list[str]:
    return [f"{name}.{i}" for i in range(length)]


FEATURE_TYPES: dict[str, type[Feature]] = {
    cls.type_name: cls
    for cls in (
        NumberFeature,
        CategoryFeature,
        BinaryFeature,
        TextFeature,
        SetFeature,
        DateFeature,
        VectorFeature,
    )
}


def build_feature(cfg: dict, role: str) -> Feature:
    name = cfg.get("name")
    kind = cfg.get("type")
    if not name:
        raise UserError(f"an {role} feature has no name; every feature needs name and type")
    cls = FEATURE_TYPES.get(kind)
    allowed = sorted(t for t, c in FEATURE_TYPES.items() if role == "input" or c.output_allowed)
    if cls is None or kind not in allowed:
        raise UserError(
            f"{role} feature '{name}' has unknown type '{kind}'; known {role} types: {', '.join(allowed)}"
        )
    return cls(cfg, role)


class FeatureSet:
    """The configured inputs and outputs, validated together."""

    def __init__(self, input_cfgs: list[dict], output_cfgs: list[dict]):
        if not input_cfgs:
            raise UserError("model.input_features is empty; name at least one input column")
        if not output_cfgs:
            raise UserError("model.output_features is empty; name at least one target column")
        self.inputs = [build_feature(c, "input") for c in input_cfgs]
        self.outputs = [build_feature(c, "output") for c in output_cfgs]
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
    """Statistics of one partition of training rows."""
    return {f.name: f.partial_stats(frame[f.name], row_ids) for f in features.all}


def combine_partials(partials: list[dict], features: FeatureSet) -> dict:
    return {f.name: f.combine([p[f.name] for p in partials]) for f in features.all}


def transform_frame(
    frame: pd.DataFrame, row_ids: np.ndarray, features: list[Feature], stats: dict
) -> tuple[pd.DataFrame, np.ndarray]:
    """Processed columns of one partition, and the mask of rows every feature keeps."""
    columns: dict[str, Any] = {}
    keep = np.ones(len(frame), dtype=bool)
    for feature in features:
        values, feature_keep = feature.transform(frame[feature.name], stats[feature.name], row_ids)
        # A feature is one column, or several named ones (a date's parts).
        for name, column in (
            values if isinstance(values, dict) else {feature.name: values}
        ).items():
            columns[name] = column.array if isinstance(column, pd.Series) else column
        keep &= feature_keep
    columns[ROW_ID] = row_ids
    return pd.DataFrame(columns), keep
