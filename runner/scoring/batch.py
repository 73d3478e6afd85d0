"""Batch scoring (predict, evaluate, the test split of an experiment): one function scores
one partition; the drivers below and in ray_pool.py only decide where partitions go.

    in this process        every partition here; predictions -> one predictions.parquet
    horovodrun ranks       each rank scores its own slice of the rows (scored once)
    a Ray actor pool       ray_pool.py: partitions stay in the cluster

Distributed drivers write predictions as Parquet parts named by their first row into a
staging directory that becomes predictions/ only when every part is in, and merge the
metrics' partial statistics (scoring/metrics.py), so nothing row-sized reaches the driver.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from runner.scoring.decoding import finish_metrics, merge_metrics, partial_metrics
from runner.scoring.predictor import Predictor
from runner.storage import Location


@dataclass(frozen=True)
class ScoringTask:
    labelled: bool  # the rows carry targets: metric statistics come back (evaluate, test split)
    write_predictions: bool
    processed: bool = False  # rows of a cache split (already transformed), not raw data
    keep_columns: tuple[str, ...] = ()  # raw columns copied beside `row` (predict.keep_columns)
    # The Arrow type each kept column has in the whole table (a CSV's are read as strings).
    keep_types: tuple[tuple[str, pa.DataType], ...] = ()
    explain: bool = False  # per-row attributions (runner/scoring/explain.py), not predictions
    explain_steps: int = 64  # integrated gradients' (explain.steps)

    @property
    def written(self) -> str:
        """What the rows written are called: <written>.parquet, or a <written>/ of parts."""
        return "explanations" if self.explain else "predictions"


@dataclass
class PartitionResult:
    predictions: pd.DataFrame | None
    stats: dict | None  # the metrics' partial statistics (labelled tasks)
    rows: int  # rows scored (rows an input's drop_row strategy removes are not)


def score_partition(
    predictor: Predictor,
    data: pd.DataFrame | pa.Table,
    row_ids: np.ndarray | None,
    task: ScoringTask,
) -> PartitionResult:
    """Scores one partition: raw rows (a DataFrame with their global row numbers) or processed
    rows (an Arrow table of a cache split, which carries its row numbers)."""
    if task.explain:
        from runner.scoring.explain import explain_processed

        table = data if task.processed else predictor.processed(data, False, row_ids=row_ids)
        explained = explain_processed(predictor, table, task.explain_steps)
        return PartitionResult(explained, None, len(explained))
    if task.processed:
        scored = predictor.score_processed(data, task.labelled)
    elif task.labelled:
        scored = predictor.score_labelled(data, row_ids=row_ids)
    else:
        scored = predictor.score_inputs(data, row_ids=row_ids)
    stats = None
    if task.labelled:
        stats = partial_metrics(predictor.layout, predictor.decoders, scored.logits, scored.targets)
    predictions = None
    if task.write_predictions:
        predictions = predictor.prediction_frame(scored, with_targets=task.labelled)
        if task.keep_columns:
            positions = pd.Index(row_ids).get_indexer(scored.row_ids)
            types = dict(task.keep_types)
            for i, name in enumerate(task.keep_columns):
                values = data[name].to_numpy()[positions]
                if name in types and values.dtype == object:  # strings, as a CSV reads
                    values = typed_values(values, types[name])
                predictions.insert(1 + i, name, values)
    return PartitionResult(predictions, stats, len(scored.row_ids))


def typed_values(values, type_: pa.DataType):
    """Strings read from a CSV as the type their whole column has (the kept columns'
    reading already parsed every one of them that way)."""
    import pyarrow.compute as pc

    strings = pc.utf8_trim_whitespace(pa.array(values, pa.string(), from_pandas=True))
    if pa.types.is_floating(type_):
        strings = pc.replace_substring(strings, ",", ".")  # a decimal comma, where the file has it
    if pa.types.is_boolean(type_):
        strings = pc.utf8_lower(strings)
    return strings.cast(type_).to_pandas(types_mapper=_nullable)


def _nullable(type_: pa.DataType):
    """Whole numbers and booleans with missing values stay whole numbers and booleans."""
    return {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}.get(type_)


def metrics_of(predictor: Predictor, stats: Iterable[dict]) -> dict[str, float]:
    """The metrics of all partitions from their partial statistics."""
    return finish_metrics(predictor.layout, merge_metrics(predictor.layout, list(stats)))


def part_name(first_row: int) -> str:
    """Parts sort in row order by name."""
    return f"part-{first_row:012d}.parquet"


class StagedParts:
    """A directory of Parquet parts written by many processes into <final>.partial-<id>/,
    renamed to <final> once every part is in; removed if the run fails, so that a
    predictions/ directory is always complete."""

    def __init__(self, final: Location):
        self.final = final
        self.staging = Location(f"{final.url}.partial-{uuid.uuid4().hex[:8]}", final.options)

    def write(self, frame: pd.DataFrame, first_row: int) -> None:
        table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)
        self.staging.write_parquet(table, part_name(first_row))

    def publish(self, schema_frame: pd.DataFrame | None = None) -> None:
        """Every part is in: the staging directory becomes <final> (an empty result still
        gets one empty part, so readers find the columns)."""
        fs = self.staging.fs
        if not fs.exists(self.staging.path) or not self.staging.files():
            if schema_frame is not None:
                self.write(schema_frame.iloc[:0], 0)
            else:
                fs.makedirs(self.staging.path, exist_ok=True)
        if fs.exists(self.final.path):
            fs.rm(self.final.path, recursive=True)
        fs.mv(self.staging.path, self.final.path, recursive=True)

    def discard(self) -> None:
        fs = self.staging.fs
        if fs.exists(self.staging.path):
            fs.rm(self.staging.path, recursive=True)


def shard_bounds(rows: int, rank: int, size: int) -> tuple[int, int]:
    """Rank's contiguous slice of `rows` rows: sizes differ by at most one."""
    return rows * rank // size, rows * (rank + 1) // size


def score_on_ranks(
    predictor: Predictor, data, task: ScoringTask, backend, parts: StagedParts | None
) -> tuple[int, list[dict]]:
    """Under horovodrun: each rank scores its slice of the table's rows, writes its own part
    and sends its statistics to rank 0. Returns (rows, statistics of each rank) on rank 0."""
    rows = data.num_rows if task.processed else len(data)
    low, high = shard_bounds(rows, backend.rank, backend.size)
    if task.processed:
        shard, row_ids = data.slice(low, high - low), None
    else:
        shard = data.iloc[low:high].reset_index(drop=True)
        row_ids = np.arange(low, high, dtype=np.int64)
    result = score_partition(predictor, shard, row_ids, task)
    if parts is not None and result.predictions is not None and result.rows:
        parts.write(result.predictions, low)
    gathered = backend.gather((result.rows, result.stats))  # also the barrier before publish
    if not backend.is_main:
        return 0, []
    return sum(n for n, _ in gathered), [s for _, s in gathered if s is not None]
