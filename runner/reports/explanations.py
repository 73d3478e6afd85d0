"""command=explain's summary of explanations.parquet (or its parts, read batch by batch, so a
large file's explanations never sit in memory at once): the mean |attribution| of each input,
the rows whose output moved furthest from the base, and their chart."""

from __future__ import annotations

import heapq
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds

from runner.reports.evaluation import pyplot, save_figure

PREFIX = "attribution."
EXTREME_ROWS = 10
TOP_INPUTS = 3  # named per extreme row


def summarize(path: Path) -> dict:
    """{"rows", "mean_abs": [{"input", "value"}, ...] largest first, "extreme_rows": [...]}."""
    data = ds.dataset(str(path), format="parquet")
    inputs = [n.removeprefix(PREFIX) for n in data.schema.names if n.startswith(PREFIX)]
    totals, rows = np.zeros(len(inputs)), 0
    extreme: list[tuple[float, int, dict]] = []  # a heap of the furthest moved rows
    for batch in data.to_batches():
        frame = batch.to_pandas()
        if not len(frame):
            continue
        shares = frame[[PREFIX + name for name in inputs]].to_numpy(np.float64)
        totals += np.abs(shares).sum(axis=0)
        rows += len(frame)
        moved = (frame["output"] - frame["base"]).abs().to_numpy()
        for i in np.argsort(-moved)[:EXTREME_ROWS]:
            entry = _row(frame, i, inputs, shares[i])
            item = (float(moved[i]), -int(frame["row"].iloc[i]), entry)
            if len(extreme) < EXTREME_ROWS:
                heapq.heappush(extreme, item)
            elif item[:2] > extreme[0][:2]:
                heapq.heapreplace(extreme, item)
    mean_abs = totals / max(rows, 1)
    order = np.argsort(-mean_abs, kind="stable")
    return {
        "rows": rows,
        "mean_abs": [{"input": inputs[i], "value": float(mean_abs[i])} for i in order],
        "extreme_rows": [entry for *_, entry in sorted(extreme, key=lambda e: e[:2], reverse=True)],
    }


def _row(frame, i: int, inputs: list[str], shares: np.ndarray) -> dict:
    top = np.argsort(-np.abs(shares))[:TOP_INPUTS]
    entry = {
        "row": int(frame["row"].iloc[i]),
        "output": float(frame["output"].iloc[i]),
        "base": float(frame["base"].iloc[i]),
        "top_inputs": {inputs[j]: float(shares[j]) for j in top},
    }
    if "class" in frame:
        entry["class"] = str(frame["class"].iloc[i])
    return entry


def plot_attributions(summary: dict, importance: dict | None, path: Path) -> None:
    """Mean |attribution| per input, beside the model's permutation importance when its
    training run measured one (each on its own scale: they answer different questions)."""
    plt = pyplot()
    names = [f["input"] for f in summary["mean_abs"]][:40]
    panels = 2 if importance else 1
    fig, axes = plt.subplots(
        1, panels, figsize=(6 * panels, max(2.5, 0.3 * len(names) + 1)), squeeze=False
    )
    values = {f["input"]: f["value"] for f in summary["mean_abs"]}
    axes[0][0].barh(range(len(names)), [values[n] for n in names], color="tab:purple")
    axes[0][0].set(xlabel="mean |attribution|", title=f"attributions ({summary['rows']} rows)")
    if importance:
        falls = {f["input"]: f["mean"] for f in importance["features"]}
        axes[0][1].barh(range(len(names)), [falls.get(n, 0.0) for n in names], color="tab:blue")
        axes[0][1].set(
            xlabel=f"fall in {importance['metric']}", title="permutation importance (training)"
        )
    for ax in axes[0]:
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.axvline(0, color="grey", linewidth=0.8)
    fig.tight_layout()
    save_figure(fig, path)
