"""Feature types inferred from a sample of the table (issue 28, `dataset.target` alone).

`infer_types` looks at each column of a bounded sample of the training split and decides a
type with a one-line reason, or leaves the column out (constant, empty, an ID) with the reason.
It is a pure function of the sample's values, so every processor that hands it the same rows
gets the same answer; the caller picks the rows (sampling.read_sample: rows from 40 places
across the table, those of the training split), not the processor. Each type's rules live in
its module; RULES runs them in order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from runner.overrides import closest_choice
from runner.processing.features import binary, category, date, number, sets, text, vector
from runner.processing.features.registry import feature_type
from runner.processing.features.sampled_column import ID_SHARE, Inferred, SampledColumn

BUILT_IN_TARGET = "label"  # conf/dataset/synthetic.yaml's: kept when only dataset.path is set


@dataclass
class TypeInference:
    """What inference decided for one table, and from how many training rows."""

    decisions: list[Inferred]
    target: list[str]
    rows: int
    source: str
    sample: str = ""  # how the sample was drawn
    # One line per input that looks like a group id a random split ignores (group_hints).
    hints: list[str] = field(default_factory=list)

    def table(self) -> str:
        """The log's table: column, type (or left out), why."""
        width = max(len(d.name) for d in self.decisions)
        drawn = f"; {self.sample}" if self.sample else ""
        lines = [
            f"features inferred from {self.rows} rows of {self.source}{drawn} "
            f"(dataset.target={','.join(self.target)}; an explicit model.input_features wins):"
        ]
        for d in self.decisions:
            role = "output" if d.name in self.target else "input"
            kind = d.type if d.kept else "-"
            what = f"{role}: {d.reason}" if d.kept else f"left out: {d.reason}"
            lines.append(f"  {d.name:<{width}}  {kind:<8}  {what}")
        return "\n".join(lines)

    def watched(self) -> dict[str, str]:
        """The columns left out for what a sample can get wrong (constant, an ID), with the
        reason: the fit pass checks them against the whole training split."""
        return {
            d.name: d.reason
            for d in self.decisions
            if not d.kept and d.reason.startswith(("constant", "an ID"))
        }

    def yaml(self) -> str:
        return model_yaml(self.decisions, self.target, self.source)

    def model_config(self) -> dict:
        return model_config(self.decisions, self.target)


def infer_source(
    source,
    dataset,
    split: dict,
    outputs: list[str] | None = None,
    given: dict[str, str] | None = None,
    inputs_given: bool = False,
) -> TypeInference:
    """Type inference over dataset.inference_rows rows drawn from 40 places across the raw table
    (runner.processing.sampling), those that fall in the training split (read on the driver:
    the same rows for every processor).
    `outputs`: the names of explicitly given output features, which stand for the target;
    `given`: every explicitly given feature's type, kept as given; `inputs_given`: the inputs
    are model.input_features, and no other column is one."""
    from runner.errors import UserError
    from runner.processing.sampling import read_sample
    from runner.processing.split import SPLIT_COLUMN_KEYS, assign_splits, split_column

    target = list(outputs or dataset.targets)
    if not target:
        raise UserError(
            f"name the column to predict: dataset.target=<column> (with model=auto every other "
            f"column of {source.label} becomes an input), or give model.input_features and "
            "model.output_features"
        )
    drawn = read_sample(source, dataset.inference_rows)
    sample = drawn.frame
    missing = [t for t in target if t not in sample.columns]
    if missing:
        columns = [str(c) for c in sample.columns]
        close = closest_choice("dataset.target", missing[0], columns, cutoff=0.7).strip()
        hint = (
            f" ({close})"
            if len(missing) == 1 and close
            else " (the built-in table's target: name yours)"
            if missing == [BUILT_IN_TARGET]
            else ""
        )
        raise UserError(
            f"dataset.target={','.join(missing)} is not a column of {source.label}{hint}; set "
            f"dataset.target to the column to predict, one of: {', '.join(columns)}"
        )
    left_out = dict.fromkeys(dataset.exclude, "left out by dataset.exclude")
    if inputs_given:
        others = [c for c in sample.columns if c not in target and c not in (given or {})]
        left_out.update(dict.fromkeys(others, "not in model.input_features"))
    column = split_column(split)
    if column is not None:
        key = f"dataset.split.{SPLIT_COLUMN_KEYS[split['method']]}"
        what = SPLIT_COLUMN_WORDS[split["method"]]
        if split["method"] != "time":  # a row's time may be an input; its split or group not
            left_out[column] = f"the {what} ({key})"
        if column not in sample.columns:
            raise UserError(
                f"{what} '{column}' is not a column of {source.label}; "
                f"available columns: {', '.join(map(str, sample.columns))}"
            )
    # The rows the split gives training: by the split column's values, or, for a random split,
    # a random share of the sample (the sample's rows are not numbered as the table's).
    ids = np.arange(len(sample), dtype=np.int64)
    sample = sample[assign_splits(sample, ids, split) == 0]
    sample = sample.reset_index(drop=True)
    unknown = [c for c in dataset.exclude if c not in sample.columns]
    if unknown:
        raise UserError(
            f"dataset.exclude names {', '.join(unknown)}, which {source.label} does not have; "
            f"its columns are: {', '.join(map(str, sample.columns))}"
        )
    decisions = infer_types(sample, target, left_out, given, source.decimal or ".")
    for i, d in enumerate(decisions):
        if d.name in target and not d.kept:
            # The sample may have missed the other classes (rare ones): the training split's
            # whole column decides before the target is refused.
            d = decisions[i] = _target_from_training_split(source, d.name, split)
            if not d.kept:
                raise UserError(f"dataset.target={d.name} cannot be predicted: {d.reason}")
    if not any(d.kept and d.name not in target for d in decisions):
        raise UserError(
            f"no input feature is left in {source.label} once the target and the columns "
            "left out are set aside; check dataset.exclude"
        )
    hints = (
        [*group_hints(sample, decisions, target), *time_hints(decisions, target)]
        if split["method"] == "random"
        else []
    )
    return TypeInference(decisions, target, len(sample), source.label, drawn.description, hints)


