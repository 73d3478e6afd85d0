"""Where the raw table comes from: a local path, an fsspec URL, or the built-in generator."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from dataclasses import dataclass

import fsspec

from runner.config import DatasetConfig
from runner.errors import UserError
from runner.storage import check_bucket, storage_errors

# Formats by what the file's name ends with (a compressed CSV or JSON too: .gz, .bz2, .zip,
# .xz); dataset.format names one where the name does not tell.
SUFFIXES = {
    "csv": (".csv", ".tsv", ".tab", ".txt"),
    "json": (".json", ".jsonl", ".ndjson"),
    "feather": (".feather", ".arrow", ".ipc"),
    "orc": (".orc",),
    "excel": (".xlsx", ".xlsm"),
    "parquet": (".parquet", ".parq", ".pq"),
}
FORMATS = tuple(SUFFIXES)
COMPRESSIONS = (".gz", ".bz2", ".zip", ".xz")
# Candidates when dataset.delimiter is null, in the order that breaks a tie.
DELIMITERS = (",", "\t", ";", "|")
# Files up to this size are content-hashed for the cache key; larger ones use size + mtime.
CONTENT_HASH_LIMIT = 256 * 1024 * 1024
SYNTHETIC_VERSION = 2


@dataclass
class DataSource:
    path: str | None
    format: str | None
    storage_options: dict
    synthetic_rows: int
    synthetic_seed: int
    delimiter: str | None = None  # csv: given, or sniffed from the first file's first lines
    decimal: str | None = None  # csv: given, or sniffed likewise ('.' elsewhere)
    decimal_reason: str = ""  # why a sniffed ',' was picked, for the log

    @classmethod
    def from_config(cls, dataset: DatasetConfig) -> DataSource:
        source = cls(
            path=dataset.path,
            format=dataset.format,
            storage_options=dict(dataset.storage_options or {}),
            synthetic_rows=dataset.synthetic_rows,
            synthetic_seed=dataset.synthetic_seed,
            delimiter=dataset.delimiter,
            decimal=dataset.decimal,
        )
        if source.path is not None:
            if source.format == "tsv":
                source.format, source.delimiter = "csv", source.delimiter or "\t"
            source.format = source.format or infer_format(source.path)
            if source.format not in FORMATS:
                raise UserError(
                    f"dataset.format={source.format} is not supported; use one of "
                    f"{', '.join(FORMATS)} (or tsv)"
                )
            with storage_errors(str(source.path), "dataset.storage_options"):
                source.resolve_delimiter()
        return source

    def resolve_delimiter(self) -> None:
        """A CSV's delimiter: as given, tab for .tsv, else the candidate its header holds most
        of; a given one that leaves the header one column while another would split it is
        named as the mistake. Called once on the driver, before the source travels to tasks."""
        if self.is_synthetic or self.format != "csv":
            self.decimal = self.decimal or "."
            return
        fs, files = self.files()
        line = header_line(self, fs, files[0])
        given = self.delimiter
        lines = first_lines(self, fs, files[0])
        if given is None:
            name = _without_compression(files[0].lower())
            if name.endswith((".tsv", ".tab")):
                self.delimiter = "\t"
            else:
                self.delimiter = sniff_delimiter(lines)
        if self.decimal is None:
            self.decimal, self.decimal_reason = sniff_decimal(lines, self.delimiter or ",")
        assert self.delimiter is not None  # given, or sniffed just above
        if line and self.delimiter not in line:
            other = next((d for d in DELIMITERS if d in line), None)
            if other is not None:
                raise UserError(
                    f"{files[0]} read with delimiter {self.delimiter!r} has one column "
                    f"({line[:60]!r}); its header is {other!r}-separated: set "
                    f"dataset.delimiter={'tab' if other == chr(9) else repr(other)} "
                    "(or null to sniff it)"
                )

    @property
    def is_synthetic(self) -> bool:
        return self.path is None

    @property
    def label(self) -> str:
        return f"synthetic({self.synthetic_rows} rows)" if self.is_synthetic else str(self.path)

    def filesystem(self):
        assert self.path is not None  # the synthetic table has no files
        return fsspec.core.url_to_fs(os.path.expanduser(self.path), **self.storage_options)

    def files(self) -> tuple[fsspec.AbstractFileSystem, list[str]]:
        """The filesystem and the data files (one file, or the files of a dataset directory);
        object-storage failures (credentials, bucket, access, endpoint) as one clear line."""
        with storage_errors(str(self.path), "dataset.storage_options"):
            return self._files()

    def _files(self) -> tuple[fsspec.AbstractFileSystem, list[str]]:
        fs, path = self.filesystem()
        if not fs.exists(path):
            if "://" in str(self.path) and not str(self.path).startswith("file://"):
                check_bucket(fs, str(self.path), "dataset.path")
            raise UserError(
                f"dataset not found: {self.path}; set dataset.path to an existing file or folder "
                f"({', '.join(FORMATS)})"
            )
        if fs.isdir(path):
            assert self.format is not None  # from_config sets it with the path
            suffixes = SUFFIXES.get(self.format, ("." + str(self.format),))
            files = sorted(
                p for p in fs.find(path) if _without_compression(p.lower()).endswith(suffixes)
            )
            if not files:
                raise UserError(
                    f"dataset directory {self.path} holds no .{self.format} files; point dataset.path at a file"
                )
            return fs, files
        return fs, [path]

    def size_bytes(self) -> int:
        """Bytes of raw data (the synthetic table: about what its CSV would take)."""
        if self.is_synthetic:
            return self.synthetic_rows * 100
        fs, files = self.files()
        return sum(int(fs.info(f).get("size") or 0) for f in files)

    def fingerprint(self) -> dict:
        """What identifies the raw data: path, size, modification time, content hash where cheap."""
        if self.is_synthetic:
            return {
                "synthetic": {
                    "rows": self.synthetic_rows,
                    "seed": self.synthetic_seed,
                    "version": SYNTHETIC_VERSION,
                }
            }
        fs, files = self.files()
        entries = []
        for path in files:
            info = fs.info(path)
            entry = {"path": path, "size": info.get("size")}
            mtime = info.get("mtime") or info.get("LastModified") or info.get("last_modified")
            entry["mtime"] = str(mtime) if mtime is not None else None
            if info.get("ETag"):
                entry["etag"] = str(info["ETag"])
            if (info.get("size") or 0) <= CONTENT_HASH_LIMIT and fs.protocol in (
                "file",
                ("file", "local"),
            ):
                entry["blake2b"] = _memoized_content_hash(fs, path)
            entries.append(entry)
        described = {"format": self.format, "files": entries}
        if self.format == "csv":
            described["delimiter"] = self.delimiter
        return described


def infer_format(path: str) -> str:
    name = _without_compression(path.rstrip("/").lower())
    for format_, suffixes in SUFFIXES.items():
        if name.endswith(suffixes):
            return format_
    if "." not in os.path.basename(name):
        return "parquet"  # a directory of Parquet files, as Spark and Dask write them
    raise UserError(
        f"cannot tell the format of {path} from its name; set dataset.format to one of "
        f"{', '.join(FORMATS)}"
    )


def _without_compression(name: str) -> str:
    for suffix in COMPRESSIONS:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def sniff_delimiter(lines: list[str]) -> str:
    """The candidate that splits the header and the rows below it into the same number of
    fields, the most of them (a ';'-file's decimal commas do not count: they vary from row to
    row or sit inside quotes); the header's most frequent candidate where none is consistent."""
    import csv

    def widths(delimiter: str) -> set[int]:
        return {len(row) for row in csv.reader(lines, delimiter=delimiter) if row}

    consistent = [d for d in DELIMITERS if len(widths(d)) == 1 and widths(d) != {1}]
    if consistent:
        return max(consistent, key=lambda d: (widths(d).pop(), -DELIMITERS.index(d)))
    header = lines[0] if lines else ""
    return max(DELIMITERS, key=lambda d: (header.count(d), -DELIMITERS.index(d)))


