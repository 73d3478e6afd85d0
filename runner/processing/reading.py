"""Reading raw tables with pyarrow, the same way for every engine: CSV cells as
strings (numbers parsed while reading where asked), clear errors for missing,
empty and unreadable files."""

from __future__ import annotations

import contextlib
import functools

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from runner.errors import UserError
from runner.processing.source import DataSource

# Every engine reads CSV cells as strings with these missing-value markers, so
# that values are typed by the feature transforms alone, the same way everywhere.
CSV_NULLS = ["", "NA", "N/A", "NaN", "nan", "null", "NULL", "None", "#N/A"]


def csv_header(fs, path: str) -> list[str]:
    import csv
    import io

    with fs.open(path, "rb", compression="infer") as handle:
        first = handle.readline().decode("utf-8-sig")
    return next(csv.reader(io.StringIO(first)), [])


def parse_csv(
    open_bytes, names: list[str], numbers: set[str], skip_header: bool = True, columns=None
) -> pa.Table:
    """CSV rows as Arrow: number-feature columns parsed as float64 by pyarrow's C parser,
    everything else as strings. A value that does not parse sends the rows down the
    all-strings path, where the number feature names the bad value and its row.
    open_bytes() opens the rows afresh (a file, or a byte range of one: skip_header=False);
    `columns` keeps only those (a missing one comes back as nulls, as concatenating files
    does)."""

    def read(types: dict) -> pa.Table:
        convert = pacsv.ConvertOptions(
            column_types=types,
            null_values=CSV_NULLS,
            strings_can_be_null=True,
            include_columns=columns,
            include_missing_columns=columns is not None,
        )
        # With its header the rows name their own columns; a later byte range is given them.
        options = pacsv.ReadOptions(column_names=None if skip_header else names)
        with open_bytes() as handle:
            return pacsv.read_csv(handle, read_options=options, convert_options=convert)

    strings = {n: pa.string() for n in list(names) + list(columns or ())}
    if numbers & set(strings):
        try:
            return read({**strings, **{n: pa.float64() for n in numbers if n in strings}})
        except pa.ArrowInvalid as exc:
            if "conversion error" not in str(exc).lower():
                raise
    return read(strings)


@contextlib.contextmanager
def reading_errors(source: DataSource, path: str):
    """pyarrow's errors for one raw file as the user's one line (empty, unreadable)."""
    try:
        yield
    except pa.ArrowInvalid as exc:
        if "Empty CSV file" in str(exc):
            raise UserError(
                f"dataset {source.path} is empty; give it a header row and data rows"
            ) from None
        raise UserError(
            f"cannot read {path} as {source.format}: {str(exc).splitlines()[0]}"
        ) from None


def read_arrow(source: DataSource, numbers: set[str] = frozenset()) -> pa.Table:
    """The whole raw table as Arrow; clear errors for missing, empty and unreadable files."""
    fs, files = source.files()
    tables = []
    for path in files:
        with reading_errors(source, path):
            if source.format == "csv":
                names = csv_header(fs, path)
                if not names:
                    raise pa.ArrowInvalid("Empty CSV file")
                opener = functools.partial(fs.open, path, "rb", compression="infer")
                tables.append(parse_csv(opener, names, set(numbers)))
            else:
                tables.append(pq.read_table(path, filesystem=fs))
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    if table.num_rows == 0:
        raise UserError(f"dataset {source.path} has no data rows; add rows below the header")
    return table
