"""A probe for issue 27, not a product feature: does an out-of-fold supervised score of a text
column, given to the runner as one extra number input, close imdb_movies' gap to gradient
boosting? It wraps bench/accuracy.py: each split's table gets `<text>_score0`, computed on the
training split only, before the runner reads it (gradient boosting and the other baselines do
not see it). Results in docs/accuracy.md.

    python bench/text_score_probe.py ridge  --tables imdb_movies --seeds 0,1,2,3,4 --out DIR
    python bench/text_score_probe.py tokens --tables imdb_movies --seeds 0,1,2,3,4 --out DIR

ridge:  TF-IDF (words and word pairs, min_df 2, sublinear tf) + ridge (alpha 10) on the
        target (regression or binary); training rows get the prediction of the fold that left them out (5 folds),
        validation and test rows that of the fit on every training row.
tokens: per-word target sums and counts (what merges across partitions as vocabulary counts
        do); a row's score is the training mean plus the sum over its distinct words of each
        word's smoothed deviation ((sum + 30 mean) / (count + 30) - mean); a binary target as
        0/1, a multiclass one as one score per class (its 0/1 indicator). Training rows read
        the statistics without their own fold (5 folds by a hash of the text, so equal texts
        share one), validation and test rows all of them.
"""

from __future__ import annotations

import re
import sys
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import accuracy  # noqa: E402

FOLDS = 5
RIDGE_ALPHA = 10.0
TOKEN_SMOOTHING = 30.0
WORD = re.compile(r"\w+")


def targets(task: str, target: pd.Series, train: np.ndarray) -> np.ndarray:
    """Rows x 1 (the value; a binary target as 0/1), or rows x classes (one-hot) for multiclass."""
    if task == "regression":
        return target.to_numpy(dtype=float)[:, None]
    classes = sorted(target[train].astype(str).unique())
    onehot = (target.astype(str).to_numpy()[:, None] == np.array(classes)[None, :]).astype(float)
    return onehot[:, 1:2] if task == "binary" else onehot


def ridge_score(text: pd.Series, y: np.ndarray, train: np.ndarray) -> np.ndarray:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import KFold

    def fit_predict(fit_rows: np.ndarray, rows: np.ndarray) -> np.ndarray:
        tfidf = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
        matrix = tfidf.fit_transform(text.iloc[fit_rows])
        mean = y[fit_rows].mean()
        model = Ridge(alpha=RIDGE_ALPHA).fit(matrix, y[fit_rows] - mean)
        return model.predict(tfidf.transform(text.iloc[rows])) + mean

    y = y[:, 0]  # regression or binary
    score = np.zeros(len(text))
    train_rows = np.flatnonzero(train)
    for fit, held in KFold(FOLDS, shuffle=True, random_state=0).split(train_rows):
        score[train_rows[held]] = fit_predict(train_rows[fit], train_rows[held])
    rest = np.flatnonzero(~train)
    score[rest] = fit_predict(train_rows, rest)
    return score[:, None]


def token_score(text: pd.Series, y: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Rows x targets (one column per y column)."""
    lower = [t.lower() for t in text]
    words = [sorted(set(WORD.findall(t))) for t in lower]
    fold = np.array([zlib.crc32(t.encode()) % FOLDS for t in lower])
    prior = y[train].mean(axis=0)
    sums: dict = defaultdict(lambda: np.zeros((FOLDS, y.shape[1])))
    counts: dict = defaultdict(lambda: np.zeros(FOLDS))
    for i in np.flatnonzero(train):
        for word in words[i]:
            sums[word][fold[i]] += y[i]
            counts[word][fold[i]] += 1
    score = np.tile(prior, (len(text), 1))
    for i, row in enumerate(words):
        for word in row:
            if word not in sums:
                continue
            total, count = sums[word].sum(axis=0), counts[word].sum()
            if train[i]:  # out of fold: without the row's own fold
                total, count = total - sums[word][fold[i]], count - counts[word][fold[i]]
            if count > 0:
                score[i] += (total + TOKEN_SMOOTHING * prior) / (count + TOKEN_SMOOTHING) - prior
    return score


METHODS = {"ridge": ridge_score, "tokens": token_score}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in METHODS:
        sys.exit(f"error: the first argument is the method; use one of: {', '.join(METHODS)}")
    method = METHODS[sys.argv[1]]
    prepare = accuracy.prepare

    def with_score(table, work, seed):
        frame, prepared = prepare(table, work, seed)
        train = (frame["split"] == "train").to_numpy()
        y = targets(table.task, frame[accuracy.TARGET], train)
        names = []
        for column in table.text:
            scores = method(frame[column].fillna("").astype(str), y, train)
            for k in range(scores.shape[1]):
                names.append(f"{column}_score{k}")
                frame[names[-1]] = scores[:, k]
        frame.to_parquet(prepared["path"], index=False)
        conf = work / "conf" / "model" / f"{table.name}.yaml"
        model = yaml.safe_load(conf.read_text())
        known = {f["name"] for f in model["input_features"]}
        model["input_features"] += [{"name": n, "type": "number"} for n in names if n not in known]
        conf.write_text(yaml.safe_dump(model, sort_keys=False))
        return frame, prepared

    accuracy.prepare = with_score
    accuracy.main(sys.argv[2:])


if __name__ == "__main__":
    main()
