"""processor=arrow: pyarrow in plain Ray tasks, the fastest processor on Ray.

The driver only plans: it cuts the raw files into pieces (byte ranges of CSV files at line
breaks, groups of Parquet row groups, runs of synthetic chunks) sized for the cluster. Each
piece is read by one task with pyarrow's typed parser, and with `persist` kept in the object
store as an Arrow table: its buffers travel without pickling, where Dask's pandas partitions
of Python strings are pickled on every pass (the profile in docs/benchmarks.md). The fit and the
transform then run as one task per piece, through the same per-partition functions as every
other processor, so the cache is the same.

A CSV file is cut at line breaks, as Dask cuts it: a quoted value that holds a line break
needs processor.blocksize large enough for one piece per file, or processor=pandas.
"""

from __future__ import annotations

import functools
import io
import itertools
import math
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from runner.errors import UserError
from runner.processing.base import PartitionFn
from runner.processing.partitions import (
    merge_reports,
    numbered,
    offsets_of,
    process_partition,
    require_ray,
)
from runner.processing.reading import WHOLE_FILE_FORMATS, csv_header, parse_csv, read_file
from runner.processing.source import DataSource, reading_errors
from runner.processing.synthetic import chunk_sizes, synthetic_chunk
from runner.runtime import task_options
from runner.storage import Location

MIN_PIECE_BYTES = 2**20  # below this a piece costs more in task overhead than it saves
COMPRESSED = (".gz", ".bz2", ".zip", ".xz", ".zst")


@dataclass(frozen=True)
class Piece:
    """One task's share of the raw table."""

    path: str | None = None
    start: int = 0  # csv: byte range [start, end) of the lines that begin in it
    end: int | None = None
    names: tuple[str, ...] = ()  # csv: the file's header
    row_groups: tuple[int, ...] = ()  # parquet
    slice: tuple[int, int] | None = None  # parquet: these rows of one large row group
    chunks: tuple[int, ...] = ()  # synthetic: chunk indexes
    rows: int | None = None  # known without reading (parquet footers, synthetic sizes)


@dataclass
class ArrowFrame:
    source: DataSource
    pieces: list[Piece]
    columns: list[str]
    numbers: set[str]
    selected: list[str] | None = None
    tables: list | None = None  # object refs of the pieces' Arrow tables (persist)
    lengths: list[int] | None = field(default=None, repr=False)


