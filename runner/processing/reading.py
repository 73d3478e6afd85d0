"""Reading raw tables with pyarrow, the same way for every processor: CSV cells as
strings (numbers parsed while reading where asked), clear errors for missing,
empty and unreadable files."""

from __future__ import annotations

import functools
from collections.abc import Set as AbstractSet

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from runner.errors import UserError
from runner.processing.source import DataSource, header_line, reading_errors

# Every processor reads CSV cells as strings with these missing-value markers, so
# that values are typed by the feature transforms alone, the same way everywhere.
CSV_NULLS = ["", "NA", "N/A", "NaN", "nan", "null", "NULL", "None", "#N/A"]


# Formats read whole, file by file, into Arrow (no byte ranges or row groups to cut them at).
WHOLE_FILE_FORMATS = ("json", "feather", "orc", "excel")


def csv_header(source: DataSource, fs, path: str) -> list[str]:
    import csv
    import io

    first = header_line(source, fs, path)
    return next(csv.reader(io.StringIO(first), delimiter=source.delimiter or ","), [])


def csv_options(types: dict, delimiter: str | None, columns=None, decimal: str | None = None):
    """pyarrow's parse and convert options as every CSV read here uses them: these column
    types, CSV_NULLS as missing, `columns` only (a missing one as nulls), numbers with this
    decimal mark."""
    convert = pacsv.ConvertOptions(
        decimal_point=decimal or ".",
        column_types=types,
        null_values=CSV_NULLS,
        strings_can_be_null=True,
        include_columns=columns,
        include_missing_columns=columns is not None,
    )
    return pacsv.ParseOptions(delimiter=delimiter or ","), convert


def parse_csv(
    open_bytes,
    names: list[str],
    numbers: set[str],
    skip_header: bool = True,
    columns=None,
    delimiter: str | None = None,
    decimal: str | None = None,
) -> pa.Table:
    """CSV rows as Arrow: number-feature columns parsed as float64 by pyarrow's C parser,
    everything else as strings. A value that does not parse sends the rows down the
    all-strings path, where the number feature names the bad value and its row.
    open_bytes() opens the rows afresh (a file, or a byte range of one: skip_header=False);
    `columns` keeps only those (a missing one comes back as nulls, as concatenating files
    does)."""

    def read(types: dict) -> pa.Table:
        parse, convert = csv_options(types, delimiter, columns, decimal)
        # With its header the rows name their own columns; a later byte range is given them.
        options = pacsv.ReadOptions(column_names=None if skip_header else names)
        with open_bytes() as handle:
            return pacsv.read_csv(
                handle, read_options=options, parse_options=parse, convert_options=convert
            )

    strings = {n: pa.string() for n in list(names) + list(columns or ())}
    if numbers & set(strings):
        try:
            return read({**strings, **{n: pa.float64() for n in numbers if n in strings}})
        except pa.ArrowInvalid as exc:
            if "conversion error" not in str(exc).lower():
                raise
    return read(strings)


def read_file(source: DataSource, fs, path: str) -> pa.Table:
    """One whole file of a WHOLE_FILE_FORMATS format as Arrow, with pyarrow where it reads the
    format (JSON lines, Feather / Arrow IPC, ORC) and pandas where it does not (a JSON array
    of records, Excel)."""
    with reading_errors(source, path):
        if source.format == "feather":
            import pyarrow.feather as feather

            with fs.open(path, "rb") as handle:
                return feather.read_table(handle)
        if source.format == "orc":
            import pyarrow.orc as orc

            with fs.open(path, "rb") as handle:
                return orc.ORCFile(handle).read()
        if source.format == "excel":
            import pandas as pd

            with fs.open(path, "rb") as handle:
                return pa.Table.from_pandas(pd.read_excel(handle), preserve_index=False)
        return _read_json(fs, path)


def _read_json(fs, path: str) -> pa.Table:
    import json

    import pyarrow.json as pajson

    with fs.open(path, "rb", compression="infer") as handle:
        data = handle.read()
    if data.lstrip()[:1] == b"[":  # a JSON array of records
        records = json.loads(data)
        if not all(isinstance(r, dict) for r in records):
            raise ValueError("a JSON array whose items are not all objects (records)")
        return pa.Table.from_pylist(records)
    return pajson.read_json(pa.BufferReader(data))  # JSON lines: one object a line


def read_arrow(
    source: DataSource, numbers: AbstractSet[str] = frozenset(), columns: list[str] | None = None
) -> pa.Table:
    """The whole raw table (or these columns of it) as Arrow; clear errors for missing, empty
    and unreadable files."""
    fs, files = source.files()
    tables = []
    for path in files:
        with reading_errors(source, path):
            if source.format == "csv":
                names = csv_header(source, fs, path)
                if not names:
                    raise pa.ArrowInvalid("Empty CSV file")
                opener = functools.partial(fs.open, path, "rb", compression="infer")
                tables.append(
                    parse_csv(
                        opener,
                        names,
                        set(numbers),
                        columns=columns,
                        delimiter=source.delimiter,
                        decimal=source.decimal,
                    )
                )
            elif source.format in WHOLE_FILE_FORMATS:
                table = read_file(source, fs, path)
                tables.append(table.select(columns) if columns else table)
            else:
                tables.append(pq.read_table(path, filesystem=fs, columns=columns))
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    if table.num_rows == 0:
        raise UserError(f"dataset {source.path} has no data rows; add rows below the header")
    return table
