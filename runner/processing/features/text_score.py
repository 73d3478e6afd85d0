"""A text's target score: one number per row that says what the training split's targets were
for the text's words. Each word's smoothed mean target, as a deviation from the training mean,
summed over the row's distinct words, on top of that mean. It carries the supervised signal of
rare words that an embedding per word learns from a handful of rows (issue 27: on film titles
it closed most of the gap to gradient boosting, docs/accuracy.md).

Its statistics are sums and counts per word, merged across partitions like the vocabulary's
counts, so every processor fits the same score. They are kept per fold (FOLDS folds by a hash
of the row's tokens, so equal texts share one): a training row is scored out of fold, without
its own fold's targets, so no row's own target reaches its own input; every other row (the
validation and test splits, a Predictor's, a server's) is scored with all of them.
"""

from __future__ import annotations

import zlib
from collections import defaultdict

import numpy as np
import pandas as pd

from runner.processing.features.base import as_strings, numbers_from_text

FOLDS = 5
# `auto` scores texts of at most this many distinct vocabulary words per row on average. On the
# accuracy suite it gained on film titles (2.9 words: +0.008 R2, and +0.009 on 10k rows of them)
# and tweets (18.5: +0.002 ROC AUC) and lost on reviews (52.8: -0.014): a sum over many words'
# deviations, each from few rows, is mostly noise (docs/accuracy.md).
AUTO_MAX_WORDS_PER_ROW = 32.0
SMOOTHING = 30.0  # a word's mean is shrunk to the training mean as if by this many rows
# Targets it scores: a number (its value) or a binary one (the rate of its positive class).
TARGET_TYPES = ("number", "binary")


def folds_of(token_lists: list[list[str]]) -> np.ndarray:
    """Each row's fold, from a hash of its tokens: the same in the fit and the transform."""
    return np.fromiter(
        (zlib.crc32("\x1f".join(t).encode()) % FOLDS for t in token_lists),
        dtype=np.int64,
        count=len(token_lists),
    )


def _row_words(token_lists: list[list[str]], codes: np.ndarray, width: int):
    """(row, word code) of each distinct word of each row, from the flat tokens' codes in row
    order; a negative code (a word outside the index) is left out."""
    lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=len(token_lists))
    rows = np.repeat(np.arange(len(token_lists)), lengths)
    known = codes >= 0
    pairs = np.unique(rows[known] * width + codes[known])
    return pairs // width, pairs % width


def partial_stats(token_lists: list[list[str]], target: pd.Series, target_type: str) -> dict:
    """Per fold, and per word and fold: the rows (a word once per row) and their targets' sums
    by target key (a number's: "", a binary target's: each spelling of its values, which the
    output's own fit reads as classes). Rows without a target count for nothing."""
    if target_type == "number":
        values = numbers_from_text(target).to_numpy(dtype=np.float64)
        has_target = np.isfinite(values)
        key_codes = np.zeros(len(values), dtype=np.int64)
        keys = [""]
    else:
        strings = as_strings(target)
        has_target = strings.notna().to_numpy()
        key_codes, uniques = pd.factorize(strings)
        keys = [str(k) for k in uniques]
        values = np.ones(len(strings))
    folds = folds_of(token_lists)
    targeted = np.flatnonzero(has_target)
    fold_rows = np.bincount(folds[targeted], minlength=FOLDS)
    fold_totals = np.bincount(
        key_codes[targeted] * FOLDS + folds[targeted],
        values[targeted],
        minlength=len(keys) * FOLDS,
    ).reshape(len(keys), FOLDS)
    word_codes, words = pd.factorize(pd.Series([w for t in token_lists for w in t], dtype=object))
    row, word = _row_words(token_lists, word_codes, max(len(words), 1))
    row, word = row[has_target[row]], word[has_target[row]]  # only rows with a target
    cell = word * FOLDS + folds[row]
    counts = np.bincount(cell, minlength=len(words) * FOLDS).reshape(-1, FOLDS)
    sums = np.bincount(
        cell * len(keys) + key_codes[row], values[row], minlength=len(words) * FOLDS * len(keys)
    ).reshape(len(words), FOLDS, len(keys))
    # As Python lists up front: one dict per word is built from them, with no numpy call per
    # word (profiled: 38k words of imdb's titles cost 0.3 s in per-word numpy calls).
    present = np.logical_or(sums.any(axis=1), target_type == "number").tolist()  # [word][key]
    rows_of = counts.tolist()
    sums_of = [sums[:, :, k].tolist() for k in range(len(keys))]
    entries = {}
    for i in np.flatnonzero(counts.sum(axis=1)).tolist():
        entries[str(words[i])] = {
            "rows": rows_of[i],
            "sums": {keys[k]: sums_of[k][i] for k in range(len(keys)) if present[i][k]},
        }
    return {
        "rows": fold_rows.tolist(),
        "totals": {keys[k]: fold_totals[k].tolist() for k in range(len(keys))},
        "words": entries,
    }


