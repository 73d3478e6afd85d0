"""What a model fitted outside the training loop (trees, the ensemble) shares: the splits read
as the batch's input groups, an evenly spaced sample of them, its metrics through the one
scoring path, and its TrainingResult."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch

from runner.loading.row_spans import read_spans, row_groups
from runner.loading.tensors import TensorTable
from runner.model.layout import Layout
from runner.scoring.decoding import Decoders, compute_metrics, constant_logits
from runner.storage import Location
from runner.training.job import TrainingResult


def read_split(splits: Location, split: str, layout: Layout):
    """A split's rows as the batch's input groups."""
    return TensorTable.from_arrow(splits.join(split).read_table(), layout)


def read_spread(splits: Location, split: str, layout: Layout, most: int) -> TensorTable:
    """At most `most` of a split's rows, evenly spaced (as spread picks them), read a row group
    at a time: the driver of trees trained on Ray never holds the whole split."""
    groups = row_groups(splits.join(split))
    rows = sum(g[2] for g in groups)
    if rows <= most:
        return read_split(splits, split, layout)
    wanted = spread_index(rows, most).numpy()
    parts, offset = [], 0
    for path, index, count, _ in groups:
        local = wanted[(wanted >= offset) & (wanted < offset + count)] - offset
        if len(local):
            table = read_spans(splits.join(split), [(path, index, 0, count)])
            parts.append(table.take(pa.array(local)))
        offset += count
    return TensorTable.from_arrow(pa.concat_tables(parts), layout)


def fitted_result(
    model, layout, meta, train, validation, evals, best, scored=True
) -> TrainingResult:
    """A TrainingResult for a model fitted outside the loop: the loss curve at the rounds the
    training loss was recorded (at most CURVE_POINTS), and the scoring path's metrics on
    train and validation at the kept round, as the entry of that round."""
    decoders = Decoders(meta)
    metrics: dict[str, dict] = {"train": {}, "validation": {}}
    if scored:
        tables = (("train", spread(train, TRAIN_METRIC_ROWS)), ("validation", validation))
        metrics = {name: model_metrics(model, layout, decoders, t) for name, t in tables}
    train_losses: dict[int, float] = evals.get("train_rounds", {})
    validation_losses: list = next(iter(evals.get("validation", {}).values()), [])
    history = []
    for i in sorted({*train_losses, best}):
        entry: dict = {"epoch": i, "train": {}, "validation": {}}
        if i in train_losses:
            entry["train"] = {"loss": train_losses[i]}
        if i <= len(validation_losses):
            entry["validation"] = {"loss": float(validation_losses[i - 1])}
        history.append({"epoch": i, **metrics} if i == best else entry)
    baseline = {}
    if len(validation):
        targets = {k: v.numpy() for k, v in validation.targets.items()}
        constants = constant_logits(layout, decoders, len(validation))
        baseline = compute_metrics(layout, decoders, constants, targets)
    return TrainingResult(
        history=history,
        best_epoch=best,
        best_value=metrics["validation"].get("loss", float("nan")),
        stopped_early=best < len(validation_losses),
        validation_baseline=baseline,
        model=model,
    )


# A model fitted outside the loop (trees, the ensemble) records its training loss about this
# many times, and its training metrics from at most TRAIN_METRIC_ROWS training rows, evenly
# spaced: scoring 700k rows with 1,700 trees took 46 of the 80 s between boosting and the
# test split at 1M rows (the network's come from its epochs' running sums). Validation and
# test are scored whole.
CURVE_POINTS = 100


TRAIN_METRIC_ROWS = 100_000


def spread_index(rows: int, most: int) -> torch.Tensor:
    """The positions of `most` evenly spaced rows of `rows` (the first and the last among them)."""
    return torch.linspace(0, rows - 1, most).round().long()


def spread(table: TensorTable, most: int) -> TensorTable:
    """At most `most` rows of `table`, evenly spaced (all when fewer)."""
    if len(table) <= most:
        return table
    index = spread_index(len(table), most)
    inputs, targets = table.take(index)
    return TensorTable(inputs, targets, table.row_ids.index_select(0, index))


def model_metrics(
    model, layout: Layout, decoders: Decoders, table: TensorTable
) -> dict[str, float]:
    if not len(table):
        return {}
    logits = model_logits(model, layout, table)
    targets = {k: v.numpy() for k, v in table.targets.items()}
    return compute_metrics(layout, decoders, logits, targets)


def model_logits(model, layout: Layout, table: TensorTable) -> dict[str, np.ndarray]:
    from runner.scoring.forward import score

    return score(model, table.chunks(65536), layout).logits