# What the log calls the column each split method reads.
SPLIT_COLUMN_WORDS = {"column": "split column", "group": "group column", "time": "time column"}

# A column named like these, whose values repeat, looks like the id of a group of rows:
# patient_id, store id, customerId, CustomerID, store, Patients.
GROUP_NAMES = (
    re.compile(
        r"(^|[_\s.-])ids?$|^(customer|patient|user|store|session|household|subject|account"
        r"|client|member|group|team|device|site|hospital|school)s?$",
        re.IGNORECASE,
    ),
    re.compile(r"[a-z]Id$|ID$"),
)
GROUP_MIN_ROWS = 2.0  # rows a value at least, on average


def group_hints(sample: pd.DataFrame, decisions: list[Inferred], target: list[str]) -> list[str]:
    """A line for each kept input named like a group id (GROUP_NAMES) whose values repeat: a
    random split puts a group's rows on both sides, and its test score overstates new groups."""
    hints = []
    for d in decisions:
        named = any(pattern.search(str(d.name)) for pattern in GROUP_NAMES)
        if not d.kept or d.name in target or not named:
            continue
        values = sample[d.name].dropna()
        distinct = values.nunique()
        if distinct < 2 or len(values) < GROUP_MIN_ROWS * distinct:
            continue
        hints.append(
            f"'{d.name}' looks like a group id ({distinct:,} values over {len(values):,} rows): "
            "a random split puts a group's rows in training and test alike, so the test score "
            "overstates new groups; to split by group: dataset.split.method=group "
            f"dataset.split.group_column={d.name}"
        )
    return hints


def time_hints(decisions: list[Inferred], target: list[str]) -> list[str]:
    """A line for the first kept date input: a random split tests on rows from every time, so
    its score overstates the model on rows later than its training rows."""
    for d in decisions:
        if d.kept and d.name not in target and d.type == "date":
            return [
                f"'{d.name}' holds dates: a random split trains on rows later than some test "
                "rows, so the test score overstates the model on the future; to test on the "
                f"latest rows: dataset.split.method=time dataset.split.time_column={d.name}"
            ]
    return []


def _target_from_training_split(source, name: str, split: dict) -> Inferred:
    """The target's type from its every training row (read alone: one column of the table)."""
    from runner.processing.reading import read_arrow
    from runner.processing.split import assign_splits, split_column

    columns = [name] + [c for c in [split_column(split)] if c]
    frame = read_arrow(source, columns=columns).to_pandas()
    codes = assign_splits(frame, np.arange(len(frame), dtype=np.int64), split)
    training = frame[name][codes == 0].reset_index(drop=True)
    decided = infer_column(training, as_target=True, decimal=source.decimal or ".")
    if decided.kept:
        return replace(decided, reason=f"{decided.reason} (in the whole training split)")
    return replace(decided, reason=decided.reason.replace("the sample", "the training split"))


def infer_types(
    sample: pd.DataFrame,
    target: list[str],
    exclude: Sequence[str] | dict[str, str] = (),
    given: dict[str, str] | None = None,
    decimal: str = ".",
) -> list[Inferred]:
    """One decision per column of `sample`, targets first, in column order. `exclude`: columns
    to leave out, or {column: the reason it is left out}; `given`: {column: type} of features
    the config names, kept as they are; `decimal`: the file's decimal mark."""
    if not isinstance(exclude, dict):
        exclude = dict.fromkeys(exclude, "left out by dataset.exclude")
    missing = [t for t in target if t not in sample.columns]
    if missing:
        from runner.errors import UserError

        raise UserError(
            f"dataset.target names {', '.join(missing)}, which the table does not have; "
            f"its columns are: {', '.join(map(str, sample.columns))}"
        )
    decisions = []
    for name in [*target, *(c for c in sample.columns if c not in target)]:
        if given and name in given:
            decisions.append(Inferred(name, given[name], "as given in the config"))
            continue
        if name in exclude and name not in target:
            decisions.append(Inferred(name, None, exclude[name]))
            continue
        decisions.append(infer_column(sample[name], as_target=name in target, decimal=decimal))
    return decisions


