"""Date features: a place in time, a year and each calendar cycle as a point on a circle."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.processing.columns import DATE_CYCLES, date_columns
from runner.processing.features.base import (
    Feature,
    as_strings,
    merged_moments,
    numbers_from_text,
    seen_count,
)

if TYPE_CHECKING:
    from runner.processing.features.sampled_column import Inferred, SampledColumn


def date_seconds(series: pd.Series, fmt: str | None = None) -> tuple[np.ndarray, int | None, str]:
    """Seconds since 1970 (UTC), NaN where missing; and the position and text of the
    first value that is no date (None when all are). `fmt`: strptime codes that pin one
    format (a date feature's datetime_format)."""
    if pd.api.types.is_datetime64_any_dtype(series):
        parsed = pd.to_datetime(series, utc=True)
    elif pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
        return series.to_numpy(dtype=np.float64, na_value=np.nan), None, ""
    else:
        text = as_strings(series)
        parsed = pd.to_datetime(text, format=fmt or "ISO8601", utc=True, errors="coerce")
        failed = parsed.isna() & text.notna() & (text.str.strip() != "")
        if failed.any() and not fmt:
            # Each value alone (no format inferred from a partition's first value, which
            # could differ between processors): epoch seconds, then dateutil's parser.
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
        return date_seconds(series, self.options["datetime_format"])

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
        count = seen_count(partials, f"date feature '{self.name}' has no dates")
        mean, std = merged_moments(partials, "sum", "sum_sq", count)
        year_mean, year_std = merged_moments(partials, "year_sum", "year_sum_sq", count)
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


# -- inference rules (run in order by runner.processing.type_inference) ---------------------------

DATE_SHARE = 0.95  # of non-empty values that must parse as dates


def infer_typed(column: SampledColumn) -> Inferred | None:
    if pd.api.types.is_datetime64_any_dtype(column.present):
        return column.decided(DateFeature.type_name, "a date/time column")
    return None


def infer_written(column: SampledColumn) -> Inferred | None:
    if _dates_share(column.text) >= DATE_SHARE:
        return column.decided(DateFeature.type_name, "values parse as dates")
    return None


def _dates_share(text: pd.Series) -> float:
    # Dates have digits and a separator; plain words never parse as one here.
    candidates = text[text.str.contains(r"\d", regex=True) & text.str.contains(r"[-/:. ]")]
    if len(candidates) < len(text) * DATE_SHARE:
        return 0.0
    parsed = pd.to_datetime(candidates, format="mixed", errors="coerce", utc=True)
    return float(parsed.notna().sum()) / len(text)
