"""Permutation feature importance: how much the main metric of the first output falls when
one input's values are shuffled across rows (Breiman, 2001), on a sample of a labelled split,
scored through the Predictor's own scoring (score_processed, as every scoring path scores).

A feature's processed columns (x, x.missing, a date's parts) are shuffled together with one
permutation, which is the same as shuffling its raw column: the transforms work row by row.
The sample is scored in this process: at the default 10,000 rows, Ray's actor pool would
spend more on its start than on the scoring (predict.pool_min_rows is 1,000,000)."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from runner.model.base import against_reference
from runner.model.layout import feature_columns
from runner.reports.evaluation import pyplot, save_figure
from runner.scoring.metrics import higher_is_better

# The fewest rows importance samples to fit within time_limit.
LEAST_ROWS = 500


def permutation_importance(
    predictor,
    table: pa.Table,
    rows: int = 10000,
    repeats: int = 3,
    seed: int = 0,
    seconds: float | None = None,
) -> dict:
    """`seconds`: what time_limit leaves for it; where the first scoring says the rows would
    take longer, fewer rows (at least LEAST_ROWS) are sampled."""
    rng = np.random.default_rng(seed)
    sampled = table
    if table.num_rows > rows:
        sampled = table.take(np.sort(rng.choice(table.num_rows, rows, replace=False)))
    spec = predictor.layout.outputs[0]
    metric = f"{spec.name}/{spec.head.metrics[0]}"
    sign = 1.0 if higher_is_better(metric) else -1.0

    def score(t: pa.Table) -> float:
        # One chunk: the model sees the same rows each time (against_reference).
        scored = predictor.score_processed(t, True, chunk_rows=max(t.num_rows, 1))
        return float(predictor.metrics(scored)[metric])

    features = {}
    names = feature_columns(sampled.column_names, predictor.input_names)
    with against_reference(predictor.saved.model):
        started = time.perf_counter()
        base = score(sampled)
        needed = (time.perf_counter() - started) * len(names) * repeats
        if seconds is not None and needed > seconds and sampled.num_rows > LEAST_ROWS:
            fewer = max(LEAST_ROWS, int(sampled.num_rows * max(seconds, 0.0) / needed))
            sampled = table.take(np.sort(rng.choice(table.num_rows, fewer, replace=False)))
            base = score(sampled)
        table = sampled
        for name, columns in names.items():
            drops = []
            for _ in range(repeats):
                order = rng.permutation(table.num_rows)
                shuffled = table
                for column in columns:
                    index = shuffled.schema.get_field_index(column)
                    values = table.column(column).take(order)
                    shuffled = shuffled.set_column(index, column, values)
                drops.append(sign * (base - score(shuffled)))
            features[name] = {"mean": float(np.mean(drops)), "std": float(np.std(drops))}
    # A list, most important first (metrics.json sorts the keys of a mapping).
    ranked = [{"input": k, **v} for k, v in sorted(features.items(), key=lambda kv: -kv[1]["mean"])]
    return {
        "metric": metric,
        "value": base,
        "rows": table.num_rows,
        "repeats": repeats,
        "features": ranked,
    }


def plot_importance(importance: dict, path) -> None:
    plt = pyplot()
    features = importance["features"][:40]
    names = [f["input"] for f in features]
    fig, ax = plt.subplots(figsize=(7, max(2.5, 0.3 * len(names) + 1)))
    ax.barh(
        range(len(names)),
        [f["mean"] for f in features],
        xerr=[f["std"] for f in features],
        color="tab:blue",
    )
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set(
        xlabel=f"fall in {importance['metric']} when shuffled",
        title=f"permutation importance ({importance['rows']} rows, {importance['repeats']} repeats)",
    )
    fig.tight_layout()
    save_figure(fig, path)
