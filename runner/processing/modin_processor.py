"""processor=modin: Modin on Ray reads the table; its row partitions are then
fitted, transformed and written by Ray tasks where they live."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import pandas as pd

from runner.errors import UserError
from runner.processing.base import PartitionFn
from runner.processing.partitions import (
    merge_reports,
    numbered,
    offsets_of,
    process_partition,
    require_ray,
)
from runner.processing.reading import CSV_NULLS, WHOLE_FILE_FORMATS, csv_header, read_arrow
from runner.processing.source import DataSource
from runner.storage import Location


class ModinProcessor:
    name = "modin"
    requires_ray = True

    def __init__(self, parallelism: int | None):
        self.parallelism = parallelism

    def _modin(self):
        ray = require_ray(self.name)
        _forget_other_sessions_refs(ray)
        import modin.config

        modin.config.Engine.put("ray")
        if self.parallelism:
            modin.config.NPartitions.put(int(self.parallelism))
        import modin.pandas as mpd

        return mpd

    def read(self, source: DataSource, numbers: AbstractSet[str] = frozenset()):
        self._label = source.label
        mpd = self._modin()
        if source.is_synthetic:
            from runner.processing.synthetic import make_synthetic

            return mpd.DataFrame(make_synthetic(source.synthetic_rows, source.synthetic_seed))
        fs, files = source.files()
        urls = [fs.unstrip_protocol(f) for f in files]
        options = source.storage_options or None
        if source.format in WHOLE_FILE_FORMATS:
            return mpd.DataFrame(read_arrow(source).to_pandas())
        if source.format == "csv":
            if not csv_header(source, fs, files[0]):
                raise UserError(
                    f"dataset {source.path} is empty; give it a header row and data rows"
                )
            frames = [
                mpd.read_csv(
                    u,
                    sep=source.delimiter or ",",
                    dtype=object,
                    keep_default_na=False,
                    na_values=CSV_NULLS,
                    storage_options=options,
                )
                for u in urls
            ]
        else:
            frames = [mpd.read_parquet(u, storage_options=options) for u in urls]
        return frames[0] if len(frames) == 1 else mpd.concat(frames, ignore_index=True)

    def column_names(self, frame) -> list[str]:
        return list(frame.columns)

    def select(self, frame, columns: list[str]):
        return frame[columns]

    def _partitions(self, frame):
        import ray
        from modin.distributed.dataframe.pandas import unwrap_partitions

        refs = unwrap_partitions(frame, axis=0)
        lengths = ray.get([_task(_length).remote(r) for r in refs])
        return refs, offsets_of(lengths, self._label)

    def map_collect(self, frame, fn: PartitionFn) -> list:
        import ray

        refs, offsets = self._partitions(frame)
        return ray.get([_task(_apply).remote(fn, r, o) for r, o in zip(refs, offsets, strict=True)])

    def map_write(self, frame, fn: PartitionFn, out: Location) -> dict:
        import ray

        refs, offsets = self._partitions(frame)
        reports = ray.get(
            [
                _task(_write).remote(r, o, i, fn, out)
                for i, (r, o) in enumerate(zip(refs, offsets, strict=True))
            ]
        )
        return merge_reports(reports)

    def ray_blocks(self, frame, row_column: str) -> list:
        """Each row partition numbered by a Ray task where it lives."""
        refs, offsets = self._partitions(frame)
        return [
            _task(_numbered).remote(r, o, row_column) for r, o in zip(refs, offsets, strict=True)
        ]


_MODIN_DRIVER: str | None = None  # the Ray connection Modin's cached object refs belong to


def _forget_other_sessions_refs(ray) -> None:
    """Modin keeps the object refs of functions it put into the object store for the life of
    the process; after Ray restarts in the same process (a second run from Python, a test
    module) they point at a dead session ("owner is unknown"). Drop them on a new connection."""
    global _MODIN_DRIVER
    context = ray.get_runtime_context()
    driver = f"{context.get_session_name()}/{context.get_job_id()}"  # new cluster / new connection
    if _MODIN_DRIVER not in (None, driver):
        import gc

        from modin.core.execution.ray.common.engine_wrapper import RayWrapper

        RayWrapper._func_cache.clear()  # a Modin internal (listed in runner/compat.py)
        # Classes keep refs in attributes (_DEPLOY_AXIS_FUNC, _parse_func, ...), some of them
        # classes Modin builds at run time; each is put again on first use when None.
        for cls in gc.get_objects():
            if isinstance(cls, type) and str(getattr(cls, "__module__", "")).startswith("modin"):
                for attr, value in list(vars(cls).items()):
                    held = value.__func__ if isinstance(value, staticmethod) else value
                    if isinstance(held, ray.ObjectRef):  # _iloc_func is a staticmethod(ref)
                        setattr(cls, attr, None)
    _MODIN_DRIVER = driver


def _numbered(part, offset: int, row_column: str) -> pd.DataFrame:
    return numbered(_frame(part), offset, row_column)


def _frame(part) -> pd.DataFrame:
    return (part if isinstance(part, pd.DataFrame) else pd.DataFrame(part)).reset_index(drop=True)


def _length(part) -> int:
    return len(part)


def _apply(fn: PartitionFn, part, offset: int):
    return fn(_frame(part), offset)


def _write(part, offset: int, index: int, fn: PartitionFn, out: Location) -> dict:
    return process_partition(_frame(part), offset, index, fn, out)


def _task(fn):
    import ray

    return ray.remote(num_cpus=1)(fn)
