"""Number features: robust scaling with smooth clipping, skew found on the training split, and
the quantile bin edges of the piecewise-linear encoder."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.processing import scaling
from runner.processing.columns import missing_column
from runner.processing.features.base import (
    Feature,
    bottom_k_sample,
    merged_moments,
    merged_sample,
    numbers_from_text,
    seen_count,
)
from runner.processing.scaling import signed_log1p

if TYPE_CHECKING:
    from runner.processing.features.sampled_column import Inferred, SampledColumn


class NumberFeature(Feature):
    """Numbers. The default normalization, `auto`, is decided on the training split and stored
    with its reason: an input is scaled robustly (median and interquartile range) and its
    outliers clipped smoothly (x / sqrt(1 + (x/3)^2), as RealMLP does), after a sign-kept
    log1p when it is right-skewed and never negative; an output (a regression target) is
    z-scored, in log space when it is right-skewed and never negative (prices, counts).
    Inputs also keep quantile bin edges for the piecewise-linear number encoder."""

    type_name = "number"
    numeric = True
    defaults = {
        "missing_value_strategy": "fill_mean",
        "fill_value": 0.0,
        "normalization": "auto",
        "num_quantiles": 1000,
    }
    # Values that stand for a missing number in this column ("n/a", "unknown", "?"): inference
    # puts the ones it saw here, instead of taking the whole column for a category.
    # The decimal mark of numbers written as text: ',' reads '3,5' as 3.5 (dataset.decimal).
    later_options = {"missing_values": [], "decimal": "."}
    missing_strategies = ("fill_mean", "fill_zero", "fill_value", "drop_row")
    normalizations = ("auto", "robust", "zscore", "minmax", "log1p", "quantile", "none", None)

    def __init__(self, cfg: dict, role: str):
        super().__init__(cfg, role)
        if self.options["normalization"] not in self.normalizations:
            raise UserError(
                f"feature '{self.name}' has normalization '{self.options['normalization']}'; "
                "use auto, robust, zscore, minmax, log1p, quantile or none"
            )
        markers = self.options["missing_values"]
        if not isinstance(markers, list | tuple) or not all(
            isinstance(m, str | int | float) and not isinstance(m, bool) for m in markers
        ):
            raise UserError(
                f"feature '{self.name}' has missing_values {markers!r}; use a list of the values "
                "that stand for a missing number, e.g. [n/a, unknown]"
            )
        self._missing_markers = {str(m).strip() for m in markers}
        if self.options["decimal"] not in (".", ","):
            raise UserError(
                f"feature '{self.name}' has decimal {self.options['decimal']!r}; use '.' or ','"
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
        if self._missing_markers:
            series = series.mask(series.astype(str).str.strip().isin(self._missing_markers))
        coerced = numbers_from_text(series, self.options["decimal"])
        failed = coerced.isna() & series.notna()
        if failed.any():  # only the values that did not parse are looked at as text
            text = series[failed].astype(str).str.strip()
            bad = text[(text != "") & (text.str.lower() != "nan")]
            if len(bad):
                position = series.index.get_loc(bad.index[0])
                raise UserError(
                    f"number feature '{self.name}' has non-numeric value {bad.iloc[0]!r} at data row "
                    f"{int(row_ids[position]) + 1}; fix the value, list it in its preprocessing.missing_values "
                    f"if it stands for a missing number, or declare '{self.name}' as type category"
                    + (
                        " (a decimal comma: set dataset.decimal=',')"
                        if re.fullmatch(r"[-+]?\d*,\d+", bad.iloc[0])
                        and self.options["decimal"] == "."
                        else ""
                    )
                )
        return coerced.to_numpy(dtype=np.float64, na_value=np.nan)

    @property
    def _needs_sample(self) -> bool:
        # Inputs always (bin edges); an output only to decide or apply its transform.
        return self.role == "input" or self.options["normalization"] in ("auto", "quantile")

    def partial_stats(self, series, row_ids):
        v = self._numeric(series, row_ids)
        present = v[~np.isnan(v)]
        stats: dict[str, Any] = {
            "count": int(present.size),
            "rows": len(v),
            "sum": float(present.sum()),
            "sum_sq": float(np.square(present).sum()),
            "min": float(present.min()) if present.size else None,
            "max": float(present.max()) if present.size else None,
        }
        if self.options["normalization"] == "log1p":
            logged = signed_log1p(present)
            stats.update(log_sum=float(logged.sum()), log_sum_sq=float(np.square(logged).sum()))
        if self._needs_sample:
            stats["sample"] = bottom_k_sample(present, row_ids[~np.isnan(v)])
        return stats

    def combine(self, partials):
        count = seen_count(partials, f"number feature '{self.name}' has no values")
        mean, std = merged_moments(partials, "sum", "sum_sq", count)
        stats: dict[str, Any] = {
            "mean": mean,
            "std": std,
            "min": min(p["min"] for p in partials if p["min"] is not None),
            "max": max(p["max"] for p in partials if p["max"] is not None),
        }
        mode = self.options["normalization"]
        sample = merged_sample(partials) if self._needs_sample else None
        if mode == "log1p":
            stats["log_mean"], stats["log_std"] = merged_moments(
                partials, "log_sum", "log_sum_sq", count
            )
        elif mode == "quantile":
            assert sample is not None  # _needs_sample
            stats["quantiles"] = _quantiles(sample, int(self.options["num_quantiles"]))
        elif mode in ("auto", "robust"):
            assert sample is not None  # _needs_sample (robust: inputs only)
            stats.update(self._decide(sample, stats["min"], mode))
        if self.role == "input":
            assert sample is not None  # _needs_sample
            edges = bin_edges(sample, BIN_EDGES)
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
                logged = signed_log1p(sample)
                return {
                    "normalization": "log1p",
                    "log_mean": float(logged.mean()),
                    "log_std": float(logged.std()),
                    "reason": f"log1p target: right-skewed and never negative ({why})",
                }
            if mode == "auto":
                return {"normalization": "zscore", "reason": f"z-scored target ({why})"}
        log = mode == "auto" and skewed
        values = signed_log1p(sample) if log else sample
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

    def mode(self, stats: dict) -> str | None:
        """The normalization in use: the one `auto` picked, else the configured one."""
        return scaling.normalization_in_use(stats, self.options["normalization"])

    def normalize(self, v: np.ndarray, stats: dict) -> np.ndarray:
        return scaling.normalize(v, stats, self.mode(stats))

    def denormalize(self, v: np.ndarray, stats: dict) -> np.ndarray:
        return scaling.denormalize(v, stats, self.mode(stats))

    def transform(self, series, stats, row_ids):
        return self._processed(self._numeric(series, row_ids), stats)

    record_kinds = (int, float)  # booleans too, as a numeric column reads them; text: _numeric

    def transform_records(self, values, stats):
        return self._processed(
            np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64), stats
        )

    def _processed(self, v: np.ndarray, stats: dict):
        missing = np.isnan(v)
        keep = ~missing if self.drops_missing else np.ones(len(v), dtype=bool)
        v = np.where(missing, self.fill_value(stats), v)
        # A target keeps float64: its true values come back from it in the predictions.
        values = self.normalize(v, stats).astype(
            np.float64 if self.role == "output" else np.float32
        )
        if stats.get("missing_flag"):
            return {self.name: values, missing_column(self.name): missing.astype(np.float32)}, keep
        return values, keep


BIN_EDGES = 33  # quantile edges kept per number input: up to 32 bins for the encoder
SKEW_FOR_LOG = 1.0  # a never-negative column this right-skewed is taken in log space
IQR_OF_NORMAL = 1.3489795  # a normal's interquartile range in standard deviations


def _skewness(sample: np.ndarray) -> float:
    """Skewness of the sample winsorized at its 1st and 99th percentiles: a handful of
    outliers (which smooth clipping handles) must not decide that a column is skewed."""
    low, high = np.quantile(sample, [0.01, 0.99])
    x = np.clip(sample, low, high)
    std = x.std()
    return float(np.mean((x - x.mean()) ** 3) / std**3) if std > 0 else 0.0


def bin_edges(sample: np.ndarray, count: int) -> np.ndarray:
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


# -- inference rules (run in order by runner.processing.type_inference) ---------------------------


def infer_flag(column: SampledColumn) -> Inferred | None:
    if column.distinct == 2 and column.numbers is not None:
        return column.decided(NumberFeature.type_name, "two distinct numbers (a 0/1 flag)")
    return None


def infer_numbers(column: SampledColumn) -> Inferred | None:
    """Numbers, typed or written as text (after the ID and class-label rules)."""
    numbers = column.numbers
    if numbers is None:
        return None
    source = "numbers written as text" if numbers.as_text else "numbers"
    return column.decided(NumberFeature.type_name, source)


def infer_marked_numbers(column: SampledColumn) -> Inferred | None:
    """Numbers with a few words standing for a missing value: a number whose
    preprocessing.missing_values lists them (where the numbers are neither an ID nor classes)."""
    numbers = column.marked_numbers
    if numbers is None or column.id_reason(numbers) or column.integer_classes(numbers):
        return None
    count = int(column.text_numbers.isna().sum())
    shown = ", ".join(repr(m) for m in numbers.markers)
    return column.decided(
        NumberFeature.type_name,
        f"numbers written as text; {shown} ({count} of {len(column.text)} values) taken as "
        "missing (preprocessing.missing_values)",
        {"missing_values": list(numbers.markers)},
    )
