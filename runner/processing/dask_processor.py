"""processor=dask: Dask on Ray. Partitions are read, fitted, transformed and
written by Ray tasks; only small per-partition statistics reach the driver."""

from __future__ import annotations

import functools
import logging
from collections.abc import Set as AbstractSet

from runner.errors import UserError
from runner.processing.base import PartitionFn
from runner.processing.partitions import (
    merge_reports,
    numbered,
    offsets_of,
    process_partition,
    require_ray,
)
from runner.processing.reading import CSV_NULLS, WHOLE_FILE_FORMATS, csv_header, read_file
from runner.processing.source import COMPRESSIONS, DataSource
from runner.processing.synthetic import chunk_sizes, synthetic_chunk
from runner.runtime import task_options
from runner.storage import Location

log = logging.getLogger(__name__)


class DaskProcessor:
    name = "dask"
    requires_ray = True

    def __init__(self, parallelism: int | None, persist: bool, blocksize: str):
        self.parallelism = parallelism
        self.persist = persist
        self.blocksize = blocksize

    def _settings(self):
        import dask
        from ray.util.dask import ray_dask_get

        require_ray(self.name)
        scheduler = ray_dask_get
        if task_options():  # a sweep trial places its tasks
            scheduler = functools.partial(ray_dask_get, ray_remote_args=task_options())
        # Object columns stay object: the feature transforms type every value themselves.
        return dask.config.set({"scheduler": scheduler, "dataframe.convert-string": False})

    def read(self, source: DataSource, numbers: AbstractSet[str] = frozenset()):
        import dask.dataframe as dd

        self._label = source.label
        with self._settings():
            if source.is_synthetic:
                sizes = chunk_sizes(source.synthetic_rows)
                make = functools.partial(synthetic_chunk, seed=source.synthetic_seed)
                frame = dd.from_map(
                    make, range(len(sizes)), sizes, meta=synthetic_chunk(0, 1).iloc[:0]
                )
            else:
                fs, files = source.files()
                urls = [fs.unstrip_protocol(f) for f in files]
                if source.format in WHOLE_FILE_FORMATS:
                    frame = dd.from_map(_whole_file, files, source=source, fs=fs)
                elif source.format == "csv":
                    if not csv_header(source, fs, files[0]):
                        raise UserError(
                            f"dataset {source.path} is empty; give it a header row and data rows"
                        )
                    compressed = any(f.endswith(COMPRESSIONS) for f in files)
                    frame = dd.read_csv(
                        urls,
                        sep=source.delimiter or ",",
                        dtype=object,
                        keep_default_na=False,
                        na_values=CSV_NULLS,
                        blocksize=None if compressed else self.blocksize,
                        storage_options=source.storage_options or None,
                    )
                else:
                    frame = dd.read_parquet(urls, storage_options=source.storage_options or None)
            if self.parallelism:
                frame = frame.repartition(npartitions=int(self.parallelism))
            return frame

    def column_names(self, frame) -> list[str]:
        return list(frame.columns)

    def select(self, frame, columns: list[str]):
        frame = frame[columns]
        if self.persist:
            # Keep the partitions in Ray's object store for the fit and transform passes;
            # without persist every pass streams them from the source again.
            with self._settings():
                frame = frame.persist()
        return frame

    def _partitions(self, frame):
        import dask

        with self._settings():
            lengths = frame.map_partitions(len).compute().tolist()
        return frame.to_delayed(), offsets_of(lengths, self._label), dask

    def map_collect(self, frame, fn: PartitionFn) -> list:
        parts, offsets, dask = self._partitions(frame)
        with self._settings():
            return list(
                dask.compute(*[dask.delayed(fn)(p, o) for p, o in zip(parts, offsets, strict=True)])
            )

    def map_write(self, frame, fn: PartitionFn, out: Location) -> dict:
        parts, offsets, dask = self._partitions(frame)
        tasks = [
            dask.delayed(process_partition)(p, o, i, fn, out)
            for i, (p, o) in enumerate(zip(parts, offsets, strict=True))
        ]
        with self._settings():
            return merge_reports(list(dask.compute(*tasks)))

    def ray_blocks(self, frame, row_column: str) -> list:
        """Each partition numbered by a Ray task and kept in the object store (as Ray's own
        from_dask does, with the row numbers added)."""
        parts, offsets, dask = self._partitions(frame)
        tasks = [
            dask.delayed(numbered)(p, o, row_column) for p, o in zip(parts, offsets, strict=True)
        ]
        with self._settings():
            persisted = dask.persist(*tasks)
        return [next(iter(task.dask.values())) for task in persisted]


def _whole_file(path: str, source, fs):
    return read_file(source, fs, path).to_pandas()