def infer_column(column: pd.Series, as_target: bool = False, decimal: str = ".") -> Inferred:
    inferred = _decide(SampledColumn(column, as_target, decimal))
    written = column.dtype == object and column.astype(str).str.contains(",", regex=False).any()
    kind = feature_type(inferred.type) if inferred.type is not None else None
    numeric = kind is not None and kind.numeric
    if decimal == "," and numeric and written:
        # Its numbers are read with the file's decimal comma wherever it is preprocessed.
        options = {**(inferred.preprocessing or {}), "decimal": ","}
        return replace(
            inferred, reason=f"{inferred.reason} (decimal commas)", preprocessing=options
        )
    return inferred


def _decide(column: SampledColumn) -> Inferred:
    """Left out when empty or constant; else the first rule that decides (RULES)."""
    if column.present.empty:
        return column.decided(None, "empty: no values in the sample")
    if column.distinct == 1:
        first = column.present.iloc[0]
        first = first.item() if isinstance(first, np.generic) else first
        return column.decided(None, f"constant: every value is {first!r}")
    for rule in RULES:
        decided = rule(column)
        if decided is not None:
            return decided
    raise AssertionError("the last rule decides every column")


def _numeric_id(column: SampledColumn) -> Inferred | None:
    reason = column.id_reason(column.numbers) if column.numbers is not None else None
    return column.decided(None, reason) if reason else None


def _word_id(column: SampledColumn) -> Inferred | None:
    share = column.distinct_share
    single_words = column.words.max() == 1 and len(column.text) >= 20
    if share >= ID_SHARE and single_words and not column.as_target:
        return column.decided(None, f"an ID: {share:.0%} of the values are distinct single words")
    return None


# Each type's rules live in its module; the order is the decision: two-valued columns first,
# typed columns before text read as numbers, lists or dates, IDs before sets and text, and
# a category for whatever no rule took.
RULES: tuple[Callable[[SampledColumn], Inferred | None], ...] = (
    binary.infer_two_values,
    number.infer_flag,
    category.infer_two_values,
    date.infer_typed,
    _numeric_id,
    category.infer_integer_classes,
    number.infer_numbers,
    vector.infer_lists,
    number.infer_marked_numbers,
    vector.infer_written_lists,
    date.infer_written,
    _word_id,
    sets.infer_delimited,
    text.infer_free_text,
    category.infer_any,
)


def model_config(decisions: list[Inferred], target: list[str]) -> dict:
    """The model group's config for the kept columns: what `model.yaml` holds."""
    kept = [d for d in decisions if d.kept]

    def feature(d: Inferred) -> dict:
        options = {"preprocessing": d.preprocessing} if d.preprocessing else {}
        return {"name": d.name, "type": d.type, **options}

    return {
        "input_features": [feature(d) for d in kept if d.name not in target],
        "output_features": [feature(d) for d in kept if d.name in target],
    }


def model_yaml(decisions: list[Inferred], target: list[str], source: str) -> str:
    """`model.yaml` as a user keeps it: usable as is with `--config-dir <dir> model=<name>`,
    each feature's reason beside it and every column left out listed with why."""
    lines = [
        f"# Inferred from {source}. Edit the types and keep it as <dir>/model/<name>.yaml, then:",
        "#   python run.py --config-dir <dir> model=<name> dataset.path=...",
        "defaults:",
        "  - /model_schema@_here_",
        "  - _self_",
    ]
    config = model_config(decisions, target)
    why = {d.name: d.reason for d in decisions}
    for group in ("input_features", "output_features"):
        lines.append(f"{group}:")
        for feature in config[group]:
            name = _yaml_scalar(feature["name"])
            given = feature.get("preprocessing", {})
            options = (
                ", preprocessing: {"
                + ", ".join(f"{key}: {_yaml_value(value)}" for key, value in given.items())
                + "}"
                if given
                else ""
            )
            lines.append(
                f"  - {{name: {name}, type: {feature['type']}{options}}}  # {why[feature['name']]}"
            )
    left_out = [d for d in decisions if not d.kept]
    if left_out:
        lines.append("# left out:")
        lines += [f"#   {d.name}: {d.reason}" for d in left_out]
    return "\n".join(lines) + "\n"


def _yaml_value(value) -> str:
    if isinstance(value, list | tuple):
        return f"[{', '.join(_yaml_scalar(str(v)) for v in value)}]"
    return _yaml_scalar(str(value))


def _yaml_scalar(text: str) -> str:
    import json

    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\- ]*", text) and not text.endswith(" ")
    return text if plain else json.dumps(text)
