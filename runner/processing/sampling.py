"""The rows type inference looks at: a sample that spans the whole table, not its head.

A file sorted by a date or a class shows one month or one class in its first rows; a sample
from evenly spaced places across the file shows them all. Each format is sampled where it can
be entered without reading what comes before: byte ranges of a CSV or JSON-lines file
(resynchronised on a line break), row groups of a Parquet file, files of a folder. A compressed
file cannot be entered in the middle: it is read through (keeping evenly spaced batches) up to
COMPRESSED_READ_LIMIT, and only its head is read beyond that, which the description says.
Everything reads through the source's filesystem (local or object storage), on the driver,
so every processor gets the same rows and the same types.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from runner.errors import UserError
from runner.processing.reading import csv_header, csv_options, read_file
from runner.processing.source import COMPRESSIONS, DataSource, reading_errors

# Places the sample is drawn from across the table (fewer where the table has fewer rows).
PLACES = 40
# A compressed file up to this many bytes is read through; a larger one from its head.
COMPRESSED_READ_LIMIT = 64 * 1024 * 1024
# A text file up to this size is read whole (in well under a second), then sampled.
WHOLE_READ_LIMIT = 8 * 1024 * 1024
# Bytes read to estimate a text file's row width.
_PROBE_BYTES = 256 * 1024


@dataclass
class Sample:
    frame: pd.DataFrame
    description: str  # how it was drawn, for the log: "10000 rows from 40 places across 1.2 GB"


def read_sample(source: DataSource, rows: int) -> Sample:
    """About `rows` rows from PLACES places spread over the table's files, in file order, as
    Arrow (CSV cells as strings, as every processor reads them)."""
    if source.is_synthetic:
        from runner.processing.synthetic import make_synthetic

        frame = make_synthetic(min(rows, source.synthetic_rows), source.synthetic_seed)
        return Sample(frame, f"the built-in table's first {len(frame)} rows")
    fs, files = source.files()
    sizes = [int(fs.info(f).get("size") or 0) for f in files]
    total = sum(sizes)
    places = _places_per_file(sizes, PLACES)
    tables, used, head_only, whole = [], 0, [], all(places)
    for path, size, count in zip(files, sizes, places, strict=True):
        if count == 0:
            continue
        want = max(1, round(rows * count / sum(places)))
        with reading_errors(source, path):
            part, spots, all_rows = _sample_file(source, fs, path, size, want, count)
        whole = whole and all_rows
        if spots < 0:
            head_only.append(path)
            spots = 1
        used += spots
        if part is not None and part.num_rows:
            tables.append(part)
    if not tables:
        raise UserError(f"dataset {source.path} has no data rows; add rows below the header")
    try:
        table = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowTypeError, pa.ArrowInvalid) as exc:
        raise UserError(
            f"the files of dataset {source.path} are not one table: {str(exc).splitlines()[0]}; "
            "point dataset.path at files of the same columns and types"
        ) from None
    where = f"{used} place{'s' if used != 1 else ''}"
    files_part = f" in {len(files)} files" if len(files) > 1 else ""
    description = f"{table.num_rows} rows from {where}{files_part} across {_size(total)}"
    if whole:  # every file read whole and kept whole: the table itself
        description = f"all {table.num_rows} rows{files_part} ({_size(total)})"
    if head_only:
        description += (
            f" (the head of {len(head_only)} compressed file{'s' if len(head_only) > 1 else ''} "
            f"over {_size(COMPRESSED_READ_LIMIT)}: a file sorted by a column may show one part "
            "of it)"
        )
    return Sample(table.to_pandas() if table.num_rows else pd.DataFrame(), description)


def _places_per_file(sizes: list[int], places: int) -> list[int]:
    """Places per file in proportion to its size; with more files than places, evenly spaced
    files get one each."""
    if len(sizes) > places:
        chosen = set(np.linspace(0, len(sizes) - 1, places).round().astype(int).tolist())
        return [1 if i in chosen else 0 for i in range(len(sizes))]
    total = sum(sizes) or 1
    return [max(1, round(places * s / total)) for s in sizes]


def _sample_file(source, fs, path, size, rows, places):
    """(rows of one file, places used, whether they are all its rows); places -1: only its
    head could be read."""
    compressed = path.lower().endswith(COMPRESSIONS)
    if source.format == "parquet":
        return _parquet(fs, path, rows, places)
    if source.format in ("csv", "json") and not compressed and size > 0:
        first = fs.cat_file(path, start=0, end=min(size, _PROBE_BYTES))
        if source.format == "csv" or first.lstrip()[:1] != b"[":  # a JSON array: whole
            return _text_ranges(source, fs, path, size, first, rows, places)
    if source.format in ("csv", "json"):
        if compressed and size > COMPRESSED_READ_LIMIT:
            table, _ = _stream(source, fs, path, rows, 1)
            return table, -1, False
        table, whole = _stream(source, fs, path, rows, places)
        return table, places, whole
    table = read_file(source, fs, path)
    return _spread_rows(table, rows, places), places, table.num_rows <= rows


def _spread_rows(table: pa.Table, rows: int, places: int) -> pa.Table:
    """`places` evenly spaced runs of rows of a table already read (runs that never overlap)."""
    if table.num_rows <= rows:
        return table
    per = min(-(-rows // places), table.num_rows // places)
    starts = np.linspace(0, table.num_rows - per, places).astype(int)
    return pa.concat_tables([table.slice(int(s), per) for s in starts])


def _parquet(fs, path, rows, places):
    """Runs of rows at evenly spaced row offsets; each read from its own row group by
    batches, so no more than a batch is held beyond the sample."""
    with pq.ParquetFile(path, filesystem=fs) as file:
        return _parquet_runs(file, rows, places)


def _parquet_runs(file, rows, places):
    counts = [file.metadata.row_group(i).num_rows for i in range(file.num_row_groups)]
    total = sum(counts)
    if total <= rows:
        return file.read(), 1, True
    per = -(-rows // places)
    offsets = np.linspace(0, total - per, places).astype(int)
    starts = np.concatenate([[0], np.cumsum(counts)])
    wanted: dict[int, list[int]] = {}
    for offset in offsets:
        group = int(np.searchsorted(starts, offset, side="right") - 1)
        wanted.setdefault(group, []).append(int(offset - starts[group]))
    parts = []
    for group, within in wanted.items():
        batches = file.iter_batches(batch_size=per, row_groups=[group])
        for index, batch in enumerate(batches):
            begin, end = index * per, index * per + batch.num_rows
            if any(begin <= w < end for w in within):
                parts.append(batch)
            if end > max(within):
                break
    return pa.Table.from_batches(parts), len(parts), False


def _text_ranges(source, fs, path, size, first: bytes, rows, places):
    """CSV or JSON lines: a run of lines from each of `places` evenly spaced byte offsets, each
    begun after the first line break at its offset. A run that does not parse (an offset inside
    a quoted value that holds a line break) is skipped."""
    lines = first.count(b"\n")
    width = max(1.0, len(first) / max(lines, 1))  # bytes a row, from the first rows
    per = -(-rows // places)
    span = int(per * width * 1.5) + 4096
    if size <= WHOLE_READ_LIMIT or size <= places * span:  # cheaper read whole
        table, _ = _stream(source, fs, path, size, places, whole=True)
        if table is None:
            return None, 0, True
        return _spread_rows(table, rows, places), places, table.num_rows <= rows
    names = csv_header(source, fs, path) if source.format == "csv" else None
    parts, used = [], 0
    for offset in np.linspace(0, size - span, places).astype(int):
        data = fs.cat_file(path, start=int(offset), end=int(offset) + span)
        if offset > 0:
            data = data[data.find(b"\n") + 1 :]
        data = data[: data.rfind(b"\n") + 1]
        if not data:
            continue
        try:
            part = _parse_lines(source, data, names, header=offset == 0)
        except pa.ArrowInvalid:
            continue
        parts.append(part.slice(0, per))
        used += 1
    if not parts:
        table, whole = _stream(source, fs, path, rows, 1)
        return table, 1, whole
    return pa.concat_tables(parts, promote_options="permissive"), used, False


def _parse_lines(source, data: bytes, names, header: bool) -> pa.Table:
    if source.format == "json":
        import pyarrow.json as pajson

        return pajson.read_json(pa.BufferReader(data))
    parse, convert = csv_options({n: pa.string() for n in names}, source.delimiter)
    options = pacsv.ReadOptions(column_names=None if header else names)
    return pacsv.read_csv(
        pa.BufferReader(data), read_options=options, parse_options=parse, convert_options=convert
    )


def _stream(source, fs, path, rows, places, whole: bool = False):
    """(rows, whether they are all the file's). Reads a file through from its start, keeping
    evenly spaced batches (when more than `places` are kept, every other one goes and the
    stride doubles), then evenly spaced runs of their rows. With places=1 it stops after the
    head; with `whole`, it keeps every batch (a small file)."""
    kept: list[pa.RecordBatch] = []
    stride, index, have, ended = 1, 0, 0, True
    for batch in _batches(source, fs, path, head=places == 1 and not whole):
        if places == 1 or whole:
            kept.append(batch)
            have += batch.num_rows
            if have >= rows and not whole:
                ended = False
                break
            continue
        if index % stride == 0:
            kept.append(batch)
            if len(kept) > places:
                kept, stride = kept[::2], stride * 2
        index += 1
    if not kept:
        return None, True
    table = pa.Table.from_batches(kept)
    if whole:
        return table, True
    if places == 1:
        return table.slice(0, rows), ended and table.num_rows <= rows
    return _spread_rows(table, rows, places), stride == 1 and table.num_rows <= rows


def _batches(source, fs, path, head: bool = False):
    """The file's rows in batches, from its start. JSON is read whole (pyarrow's streaming
    JSON reader fixes the types from its first block), except for a head."""
    if source.format == "json":
        import pyarrow.json as pajson

        if not head:
            yield from read_file(source, fs, path).to_batches(max_chunksize=4096)
            return
        with fs.open(path, "rb", compression="infer") as handle:
            yield from pajson.open_json(handle)
        return
    with fs.open(path, "rb", compression="infer") as handle:
        names = csv_header(source, fs, path)
        if not names:
            raise UserError(f"dataset {source.path} is empty; give it a header row and data rows")
        parse, convert = csv_options({n: pa.string() for n in names}, source.delimiter)
        yield from pacsv.open_csv(handle, parse_options=parse, convert_options=convert)


def _size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"
