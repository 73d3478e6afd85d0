"""Where a batch-scoring job runs, decided by the backend's capabilities alone:

    backend.offers_ray      the actor pool (ray_pool.py) over the processor's partitions
    backend.launched_ranks  each horovodrun rank its slice of the rows (batch.py)
    otherwise               this process, partition by partition

Raw data (predict, evaluate) comes through the run's processor; a cache split (the test
split of an experiment) is read as it lies. Every path scores with score_partition and
merges the same partial statistics, so their predictions and metrics agree.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.processing.columns import ROW_ID
from runner.processing.pipeline import map_raw, read_raw
from runner.processing.source import DataSource
from runner.runtime import task_options
from runner.scoring.batch import (
    PartitionResult,
    ScoringTask,
    StagedParts,
    metrics_of,
    score_on_ranks,
    score_partition,
)
from runner.scoring.predictor import Predictor
from runner.scoring.ray_pool import PoolSettings, score_on_ray
from runner.storage import Location, write_frame

log = logging.getLogger(__name__)


@dataclass
class BatchOutcome:
    rows: int  # rows scored (on the main process; 0 elsewhere)
    metrics: dict | None  # labelled tasks
    stats: list[dict]  # the partial statistics the metrics came from
    predictions: Path | None  # predictions.parquet (one process) or predictions/ (parts)


def score_raw(
    predictor: Predictor,
    task: ScoringTask,
    backend,
    processor,
    source: DataSource,
    out_dir: Path,
    pool: PoolSettings | None,
) -> BatchOutcome:
    """Raw rows of `source` through the model's saved preprocessing."""
    chosen = predictor.features.all if task.labelled else predictor.features.inputs
    keep = list(task.keep_columns)
    if backend.offers_ray:
        assert pool is not None  # there is one wherever Ray is offered
        import ray
        import ray.data

        started = time.perf_counter()
        blocks = processor.ray_blocks(read_raw(processor, source, chosen, keep), ROW_ID)
        # The partitions are all read before the actors take their CPUs: reading tasks
        # queued behind actors that wait for their output would never run.
        ray.wait(blocks, num_returns=len(blocks), fetch_local=False)
        log.info(
            "%d partitions read by %s in %.2fs",
            len(blocks),
            processor.name,
            time.perf_counter() - started,
        )
        if len(blocks) < pool.actors:  # fewer partitions than actors: cut them so all work
            blocks = _split(ray, blocks, pool.actors)
        dataset = ray.data.from_pandas_refs(blocks)
        return _parts_run(
            out_dir,
            task,
            lambda parts: score_on_ray(dataset, predictor.saved, task, pool, parts),
            predictor,
        )
    if backend.launched_ranks:
        frame = read_raw(processor, source, chosen, keep)  # pandas: this rank's whole table
        return _ranks_run(predictor, frame, task, backend, out_dir)

    def one(part: pd.DataFrame, offset: int) -> PartitionResult:
        ids = np.arange(offset, offset + len(part), dtype=np.int64)
        return score_partition(predictor, part.reset_index(drop=True), ids, task)

    return _local_run(predictor, map_raw(processor, source, chosen, one, keep), task, out_dir)


def _split(ray, blocks: list, count: int) -> list:
    """The blocks cut into at least `count` blocks, by one Ray task per block (done before
    the pool starts: once its actors hold every CPU, no task could do it)."""
    each = -(-count // len(blocks))
    cut = ray.remote(num_cpus=1, num_returns=each)(_cut).options(**task_options())
    refs = [cut.remote(block, each) for block in blocks]
    refs = [r for group in refs for r in (group if isinstance(group, list) else [group])]
    ray.wait(refs, num_returns=len(refs), fetch_local=False)
    return refs


def _cut(frame: pd.DataFrame, count: int):
    bounds = np.linspace(0, len(frame), count + 1).astype(int)
    blocks = [frame.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    return blocks if count > 1 else blocks[0]


def score_split(
    predictor: Predictor,
    task: ScoringTask,
    backend,
    split: Location,
    out_dir: Path,
    pool: PoolSettings | None,
) -> BatchOutcome:
    """A processed cache split (with targets) as it lies in the cache."""
    if backend.offers_ray:
        assert pool is not None  # there is one wherever Ray is offered

        def run(parts):
            # The pool's actors read their batches' row groups of the cache themselves: no
            # Ray Data read (its start-up cost 3 s of a 100k-row run, profiled), and no task
            # that would need a CPU the pool's actors hold.
            return score_on_ray(None, predictor.saved, task, pool, parts, split)

        return _parts_run(out_dir, task, run, predictor)
    table = split.read_table()
    if backend.launched_ranks:
        return _ranks_run(predictor, table, task, backend, out_dir)
    return _local_run(predictor, [score_partition(predictor, table, None, task)], task, out_dir)


def _local_run(
    predictor: Predictor, results: list[PartitionResult], task: ScoringTask, out_dir: Path
) -> BatchOutcome:
    path = None
    if task.write_predictions:
        frames = [r.predictions for r in results]
        path = out_dir / f"{task.written}.parquet"
        write_frame(pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0], path)
    stats = [r.stats for r in results if r.stats is not None]
    return _outcome(predictor, sum(r.rows for r in results), stats, task, path)


def _ranks_run(predictor, data, task: ScoringTask, backend, out_dir: Path) -> BatchOutcome:
    final = out_dir / task.written
    parts = backend.share(StagedParts(Location(str(final)))) if task.write_predictions else None
    try:
        rows, stats = score_on_ranks(predictor, data, task, backend, parts)
        if parts is not None and backend.is_main:
            parts.publish()
    except BaseException:
        if parts is not None and backend.is_main:
            parts.discard()
        raise
    if not backend.is_main:
        return BatchOutcome(0, None, [], None)
    return _outcome(predictor, rows, stats, task, final if parts else None)


def _parts_run(out_dir: Path, task: ScoringTask, run, predictor) -> BatchOutcome:
    final = out_dir / task.written
    parts = StagedParts(Location(str(final))) if task.write_predictions else None
    try:
        rows, stats = run(parts)
        if parts is not None:
            parts.publish()
    except BaseException:
        if parts is not None:
            parts.discard()
        raise
    return _outcome(predictor, rows, stats, task, final if parts else None)


def _outcome(predictor, rows: int, stats: list[dict], task: ScoringTask, path) -> BatchOutcome:
    metrics = metrics_of(predictor, stats) if task.labelled and rows else None
    return BatchOutcome(rows, metrics, stats, path)