def spelling_counts(partials: list[dict]) -> dict[str, int]:
    """A binary target's rows by spelling (what its output feature's fit reads as classes)."""
    counts: dict = defaultdict(int)
    for p in partials:
        for key, sums in p["totals"].items():
            counts[key] += int(round(sum(sums)))
    return dict(counts)


def combine(partials: list[dict], vocabulary: list[str], keys: list[str]) -> dict | None:
    """The merged statistics of the vocabulary's words, the target being the sum of `keys`'
    sums (a number's [""], a binary target's positive spellings); None without a target."""
    fold_rows = np.sum([p["rows"] for p in partials], axis=0)
    rows = int(fold_rows.sum())
    if rows == 0:
        return None
    fold_totals = np.zeros(FOLDS)
    for p in partials:
        for key in keys:
            fold_totals += p["totals"].get(key, 0.0)
    kept = [w for w in vocabulary if " " not in w]  # words, not word pairs
    index = {w: i for i, w in enumerate(kept)}
    counts = np.zeros((len(kept), FOLDS))
    sums = np.zeros((len(kept), FOLDS))
    for p in partials:
        for word, entry in p["words"].items():
            i = index.get(word)
            if i is None:
                continue
            counts[i] += entry["rows"]
            for key in keys:
                if key in entry["sums"]:
                    sums[i] += entry["sums"][key]
    # Each fold's own prior is the mean without it: a training row's out-of-fold score then
    # holds nothing of its own target, not even through the mean it is shrunk towards.
    outside = rows - fold_rows
    total = fold_totals.sum()
    priors = np.where(outside > 0, (total - fold_totals) / np.maximum(outside, 1), total / rows)
    return {
        "training_rows": rows,
        # distinct vocabulary words per row with a target, on average (`auto` reads it)
        "words_per_row": float(counts.sum()) / rows,
        "prior": float(total) / rows,
        "fold_priors": priors.tolist(),
        "words": kept,
        # words x folds, as numbers (sums merged in another order round differently: compared
        # within a tolerance, not as bytes)
        "counts": counts.astype(np.int64).tolist(),
        "sums": sums.tolist(),
    }


def deviations(fitted: dict) -> tuple[np.ndarray, np.ndarray]:
    """(each word's deviation from the prior with every fold; words x folds: without that
    fold, from that fold's own prior)."""
    counts = np.asarray(fitted["counts"], dtype=np.float64).reshape(-1, FOLDS)
    sums = np.asarray(fitted["sums"], dtype=np.float64).reshape(-1, FOLDS)
    prior, priors = float(fitted["prior"]), np.asarray(fitted["fold_priors"], dtype=np.float64)
    n_all, s_all = counts.sum(axis=1), sums.sum(axis=1)
    full = (s_all + SMOOTHING * prior) / (n_all + SMOOTHING) - prior
    n_out = n_all[:, None] - counts
    s_out = s_all[:, None] - sums
    out = np.where(n_out > 0, (s_out + SMOOTHING * priors) / (n_out + SMOOTHING) - priors, 0.0)
    return full, out


def raw_scores(
    token_lists: list[list[str]], fitted: dict, index: pd.Index, devs, training: np.ndarray | None
) -> np.ndarray:
    """The prior plus the row's distinct words' deviations; out of fold where `training`
    marks the row (its fold's prior and the other folds' sums)."""
    full, out = devs
    scores = np.full(len(token_lists), float(fitted["prior"]))
    inside = np.zeros(len(token_lists), dtype=bool) if training is None else training
    folds = np.zeros(len(token_lists), dtype=np.int64)
    if inside.any():
        folds = folds_of(token_lists)
        scores[inside] = np.asarray(fitted["fold_priors"])[folds[inside]]
    flat = [w for tokens in token_lists for w in tokens]
    if not flat or len(index) == 0:
        return scores
    positions = index.get_indexer(pd.Index(flat, dtype=object))
    row, word = _row_words(token_lists, positions, len(index))
    contribution = np.where(inside[row], out[word, folds[row]], full[word])
    scores += np.bincount(row, weights=contribution, minlength=len(token_lists))
    return scores
