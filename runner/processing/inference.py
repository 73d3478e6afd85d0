"""Feature types inferred from a sample of the table (issue 28, `dataset.target` alone).

`infer_types` looks at each column of a bounded sample of the training split and decides a
type with a one-line reason, or leaves the column out (constant, empty, an ID) with the reason.
It is a pure function of the sample's values, so every processor that hands it the same rows
gets the same answer; the caller picks the rows (the first rows of the training split in
file order), not the processor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from runner.processing.features import numbers_from_text

# A column with at most this many distinct integer values is a category of codes, not a number
# (a grade, a weekday); above it, a number.
MAX_INTEGER_CODES = 10
# Distinct values per row above which a column of single words is an ID (keys, UUIDs).
ID_SHARE = 0.95
# A column of strings whose values average at least this many words is free text.
TEXT_WORDS = 3.0
# A string column with more distinct values than this share of the rows, made of several
# words, is text rather than a category.
TEXT_SHARE = 0.5
SET_DELIMITERS = ("|", ";", ",")
DATE_SHARE = 0.95  # of non-empty values that must parse as dates
_NUMBER_LIST = re.compile(r"^\s*[\[(]?\s*-?\d[\d.eE+-]*(\s*[,\s]\s*-?\d[\d.eE+-]*)+\s*[\])]?\s*$")


@dataclass(frozen=True)
class Inferred:
    name: str
    type: str | None  # None: left out
    reason: str

    @property
    def kept(self) -> bool:
        return self.type is not None


def infer_types(sample: pd.DataFrame, target: list[str], exclude: list[str] = ()) -> list[Inferred]:
    """One decision per column of `sample`, targets first, in column order."""
    missing = [t for t in target if t not in sample.columns]
    if missing:
        from runner.errors import UserError

        raise UserError(
            f"dataset.target names {', '.join(missing)}, which the table does not have; "
            f"its columns are: {', '.join(map(str, sample.columns))}"
        )
    decisions = []
    for name in [*target, *(c for c in sample.columns if c not in target)]:
        if name in exclude and name not in target:
            decisions.append(Inferred(name, None, "left out by dataset.exclude"))
            continue
        decisions.append(infer_column(sample[name], as_target=name in target))
    return decisions


def infer_column(column: pd.Series, as_target: bool = False) -> Inferred:
    name = str(column.name)
    present = column.dropna()
    if present.dtype == object:
        present = present[present.map(lambda v: not (isinstance(v, str) and not v.strip()))]
    if present.empty:
        return Inferred(name, None, "empty: no values in the sample")
    distinct = _distinct(present)
    if distinct == 1:
        return Inferred(name, None, f"constant: every value is {present.iloc[0]!r}")
    if distinct == 2:
        return Inferred(name, "binary", "two distinct values")
    if pd.api.types.is_datetime64_any_dtype(present):
        return Inferred(name, "date", "a date/time column")
    if pd.api.types.is_bool_dtype(present):
        return Inferred(name, "binary", "true/false values")
    if pd.api.types.is_numeric_dtype(present):
        return _numeric(name, present, distinct, len(column), as_target)
    if _is_list_column(present):
        return Inferred(name, "vector", "lists of numbers")
    text = present.astype(str).str.strip()
    numbers = numbers_from_text(text)
    if numbers.notna().all():
        return _numeric(name, numbers, distinct, len(column), as_target, as_text=True)
    if text.map(_NUMBER_LIST.match).notna().all() and _same_length(text):
        return Inferred(name, "vector", "every value is a list of numbers of the same length")
    if _dates_share(text) >= DATE_SHARE:
        return Inferred(name, "date", "values parse as dates")
    words = text.str.split().str.len()
    share = distinct / len(text)
    if share >= ID_SHARE and words.max() == 1 and len(text) >= 20 and not as_target:
        return Inferred(name, None, f"an ID: {share:.0%} of the values are distinct single words")
    delimiter = _set_delimiter(text)
    if delimiter is not None:
        return Inferred(name, "set", f"members separated by '{delimiter}' that recur")
    if words.mean() >= TEXT_WORDS or (share > TEXT_SHARE and words.mean() > 1.5):
        return Inferred(
            name, "text", f"free text: {words.mean():.1f} words a value, {share:.0%} distinct"
        )
    return Inferred(name, "category", f"{distinct} distinct values in {len(text)} rows")


def _numeric(name, values, distinct, rows, as_target, as_text=False) -> Inferred:
    floats = values.astype(np.float64)
    integral = bool(np.all(np.mod(floats, 1) == 0))
    source = "numbers written as text" if as_text else "numbers"
    if integral and distinct >= ID_SHARE * rows and rows >= 20 and not as_target:
        diffs = np.diff(floats.to_numpy())
        running = bool(len(diffs)) and bool(np.all(diffs == diffs[0]))
        why = "a running number" if running else f"{distinct / rows:.0%} distinct integers"
        return Inferred(name, None, f"an ID: {why}")
    if integral and distinct <= MAX_INTEGER_CODES:
        return Inferred(name, "category", f"{distinct} distinct integer codes")
    return Inferred(name, "number", source)


def _distinct(values: pd.Series) -> int:
    try:
        return int(values.nunique())
    except TypeError:  # unhashable cells (lists from Parquet)
        return int(values.map(repr).nunique())


def _is_list_column(values: pd.Series) -> bool:
    return bool(values.map(lambda v: isinstance(v, list | tuple | np.ndarray)).all())


def _same_length(text: pd.Series) -> bool:
    lengths = text.str.strip("[]() ").str.replace(",", " ").str.split().str.len()
    return lengths.nunique() == 1


def _dates_share(text: pd.Series) -> float:
    # Dates have digits and a separator; plain words never parse as one here.
    candidates = text[text.str.contains(r"\d", regex=True) & text.str.contains(r"[-/:. ]")]
    if len(candidates) < len(text) * DATE_SHARE:
        return 0.0
    parsed = pd.to_datetime(candidates, format="mixed", errors="coerce", utc=True)
    return float(parsed.notna().sum()) / len(text)


def _set_delimiter(text: pd.Series) -> str | None:
    """A delimiter whose members recur: fewer distinct members than half the members seen, in a
    column where at least a fifth of the values hold more than one."""
    for delimiter in SET_DELIMITERS:
        if text.str.contains(delimiter, regex=False).mean() < 0.2:
            continue
        members = text.str.split(re.escape(delimiter), regex=True).explode().str.strip()
        members = members[members != ""]
        if members.str.split().str.len().mean() > 3:  # sentences with commas: text
            continue
        if members.nunique() <= 0.5 * len(members):
            return delimiter
    return None


def model_config(decisions: list[Inferred], target: list[str]) -> dict:
    """The model group's config for the kept columns: what `model.yaml` holds."""
    kept = [d for d in decisions if d.kept]
    return {
        "input_features": [{"name": d.name, "type": d.type} for d in kept if d.name not in target],
        "output_features": [{"name": d.name, "type": d.type} for d in kept if d.name in target],
    }


def model_yaml(decisions: list[Inferred], target: list[str], source: str) -> str:
    """`model.yaml` as a user keeps it: usable as is with `--config-dir <dir> model=<name>`,
    each feature's reason beside it and every column left out listed with why."""
    lines = [
        f"# Inferred from {source}; edit the types and keep it:",
        "#   python run.py --config-dir <this dir's parent> model=<this file's name>",
        "defaults:",
        "  - model_schema",
        "  - _self_",
    ]
    config = model_config(decisions, target)
    why = {d.name: d.reason for d in decisions}
    for group in ("input_features", "output_features"):
        lines.append(f"{group}:")
        for feature in config[group]:
            name = _yaml_scalar(feature["name"])
            lines.append(f"  - {{name: {name}, type: {feature['type']}}}  # {why[feature['name']]}")
    left_out = [d for d in decisions if not d.kept]
    if left_out:
        lines.append("# left out:")
        lines += [f"#   {d.name}: {d.reason}" for d in left_out]
    return "\n".join(lines) + "\n"


def _yaml_scalar(text: str) -> str:
    import json

    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\- ]*", text) and not text.endswith(" ")
    return text if plain else json.dumps(text)
