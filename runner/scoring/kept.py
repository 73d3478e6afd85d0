"""predict.keep_columns from a CSV, typed: every processor reads a CSV's cells as strings, so a
kept column's type is decided once, on the driver, from the whole column, and each partition's
strings are cast to it. Only types that give every value back as written are taken: whole
numbers without leading zeros that fit 64 bits, numbers of at most 15 significant digits,
true/false, ISO times; an ID such as '00501' or a 20-digit key stays a string."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LEADING_ZERO = r"^[-+]?0[0-9]"
_MAX_DIGITS = 15  # what a float64 keeps of a decimal number


def kept_column_types(source, columns: tuple[str, ...]) -> dict[str, pa.DataType]:
    """{column: type} for the kept columns of a CSV source that read as something other than
    strings; {} for other formats (their files carry types)."""
    from runner.processing.reading import read_arrow

    if source.is_synthetic or source.format != "csv" or not columns:
        return {}
    table = read_arrow(source, columns=list(columns))
    types = {}
    for name in columns:
        found = column_type(table.column(name), source.decimal or ".")
        if found is not None:
            types[name] = found
    return types


def column_type(strings: pa.ChunkedArray, decimal: str = ".") -> pa.DataType | None:
    """The type every present value of a string column reads back as written; None: strings."""
    values = pc.utf8_trim_whitespace(pc.drop_null(strings).combine_chunks())
    if len(values) == 0 or not pa.types.is_string(values.type):
        return None
    if pc.any(pc.match_substring_regex(values, _LEADING_ZERO)).as_py():
        return None
    try:
        whole = values.cast(pa.int64())
        if pc.all(pc.equal(whole.cast(pa.string()), values)).as_py():
            return pa.int64()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    numbers = pc.replace_substring(values, ",", ".") if decimal == "," else values
    try:
        numbers.cast(pa.float64())
        digits = pc.utf8_length(pc.replace_substring_regex(numbers, r"e.*|E.*|[^0-9]", ""))
        if int(np.max(digits.to_numpy(zero_copy_only=False))) <= _MAX_DIGITS:
            return pa.float64()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    if pc.all(pc.is_in(pc.utf8_lower(values), pa.array(["true", "false"]))).as_py():
        return pa.bool_()
    try:
        values.cast(pa.timestamp("us"))
        return pa.timestamp("us")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
