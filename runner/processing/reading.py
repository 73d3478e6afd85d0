"""Reading raw tables with pyarrow, the same way for every engine: CSV cells as
strings (numbers parsed while reading where asked), clear errors for missing,
empty and unreadable files."""

from __future__ import annotations

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


def _read_csv(fs, path: str, names: list[str], numbers: set[str]) -> pa.Table:
    """Number-feature columns parsed as float64 by pyarrow's C parser; everything else as
    strings. A value that does not parse sends the file down the all-strings path, where
    the number feature names the bad value and its row."""

    def read(types: dict) -> pa.Table:
        convert = pacsv.ConvertOptions(
            column_types=types, null_values=CSV_NULLS, strings_can_be_null=True
        )
        with fs.open(path, "rb", compression="infer") as handle:
            return pacsv.read_csv(handle, convert_options=convert)

    strings = {n: pa.string() for n in names}
    if numbers & set(names):
        try:
            return read({**strings, **{n: pa.float64() for n in numbers if n in strings}})
        except pa.ArrowInvalid as exc:
            if "conversion error" not in str(exc).lower():
                raise
    return read(strings)


def read_arrow(source: DataSource, numbers: set[str] = frozenset()) -> pa.Table:
    """The whole raw table as Arrow; clear errors for missing, empty and unreadable files."""
    fs, files = source.files()
    tables = []
    for path in files:
        try:
            if source.format == "csv":
                names = csv_header(fs, path)
                if not names:
                    raise pa.ArrowInvalid("Empty CSV file")
                tables.append(_read_csv(fs, path, names, set(numbers)))
            else:
                tables.append(pq.read_table(path, filesystem=fs))
        except pa.ArrowInvalid as exc:
            if "Empty CSV file" in str(exc):
                raise UserError(
                    f"dataset {source.path} is empty; give it a header row and data rows"
                ) from None
            raise UserError(
                f"cannot read {path} as {source.format}: {str(exc).splitlines()[0]}"
            ) from None
    table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]
    if table.num_rows == 0:
        raise UserError(f"dataset {source.path} has no data rows; add rows below the header")
    return table
