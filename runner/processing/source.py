"""Where the raw table comes from: a local path, an fsspec URL, or the built-in generator."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

import fsspec

from runner.config import DatasetConfig
from runner.errors import UserError
from runner.storage import check_bucket, storage_errors

FORMATS = ("csv", "parquet")
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

    @classmethod
    def from_config(cls, dataset: DatasetConfig) -> DataSource:
        source = cls(
            path=dataset.path,
            format=dataset.format,
            storage_options=dict(dataset.storage_options or {}),
            synthetic_rows=dataset.synthetic_rows,
            synthetic_seed=dataset.synthetic_seed,
        )
        if source.path is not None:
            source.format = source.format or infer_format(source.path)
            if source.format not in FORMATS:
                raise UserError(
                    f"dataset.format={source.format} is not supported; use csv or parquet"
                )
        return source

    @property
    def is_synthetic(self) -> bool:
        return self.path is None

    @property
    def label(self) -> str:
        return f"synthetic({self.synthetic_rows} rows)" if self.is_synthetic else str(self.path)

    def filesystem(self):
        return fsspec.core.url_to_fs(os.path.expanduser(self.path), **self.storage_options)

    def files(self) -> tuple[object, list[str]]:
        """The filesystem and the data files (one file, or the files of a dataset directory);
        object-storage failures (credentials, bucket, access, endpoint) as one clear line."""
        with storage_errors(str(self.path), "dataset.storage_options"):
            return self._files()

    def _files(self) -> tuple[object, list[str]]:
        fs, path = self.filesystem()
        if not fs.exists(path):
            if "://" in str(self.path) and not str(self.path).startswith("file://"):
                check_bucket(fs, str(self.path), "dataset.path")
            raise UserError(
                f"dataset not found: {self.path}; set dataset.path to an existing CSV or Parquet file"
            )
        if fs.isdir(path):
            suffix = "." + self.format
            files = sorted(
                p
                for p in fs.find(path)
                if p.endswith(suffix) or self.format == "parquet" and p.endswith(".parq")
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
        return {"format": self.format, "files": entries}


def infer_format(path: str) -> str:
    name = path.rstrip("/").lower()
    for suffix in (".csv.gz", ".csv.bz2", ".csv.zip", ".csv", ".tsv"):
        if name.endswith(suffix):
            return "csv"
    if name.endswith((".parquet", ".parq", ".pq")):
        return "parquet"
    if "." not in os.path.basename(name):
        return "parquet"  # a directory of Parquet files, as Spark and Dask write them
    raise UserError(
        f"cannot tell the format of {path}; set dataset.format=csv or dataset.format=parquet"
    )


HASH_MEMO = os.path.join(
    os.path.expanduser(os.environ.get("XDG_CACHE_HOME", "~/.cache")),
    "tabular-runner",
    "file-hashes",
)


def _memoized_content_hash(fs, path: str) -> str:
    """The content hash, re-computed only when the file's stat (size, mtime_ns, inode) changes
    (git's index does the same): a cache hit then costs a stat, not a read of the whole file."""
    stat = os.stat(path)
    signature = [os.path.abspath(path), stat.st_size, stat.st_mtime_ns, stat.st_ino]
    memo = os.path.join(HASH_MEMO, hashlib.sha256(signature[0].encode()).hexdigest()[:32] + ".json")
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
