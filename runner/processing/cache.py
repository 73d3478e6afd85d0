"""The preprocessing cache: processed splits as Parquet plus meta.json.

Layout: <cache_dir>/<key>/meta.json and <cache_dir>/<key>/data-<id>/{train,validation,test}/part-*.parquet.
cache_dir may be local or an fsspec URL (s3://bucket/prefix).

The key hashes the raw data's fingerprint and everything that changes the
processed data (feature preprocessing, split settings, PREPROCESSING_VERSION),
nothing else, so a training-only change reuses the entry.

Publishing is atomic on any filesystem: the splits are written into a fresh
data-<id> directory first, and meta.json, one small file written last (a rename
locally, a single PUT on object storage), names it. An entry without meta.json,
or a data directory that meta.json does not name, is never read. A lock file
makes runs on this machine that want the same entry (sweep trials) wait for
one build instead of repeating it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator

from runner.processing.features.base import PREPROCESSING_VERSION
from runner.storage import Location, check_bucket, machine_lock

log = logging.getLogger(__name__)
META_FILE = "meta.json"


def cache_key(fingerprint: dict, features: list[dict], split: dict) -> str:
    payload = {
        "version": PREPROCESSING_VERSION,
        "data": fingerprint,
        "features": features,
        "split": split,
    }
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


class PreprocessingCache:
    def __init__(self, cache_dir: str, storage_options: dict | None = None):
        self.root = Location(cache_dir, dict(storage_options or {}))

    def check(self) -> None:
        """Fails now, naming the fix, when an object-storage cache_dir's bucket is missing (the
        credentials and the endpoint are checked by the same request)."""
        if not self.root.is_local:
            check_bucket(self.root.fs, self.root.url, "cache_dir")

    def entry(self, key: str) -> Location:
        return self.root.join(key)

    def lookup(self, key: str) -> dict | None:
        """The entry's metadata when it is complete and of this code's version."""
        entry = self.entry(key)
        entry.fs.invalidate_cache()  # other processes (workers, other runs) may have written it
        try:
            with entry.fs.open(f"{entry.path}/{META_FILE}", "rb") as handle:
                meta = json.loads(handle.read())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        if meta.get("version") != PREPROCESSING_VERSION or not entry.fs.exists(
            f"{entry.path}/{meta['data']}"
        ):
            return None
        return meta

    def splits(self, key: str, meta: dict) -> Location:
        """The directory holding the entry's split directories."""
        return self.entry(key).join(meta["data"])

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        if self.root.is_local:
            locks = os.path.join(self.root.path, ".locks")
        else:  # object storage has no locks: serialize the builds of this machine
            digest = hashlib.sha256(self.root.url.encode()).hexdigest()[:12]
            locks = os.path.join(tempfile.gettempdir(), "tabular-runner-locks", digest)
        with machine_lock(locks, key):
            yield

    @contextlib.contextmanager
    def staging(self, key: str) -> Iterator[tuple[Location, Callable[[dict], None]]]:
        """(a fresh data directory, publish(meta)). Anything not published is removed."""
        entry = self.entry(key)
        data_name = f"data-{uuid.uuid4().hex[:12]}"
        data = entry.join(data_name)
        published = []

        def publish(meta: dict) -> None:
            meta = {**meta, "data": data_name}
            blob = json.dumps(meta, indent=2, sort_keys=True, default=str).encode()
            entry.write_atomic(META_FILE, blob)
            published.append(meta)

        entry.fs.makedirs(entry.path, exist_ok=True)
        try:
            yield data, publish
        finally:
            if not published:
                _remove(data)
        # The entry now names this build; older unpublished or superseded builds go.
        for path in entry.fs.ls(entry.path, detail=False):
            name = path.rstrip("/").rsplit("/", 1)[-1]
            if name.startswith("data-") and name != data_name:
                _remove(entry.join(name))


def _remove(location: Location) -> None:
    with contextlib.suppress(FileNotFoundError):
        location.fs.rm(location.path, recursive=True)