def sniff_decimal(lines: list[str], delimiter: str) -> tuple[str, str]:
    """',' where some columns hold numbers written with decimal commas (3,5) and none with
    decimal points, in a file not separated by commas; else '.'. With the reason for the log."""
    import csv

    if delimiter == "," or len(lines) < 2:
        return ".", ""
    rows = [r for r in csv.reader(lines[1:], delimiter=delimiter) if r]
    width = max((len(r) for r in rows), default=0)
    commas, points = [], 0
    for i in range(width):
        values = [r[i].strip() for r in rows if i < len(r) and r[i].strip()]
        if not values or not all(_PLAIN_NUMBER.match(v) for v in values):
            continue
        if any("," in v for v in values):
            commas.append(i)
        elif any("." in v for v in values):
            points += 1
    if commas and not points:
        header = next(csv.reader(lines[:1], delimiter=delimiter), [])
        names = [header[i] for i in commas if i < len(header)]
        shown = ", ".join(repr(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
        return ",", f"{shown} write numbers with a decimal comma"
    return ".", ""


_PLAIN_NUMBER = re.compile(r"^[-+]?(\d+([.,]\d+)?|[.,]\d+)([eE][-+]?\d+)?$")


def first_lines(source: DataSource, fs, path: str, limit: int = 64 * 1024) -> list[str]:
    """The whole lines among a text file's first `limit` bytes (at least its first line)."""
    with reading_errors(source, path):
        with fs.open(path, "rb", compression="infer") as handle:
            data = handle.read(limit)
    text = data.decode("utf-8-sig", errors="replace")
    lines = text.splitlines()
    if len(data) == limit and len(lines) > 1:
        lines = lines[:-1]  # the last one may be cut
    return lines[:50]


def header_line(source: DataSource, fs, path: str) -> str:
    """The first line of a (possibly compressed) text file; a file that does not decompress
    or decode is the user's one line naming it and its format."""
    with reading_errors(source, path):
        with fs.open(path, "rb", compression="infer") as handle:
            return handle.readline().decode("utf-8-sig").rstrip("\r\n")


@contextlib.contextmanager
def reading_errors(source: DataSource, path: str):
    """Errors reading one raw file (pyarrow's, a bad compression, bytes that do not decode) as
    the user's one line naming the file and its format (empty, unreadable). A missing or
    forbidden file keeps its own error."""
    import lzma
    import zlib

    import pyarrow as pa

    try:
        yield
    except (pa.ArrowInvalid, EOFError, OSError, ValueError, zlib.error, lzma.LZMAError) as exc:
        if isinstance(exc, FileNotFoundError | PermissionError):
            raise
        if "Empty CSV file" in str(exc):
            raise UserError(
                f"dataset {source.path} is empty; give it a header row and data rows"
            ) from None
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        compression = next((c for c in COMPRESSIONS if path.lower().endswith(c)), "")
        kind = f"{compression[1:]}-compressed " if compression else ""
        if "CSV parse error" in first:  # one bad row: where it is, and what fixes it
            line = _line_of_row(path, first) if not compression else None
            where = f" (line {line})" if line else ""
            raise UserError(
                f"cannot read {path} as csv{where}: {first}; fix that row (quote a value that "
                "holds the delimiter) or set dataset.delimiter"
            ) from None
        raise UserError(
            f"cannot read {path} as {kind}{source.format}: {first}; check the file "
            "(or set dataset.format to what it holds)"
        ) from None


def _line_of_row(path: str, message: str) -> int | None:
    """The line number of the row pyarrow quotes in its parse error (a local file's)."""
    quoted = re.search(r"got \d+: (.+?)(?: \.\.\.)?$", message)
    if quoted is None or not os.path.isfile(path):
        return None
    start = quoted[1][:60]
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, start=1):
            if text.startswith(start):
                return number
    return None


HASH_MEMO = os.path.join(
    os.path.expanduser(os.environ.get("XDG_CACHE_HOME", "~/.cache")),
    "tabular-runner",
    "file-hashes",
)


def _memoized_content_hash(fs, path: str) -> str:
    """The content hash, re-computed only when the file's stat (size, mtime_ns, inode) changes
    (git's index does the same): a cache hit then costs a stat, not a read of the whole file."""
    stat = os.stat(path)
    absolute = os.path.abspath(path)
    signature = [absolute, stat.st_size, stat.st_mtime_ns, stat.st_ino]
    memo = os.path.join(HASH_MEMO, hashlib.sha256(absolute.encode()).hexdigest()[:32] + ".json")
    try:
        with open(memo) as handle:
            saved = json.load(handle)
        if saved["signature"] == signature:
            return saved["blake2b"]
    except (OSError, ValueError, KeyError):
        pass
    digest = _content_hash(fs, path)
    try:
        os.makedirs(HASH_MEMO, exist_ok=True)
        tmp = f"{memo}.{os.getpid()}.tmp"
        with open(tmp, "w") as handle:
            json.dump({"signature": signature, "blake2b": digest}, handle)
        os.replace(tmp, memo)
    except OSError:
        pass  # a read-only home only costs the hash next time
    return digest


def _content_hash(fs, path: str) -> str:
    digest = hashlib.blake2b(digest_size=16)
    with fs.open(path, "rb") as handle:
        while chunk := handle.read(8 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()