class ArrowProcessor:
    name = "arrow"
    requires_ray = True

    def __init__(self, parallelism: int | None, persist: bool, blocksize: str):
        self.parallelism = parallelism
        self.persist = persist
        self.blocksize = blocksize

    # -- planning (driver) ---------------------------------------------------------------------
    def _piece_count(self, size: int, ray) -> int:
        if self.parallelism:
            return int(self.parallelism)
        from dask.utils import parse_bytes

        by_size = math.ceil(size / parse_bytes(self.blocksize))
        cpus = int(ray.cluster_resources().get("CPU", 1))
        return max(1, by_size, min(cpus, size // MIN_PIECE_BYTES))

    def read(self, source: DataSource, numbers: AbstractSet[str] = frozenset()) -> ArrowFrame:
        ray = require_ray(self.name)
        count = self._piece_count(source.size_bytes(), ray)
        if source.is_synthetic:
            pieces, columns = _synthetic_pieces(source, count), list(synthetic_chunk(0, 1).columns)
        elif source.format == "csv":
            pieces, columns = _csv_pieces(source, count)
        elif source.format in WHOLE_FILE_FORMATS:
            pieces, columns = _file_pieces(source)
        else:
            pieces, columns = _parquet_pieces(source, count)
        return ArrowFrame(source, pieces, columns, set(numbers))

    def column_names(self, frame: ArrowFrame) -> list[str]:
        return list(frame.columns)

    def select(self, frame: ArrowFrame, columns: list[str]) -> ArrowFrame:
        frame = ArrowFrame(frame.source, frame.pieces, frame.columns, frame.numbers, list(columns))
        if self.persist:
            # One read per piece; the passes after it find the tables in the object store.
            reads = [
                _remote(_read_counted, num_returns=2).remote(
                    frame.source, p, frame.selected, frame.numbers
                )
                for p in frame.pieces
            ]
            frame.tables = [table for table, _ in reads]
            frame.lengths = _get([rows for _, rows in reads])
        return frame

    def _inputs(self, frame: ArrowFrame) -> tuple[list, list[int]]:
        """Per piece: its table (ref) or, streaming, the piece to read again; and its offset."""
        if frame.lengths is None:
            unknown = [p for p in frame.pieces if p.rows is None]
            counted = iter(_get([_remote(_count).remote(frame.source, p) for p in unknown]))
            frame.lengths = [p.rows if p.rows is not None else next(counted) for p in frame.pieces]
        offsets = offsets_of(frame.lengths, frame.source.label)
        inputs = frame.tables or [
            (frame.source, p, frame.selected, frame.numbers) for p in frame.pieces
        ]
        return inputs, offsets

    def map_collect(self, frame: ArrowFrame, fn: PartitionFn) -> list:
        inputs, offsets = self._inputs(frame)
        return _get(
            [_remote(_apply).remote(i, o, fn) for i, o in zip(inputs, offsets, strict=True)]
        )

    def map_write(self, frame: ArrowFrame, fn: PartitionFn, out: Location) -> dict:
        inputs, offsets = self._inputs(frame)
        tasks = [
            _remote(_apply).remote(i, o, functools.partial(_write, index=n, fn=fn, out=out))
            for n, (i, o) in enumerate(zip(inputs, offsets, strict=True))
        ]
        return merge_reports(_get(tasks))

    def ray_blocks(self, frame: ArrowFrame, row_column: str) -> list:
        inputs, offsets = self._inputs(frame)
        number = functools.partial(_number, row_column=row_column)
        return [_remote(_apply).remote(i, o, number) for i, o in zip(inputs, offsets, strict=True)]


def _write(part, offset: int, index: int, fn: PartitionFn, out: Location) -> dict:
    return process_partition(part, offset, index, fn, out)


def _number(part, offset: int, row_column: str):
    return numbered(part, offset, row_column)


def _synthetic_pieces(source: DataSource, count: int) -> list[Piece]:
    sizes = chunk_sizes(source.synthetic_rows)
    per = math.ceil(len(sizes) / max(1, min(count, len(sizes))))
    return [
        Piece(chunks=tuple(range(i, min(i + per, len(sizes)))), rows=sum(sizes[i : i + per]))
        for i in range(0, len(sizes), per)
    ]


def _csv_pieces(source: DataSource, count: int) -> tuple[list[Piece], list[str]]:
    fs, files = source.files()
    sizes = [int(fs.info(f).get("size") or 0) for f in files]
    total = max(1, sum(sizes))
    pieces, columns = [], []
    for path, size in zip(files, sizes, strict=True):
        names = csv_header(source, fs, path)
        if not names:
            raise UserError(f"dataset {source.path} is empty; give it a header row and data rows")
        columns += [n for n in names if n not in columns]
        if path.endswith(COMPRESSED):  # cannot be entered in the middle: one piece, whole
            pieces.append(Piece(path=path, names=tuple(names)))
            continue
        n = max(1, round(count * size / total))
        bounds = [size * i // n for i in range(n + 1)]
        pieces += [
            Piece(path=path, start=a, end=b, names=tuple(names))
            for a, b in itertools.pairwise(bounds)
        ]
    return pieces, columns


def _file_pieces(source: DataSource) -> tuple[list[Piece], list[str]]:
    """One piece per file, read whole (JSON, Feather, ORC, Excel); the columns from the first."""
    fs, files = source.files()
    columns = list(read_file(source, fs, files[0]).column_names)
    return [Piece(path=path) for path in files], columns


def _parquet_pieces(source: DataSource, count: int) -> tuple[list[Piece], list[str]]:
    fs, files = source.files()
    footers = []
    for path in files:
        with reading_errors(source, path):
            footers.append(pq.ParquetFile(path, filesystem=fs))
    columns = [n for n in footers[0].schema_arrow.names if not n.startswith("__index_level_")]
    groups = [
        (path, g, f.metadata.row_group(g).num_rows)
        for path, f in zip(files, footers, strict=True)
        for g in range(f.metadata.num_row_groups)
    ]
    share = max(1, sum(rows for *_, rows in groups)) / count
    pieces, current, rows = [], [], 0
    for i, (path, group, n) in enumerate(groups):
        if n > 1.5 * share:  # a large row group: each of several tasks decodes it, keeps a slice
            cuts = [round(n * k / round(n / share)) for k in range(round(n / share) + 1)]
            pieces += [
                Piece(path=path, row_groups=(group,), rows=b - a, slice=(a, b))
                for a, b in itertools.pairwise(cuts)
            ]
            continue
        current.append(group)
        rows += n
        last_of_file = i + 1 == len(groups) or groups[i + 1][0] != path
        if last_of_file or rows >= share or groups[i + 1][2] > 1.5 * share:
            pieces.append(Piece(path=path, row_groups=tuple(current), rows=rows))
            current, rows = [], 0
    return pieces, columns


# -- in the tasks ------------------------------------------------------------------------------
def _read(source: DataSource, piece: Piece, columns, numbers) -> pa.Table:
    if source.is_synthetic:
        import pandas as pd

        sizes = chunk_sizes(source.synthetic_rows)
        frame = pd.concat(
            [synthetic_chunk(c, sizes[c], source.synthetic_seed) for c in piece.chunks]
        )
        table = pa.Table.from_pandas(frame, preserve_index=False)
        return table.select(columns) if columns else table
    fs = source.filesystem()[0]
    assert piece.path is not None  # pieces of files name theirs
    if source.format in WHOLE_FILE_FORMATS:
        table = read_file(source, fs, piece.path)
        return table.select([c for c in columns if c in table.column_names]) if columns else table
    with reading_errors(source, piece.path):
        if source.format == "parquet":
            table = pq.ParquetFile(piece.path, filesystem=fs).read_row_groups(
                list(piece.row_groups), columns=columns
            )
            return (
                table.slice(piece.slice[0], piece.slice[1] - piece.slice[0])
                if piece.slice
                else table
            )
        if piece.end is None:  # the whole (compressed) file
            opener = functools.partial(fs.open, piece.path, "rb", compression="infer")
            return parse_csv(
                opener,
                list(piece.names),
                numbers,
                columns=columns,
                delimiter=source.delimiter,
                decimal=source.decimal,
            )
        data = _lines(fs, piece)
        if not data.strip():
            types = {
                c: pa.float64() if c in numbers else pa.string() for c in columns or piece.names
            }
            return pa.table({c: pa.array([], t) for c, t in types.items()})
        return parse_csv(
            lambda: io.BytesIO(data),
            list(piece.names),
            numbers,
            piece.start == 0,
            columns,
            source.delimiter,
            source.decimal,
        )


def _lines(fs, piece: Piece) -> bytes:
    """The lines that begin in [start, end): a line belongs to the piece of its first byte."""
    with fs.open(piece.path, "rb") as handle:
        if piece.start > 0:
            handle.seek(piece.start - 1)
            handle.readline()  # the rest of the line that began before start
        begin = handle.tell()
        data = handle.read(piece.end - begin) if piece.end > begin else b""
        if data and not data.endswith(b"\n"):
            data += handle.readline()  # the last line began before end: all of it
        return data


def _read_counted(source, piece, columns, numbers) -> tuple[pa.Table, int]:
    table = _read(source, piece, columns, numbers)
    return table, table.num_rows


def _count(source: DataSource, piece: Piece) -> int:
    return _read(source, piece, list(piece.names[:1]), set()).num_rows


def _apply(table_or_piece, offset: int, fn: PartitionFn):
    """fn over one piece as pandas (the frame every transform is written for)."""
    table = table_or_piece if isinstance(table_or_piece, pa.Table) else _read(*table_or_piece)
    return fn(table.to_pandas(), offset)


# -- Ray plumbing ------------------------------------------------------------------------------
@functools.cache
def _remote_function(fn):
    import ray

    return ray.remote(fn)


def _remote(fn, **options):
    """fn as a Ray task placed where this process's tasks go (a sweep trial's group)."""
    return _remote_function(fn).options(**options, **task_options())


def _get(refs: list) -> list:
    import ray

    return ray.get(refs)
