"""The preprocessing cache: processed splits as Parquet plus meta.json.

Layout: <cache_dir>/<key>/{train,validation,test}/part-*.parquet and meta.json.
The key hashes the raw data's fingerprint and everything that changes the
processed data (feature preprocessing, split settings, PREPROCESSING_VERSION),
nothing else, so a training-only change reuses the entry.

An entry is built in a temporary sibling directory and published with one
rename; meta.json is written last, and an entry without it is never read. A
lock file makes concurrent runs (sweep trials) wait for one build instead of
repeating it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from runner.processing.features import PREPROCESSING_VERSION

log = logging.getLogger(__name__)
META_FILE = "meta.json"
STALE_TMP_SECONDS = 24 * 3600


def cache_key(fingerprint: dict, features: list[dict], split: dict) -> str:
    payload = {
        "version": PREPROCESSING_VERSION,
        "data": fingerprint,
        "features": features,
        "split": split,
    }
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def read_meta(entry: Path) -> dict | None:
    try:
        meta = json.loads((entry / META_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return meta if meta.get("version") == PREPROCESSING_VERSION else None


class PreprocessingCache:
    def __init__(self, cache_dir: str):
        self.root = Path(os.path.expanduser(cache_dir)).absolute()

    def entry(self, key: str) -> Path:
        return self.root / key

    def lookup(self, key: str) -> dict | None:
        return read_meta(self.entry(key))

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        locks = self.root / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{key}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def staging(self, key: str) -> Iterator[Path]:
        """A fresh directory to build the entry in; published atomically on success,
        removed on any failure."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._remove_stale_staging()
        tmp = self.root / f".tmp-{key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            yield tmp
            if not (tmp / META_FILE).exists():
                raise RuntimeError("a cache entry was staged without meta.json")
            final = self.entry(key)
            if final.exists():  # an older, unreadable entry (other version): replace it
                shutil.rmtree(final)
            os.rename(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def _remove_stale_staging(self) -> None:
        now = time.time()
        for path in self.root.glob(".tmp-*"):
            try:
                if now - path.stat().st_mtime > STALE_TMP_SECONDS:
                    shutil.rmtree(path, ignore_errors=True)
            except FileNotFoundError:
                pass


def write_meta(directory: Path, meta: dict) -> None:
    tmp = directory / (META_FILE + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
    os.replace(tmp, directory / META_FILE)
