"""Batch scoring on Ray: a pool of actors, each holding the model once, scores the
partitions where they live (Ray Data's map_batches with a fixed actor pool) and writes its
predictions as Parquet parts itself; the driver gets one small record per batch (its row
count and the metrics' partial statistics)."""

from __future__ import annotations

import logging
import pickle
from dataclasses import dataclass

import numpy as np
import pandas as pd

from runner.errors import UserError
from runner.loading.heap import release_free_pages
from runner.loading.row_spans import read_spans, row_groups, spans_of
from runner.model.artifact import SavedModel
from runner.processing.columns import ROW_ID
from runner.runtime import require_ray
from runner.scoring.batch import ScoringTask, StagedParts, score_partition
from runner.scoring.predictor import Predictor
from runner.storage import Location

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolSettings:
    """The actors of the pool, from the trainer's keys (num_workers, resources_per_worker,
    use_gpu) and predict.batch_size."""

    actors: int
    batch_rows: int
    resources: dict  # one actor's, as resources_per_worker: {CPU: 1, GPU: 1, custom: 2}
    min_rows: int = 0  # a cache split of fewer rows is scored in this process (no pool)

    def ray_options(self) -> dict:
        custom = {k: v for k, v in self.resources.items() if k not in ("CPU", "GPU")}
        return {
            "num_cpus": self.resources.get("CPU", 1.0),
            "num_gpus": self.resources.get("GPU", 0.0),
            **({"resources": custom} if custom else {}),
        }


class PartitionScorer:
    """One actor of the pool: loads the model once, then scores batch after batch."""

    def __init__(
        self,
        saved: SavedModel,
        task: ScoringTask,
        parts: StagedParts | None,
        threads,
        split: Location | None = None,
        batches: list | None = None,
    ):
        import torch

        torch.set_num_threads(max(1, int(threads)))  # its share of the node, not every core
        device = torch.device("cpu")
        if isinstance(saved.model, torch.nn.Module) and torch.cuda.is_available():
            device = torch.device("cuda")  # a network's forward; trees predict on the CPU
            saved.model.to(device)
        self.predictor = Predictor(saved, device=device)
        self.task, self.parts = task, parts
        self.split, self.batches = split, batches  # a cache split: the spans of each batch

    def __call__(self, batch) -> pd.DataFrame:
        if self.batches is not None:  # numbers of a cache split's batches: read here, rows
            numbers = batch["batch"].to_pylist()  # carrying their own row numbers
            spans = [span for n in numbers for span in self.batches[n]]
            assert self.split is not None  # given with the batches
            data, row_ids = read_spans(self.split, spans), None
        else:
            row_ids = batch[ROW_ID].to_numpy(dtype=np.int64)
            data = batch.drop(columns=[ROW_ID]).reset_index(drop=True)
        try:
            result = score_partition(self.predictor, data, row_ids, self.task)
        except UserError as error:
            # Returned, not raised: Ray Data's wrapping of a raised error loses the original
            # across processes, and the driver owes the user its one line.
            return pd.DataFrame({"rows": [0], "stats": [pickle.dumps(None)], "error": [str(error)]})
        if self.parts is not None and result.rows:
            assert result.predictions is not None  # parts are staged only when writing them
            self.parts.write(result.predictions, int(result.predictions["row"].iloc[0]))
        return pd.DataFrame(
            {"rows": [result.rows], "stats": [pickle.dumps(result.stats)], "error": [""]}
        )


def score_on_ray(
    dataset,
    saved: SavedModel,
    task: ScoringTask,
    settings: PoolSettings,
    parts,
    split: Location | None = None,
) -> tuple[int, list[dict]]:
    """Scores a Ray Dataset of raw blocks with ROW_ID, or a cache split (`split`, read by
    the actors batch by batch), with the actor pool; returns (rows scored, each batch's
    statistics)."""
    ray = require_ray("batch scoring on Ray")
    options = settings.ray_options()
    batches = None
    if split is not None:  # the batches' row-group spans; the dataset: just their numbers
        import ray.data

        groups = row_groups(split)
        rows = sum(g[2] for g in groups)
        size = settings.batch_rows
        # (an empty split: one batch of no spans, read as an empty table)
        starts = range(0, max(rows, 1), size)
        batches = [spans_of(groups, a, min(a + size, rows)) for a in starts]
        if rows < settings.min_rows:
            why = f"fewer than predict.pool_min_rows={settings.min_rows}"
            return _score_here(saved, task, parts, split, batches, rows, why)
        if settings.actors == 1 and not settings.resources.get("GPU"):
            # One CPU actor scores batch after batch as this process would, with fewer
            # threads, after a fresh process's start; profiled on the 10M-row streaming
            # bench, it and Ray Data's coordinators added 670 MB of processes.
            why = "a pool of one CPU actor would score them no faster"
            return _score_here(saved, task, parts, split, batches, rows, why)
        dataset = ray.data.from_items([{"batch": n} for n in range(len(batches))])
    log.info(
        "scoring on Ray: %d actor(s) of %s, batches of %d rows",
        settings.actors,
        settings.resources,
        settings.batch_rows,
    )
    results = dataset.map_batches(
        PartitionScorer,
        fn_constructor_kwargs={
            "saved": saved,
            "task": task,
            "parts": parts,
            "threads": options["num_cpus"] or 1,
            "split": split,
            "batches": batches,
        },
        batch_size=1 if batches is not None else settings.batch_rows,
        batch_format="pyarrow" if batches is not None else "pandas",
        compute=ray.data.ActorPoolStrategy(
            size=settings.actors
        ),  # ray.data: loaded by Ray Data's callers
        **options,
    )
    return _merged(results.iter_batches(batch_format="pandas", batch_size=None))


def _score_here(saved, task, parts, split, batches, rows: int, why: str):
    """A small cache split, batch by batch in this process with the pool's own scorer (the
    same parts, the same statistics): the pool's start, a fresh process importing torch
    and Ray Data's executor, costs seconds that a small split never pays back (profiled:
    3 s of a 100k-row run)."""
    import pyarrow as pa
    import torch

    log.info("scoring the %d rows in this process (%s)", rows, why)
    scorer = PartitionScorer(saved, task, parts, torch.get_num_threads(), split, batches)

    def scored(n: int):
        release_free_pages()  # the last batch's arrays (see runner.loading.heap)
        return scorer(pa.table({"batch": [n]}))

    return _merged(scored(n) for n in range(len(batches)))


def _merged(results) -> tuple[int, list[dict]]:
    """(rows scored, each batch's statistics) from the scorer's records; its first error
    raised as the user's one line."""
    rows = 0
    stats: list[dict] = []
    for batch in results:
        errors = batch["error"][batch["error"] != ""]
        if len(errors):
            raise UserError(errors.iloc[0])  # leaving the loop stops the pool
        rows += int(batch["rows"].sum())
        stats.extend(s for s in map(pickle.loads, batch["stats"]) if s is not None)
    return rows, stats
