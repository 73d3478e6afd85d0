"""Paths that may be local or on object storage (fsspec URLs), and their credentials."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import fsspec

from runner.errors import UserError

# Credential keys as users write them (AWS names, s3fs names) -> s3fs storage options.
_S3_KEYS = {
    "aws_access_key_id": "key",
    "access_key_id": "key",
    "key": "key",
    "aws_secret_access_key": "secret",
    "secret_access_key": "secret",
    "secret": "secret",
    "aws_session_token": "token",
    "session_token": "token",
    "token": "token",
}
_CLIENT_KEYS = {
    "endpoint_url": "endpoint_url",
    "region": "region_name",
    "region_name": "region_name",
}


def load_credentials(credentials) -> dict:
    """cache_credentials (a dict, or the path of a JSON file holding one) -> fsspec storage options."""
    if credentials is None:
        return {}
    if isinstance(credentials, str):
        path = os.path.expanduser(credentials)
        try:
            with open(path) as handle:
                credentials = json.load(handle)
        except FileNotFoundError:
            raise UserError(
                f"cache_credentials file {credentials} does not exist; fix the path or give the credentials inline"
            ) from None
        except json.JSONDecodeError as exc:
            raise UserError(
                f"cache_credentials file {credentials} is not valid JSON ({exc.msg} at line {exc.lineno}); fix the file"
            ) from None
    if not isinstance(credentials, dict):
        raise UserError(
            "cache_credentials must be a mapping (key, secret, endpoint_url, ...) or the path of a JSON file holding one"
        )
    credentials = dict(credentials.get("s3", credentials))
    options: dict = {}
    client: dict = {}
    for name, value in credentials.items():
        if name in _S3_KEYS:
            options[_S3_KEYS[name]] = value
        elif name in _CLIENT_KEYS:
            client[_CLIENT_KEYS[name]] = value
        else:
            options[name] = value
    if client:
        options["client_kwargs"] = {**options.get("client_kwargs", {}), **client}
    return options


@dataclass
class Location:
    """A directory on some filesystem; pickles to workers without its open filesystem."""

    url: str
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        self.url = os.path.expanduser(self.url).rstrip("/")
        self._fs = None

    def __getstate__(self):
        return {"url": self.url, "options": self.options}

    def __setstate__(self, state):
        self.url, self.options, self._fs = state["url"], state["options"], None

    @property
    def is_local(self) -> bool:
        return "://" not in self.url or self.url.startswith("file://")

    @property
    def fs(self):
        if self._fs is None:
            self._fs, _ = fsspec.core.url_to_fs(self.url, **self.options)
        return self._fs

    @property
    def path(self) -> str:
        """The path inside the filesystem (no protocol)."""
        return (
            fsspec.core.url_to_fs(self.url, **self.options)[1]
            if not self.is_local
            else os.path.abspath(self.url)
        )

    def join(self, *parts: str) -> Location:
        return Location("/".join([self.url, *parts]), self.options)

    def arrow_filesystem(self):
        """A pyarrow filesystem for this location (what pyarrow and Ray Data read through)."""
        import pyarrow.fs as pafs

        if self.is_local:
            return pafs.LocalFileSystem()
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    def write_parquet(self, table, name: str) -> None:
        import pyarrow.parquet as pq

        self.fs.makedirs(self.path, exist_ok=True)
        pq.write_table(table, f"{self.path}/{name}", filesystem=self.arrow_filesystem())

    def write_atomic(self, name: str, blob: bytes) -> None:
        """A small file below, whole or absent to any reader: written under a name of its own
        and renamed locally, one PUT on object storage."""
        path = f"{self.path}/{name}"
        if self.is_local:
            tmp = f"{path}.{uuid.uuid4().hex[:12]}.tmp"
            with open(tmp, "wb") as handle:
                handle.write(blob)
            os.replace(tmp, path)
        else:
            self.fs.pipe_file(path, blob)

    def read_table(self):
        import pyarrow.parquet as pq

        return pq.read_table(self.path, filesystem=self.arrow_filesystem())

    def files(self, suffix: str = ".parquet") -> list[str]:
        """Paths (within the filesystem) of the files below, sorted."""
        return sorted(p for p in self.fs.find(self.path) if p.endswith(suffix))


@contextlib.contextmanager
def machine_lock(directory: str, name: str) -> Iterator[None]:
    """An exclusive lock file `<directory>/<name>.lock` held inside: builds on this machine
    that want the same thing wait for each other."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{name}.lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_text_atomic(path, text: str) -> None:
    """A local text file written under a temporary name and renamed: whole or absent."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_frame(frame, path) -> None:
    """A DataFrame as one local Parquet file, renamed into place once whole."""
    tmp = f"{path}.tmp"
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, path)


def _bucket(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0]


@contextlib.contextmanager
def local_write_errors(url: str, key: str) -> Iterator[None]:
    """A local directory the run cannot write (no permission, read-only, missing parent, full
    disk) as one line naming it and the config key; other errors pass through."""
    if "://" in url and not url.startswith("file://"):
        yield
        return
    root = url.removeprefix("file://")
    try:
        yield
    except UserError:
        raise
    except OSError as error:
        text = str(error)
        full = error.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left on device" in text
        ours = str(error.filename or "").startswith(root) or root in text
        if not (full or (ours and error.errno in UNWRITABLE)):
            raise
        why = "the disk is full" if full else (error.strerror or text.splitlines()[0])
        raise UserError(
            f"cannot write to {root} ({why}); set {key} to a writable directory with room "
            "for the processed splits"
        ) from None


UNWRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR}


@contextlib.contextmanager
def storage_errors(url: str, key: str) -> Iterator[None]:
    """Object-storage failures as one line that names the URL and the config key to fix."""
    if "://" not in url or url.startswith("file://"):
        yield
        return
    try:
        yield
    except UserError:
        raise
    except PermissionError:
        raise UserError(
            f"access denied to {url}; check the credentials in {key} (and that they may read and write there)"
        ) from None
    except Exception as error:  # noqa: BLE001 - botocore, aiohttp and fsspec errors, told apart by name
        names = {cls.__name__ for cls in type(error).__mro__}
        if names & {"NoCredentialsError", "PartialCredentialsError"}:
            raise UserError(
                f"no credentials for {url}; give them in {key} (key, secret) or in the "
                "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY variables"
            ) from None
        if names & {
            "EndpointConnectionError",
            "ConnectTimeoutError",
            "ClientConnectorError",
            "ConnectionError",
        }:
            raise UserError(
                f"cannot reach the storage endpoint of {url} ({str(error).splitlines()[0][:160]}); "
                f"check endpoint_url in {key}"
            ) from None
        if (
            isinstance(error, FileNotFoundError)
            and _bucket(url) in str(error)
            and "NoSuchBucket" in repr(error)
        ):
            raise UserError(
                f"bucket '{_bucket(url)}' of {url} does not exist; create it or fix {key}"
            ) from None
        raise


def check_bucket(fs, url: str, key: str) -> None:
    """A missing bucket is named as such (fsspec would say the file is not found, or create it)."""
    bucket = _bucket(url)
    try:
        fs.ls(
            bucket, detail=False
        )  # unlike exists(), raises what went wrong (credentials, access, endpoint)
    except FileNotFoundError:
        raise UserError(
            f"bucket '{bucket}' of {url} does not exist; create it, or fix the URL or {key}"
        ) from None
