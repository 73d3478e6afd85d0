"""Set features: a cell of several members (tags, labels), as ids of a vocabulary."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.processing.columns import FIRST_TOKEN_ID
from runner.processing.features.base import Feature, bounded_counts, merged_vocabulary
from runner.processing.features.text import token_lists

if TYPE_CHECKING:
    from runner.processing.features.sampled_column import Inferred, SampledColumn


class SetFeature(Feature):
    """Multi-valued cells (`red|large|sale`, or list cells from Parquet): a vocabulary fitted
    on the training split, each row's members as ids (an input: a mean-pooled embedding bag;
    an output: multi-label, one sigmoid per member). Id 0 is padding and 1 stands for
    members never seen in training (dropped from an output's targets)."""

    type_name = "set"
    defaults = {"delimiter": "|", "max_vocab_size": 10000, "min_count": 1, "lowercase": False}
    FIRST_ID = FIRST_TOKEN_ID

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
        return {"counts": bounded_counts(counts, self.options["max_vocab_size"])}

    def combine(self, partials):
        kept = merged_vocabulary(partials, self.options)
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
        return token_lists(ids, series.index), np.ones(len(ids), dtype=bool)


# -- inference rules (run in order by runner.processing.type_inference) ---------------------------

SET_DELIMITERS = ("|", ";", ",")


def infer_delimited(column: SampledColumn) -> Inferred | None:
    delimiter = _set_delimiter(column.text)
    if delimiter is not None:
        return column.decided(
            SetFeature.type_name, f"members separated by '{delimiter}' that recur"
        )
    return None


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
