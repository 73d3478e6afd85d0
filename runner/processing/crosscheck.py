"""Type inference's sample checked against the whole training split, in the fit pass it already makes.

A column that type inference left out as constant or as an ID was judged from a sample; the
fit pass sees every training row, so it counts each such column's distinct values (exactly up
to DISTINCT_EXACT, estimated above it by a k-minimum-values sketch of their hashes, which
merges across partitions) and the log warns where the sample was wrong.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from runner.processing.features.base import as_strings

# Distinct values counted exactly up to this many; estimated (about 3 % error) above it.
DISTINCT_EXACT = 1024
# An ID has at least this share of distinct values (inference.ID_SHARE, less the estimate's
# error: a warning only where the split clearly is not one).
ID_SHARE = 0.9


def partial_counts(frame: pd.DataFrame, columns: list[str]) -> dict:
    """Per column: its present values' count and the smallest DISTINCT_EXACT hashes."""
    counts = {}
    for name in columns:
        values = as_strings(frame[name]).dropna()
        values = values[values.str.strip() != ""]
        hashes = np.unique(pd.util.hash_array(values.to_numpy(dtype=object)))
        counts[name] = {"rows": len(values), "hashes": hashes[:DISTINCT_EXACT]}
    return counts


def combine_counts(partials: list[dict], reasons: dict[str, str]) -> dict:
    """{column: {reason, distinct, rows}} from the partitions' partial counts."""
    combined = {}
    for name, reason in reasons.items():
        parts = [p[name] for p in partials if name in p]
        if not parts:
            continue
        hashes = np.unique(np.concatenate([p["hashes"] for p in parts]))
        if len(hashes) < DISTINCT_EXACT:
            distinct = len(hashes)
        else:  # the k-th smallest of n uniform hashes lies near k / n of the range
            kth = float(hashes[DISTINCT_EXACT - 1]) / 2.0**64
            distinct = round((DISTINCT_EXACT - 1) / kth)
        rows = sum(p["rows"] for p in parts)
        combined[name] = {"reason": reason, "distinct": int(min(distinct, rows)), "rows": rows}
    return combined


def sample_misses(checked: dict) -> list[str]:
    """One warning per column the whole training split shows was left out wrongly."""
    lines = []
    for name, c in checked.items():
        if c["reason"].startswith("constant") and c["distinct"] > 1:
            seen = f"{c['distinct']} distinct values"
        elif c["reason"].startswith("an ID") and c["distinct"] < ID_SHARE * c["rows"]:
            seen = f"{c['distinct'] / max(c['rows'], 1):.0%} distinct values"
        else:
            continue
        lines.append(
            f"column '{name}' was left out ({c['reason']}, in inference's sample), but the "
            f"training split has {seen} in {c['rows']} rows; to use it, list it in "
            "model.input_features (command=init writes them) or raise dataset.inference_rows"
        )
    return lines
