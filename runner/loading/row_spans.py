"""A cache split's rows as spans of its Parquet row groups: which rows lie where (from the
footers), the spans that hold a range of rows, and reading them back. The Ray Data loader cuts each
worker's share with them; the scoring pool cuts its blocks with them."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from runner.storage import Location


def row_groups(split: Location) -> list[tuple[str, int, int, int]]:
    """(file, row group, rows, uncompressed bytes) of every row group, from the footers."""
    filesystem = split.arrow_filesystem()
    groups = []
    for path in split.files():
        meta = pq.read_metadata(path, filesystem=filesystem)
        for i in range(meta.num_row_groups):
            group = meta.row_group(i)
            groups.append((path, i, group.num_rows, group.total_byte_size))
    return groups


def spans_of(groups: list, start: int, end: int) -> list[tuple[str, int, int, int]]:
    """Rows [start, end) of a split as (file, row group, first, end) spans of its row groups."""
    spans, offset = [], 0
    for path, index, count, _ in groups:
        lo, hi = max(start, offset), min(end, offset + count)
        if lo < hi:
            spans.append((path, index, lo - offset, hi - offset))
        offset += count
    return spans


def read_spans(split: Location, spans: list) -> pa.Table:
    """The rows of those spans, in order (an empty table of the split's schema for none)."""
    filesystem, files, parts = split.arrow_filesystem(), {}, []
    for path, group, first, end in spans:
        if path not in files:
            files[path] = pq.ParquetFile(path, filesystem=filesystem)
        parts.append(files[path].read_row_group(group).slice(first, end - first))
    if not parts:  # fewer rows than workers: this one has none
        path = split.files()[0]
        parts = [pq.ParquetFile(path, filesystem=filesystem).schema_arrow.empty_table()]
    return pa.concat_tables(parts)
