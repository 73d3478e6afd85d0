"""Hands the heaps' free pages back to the system between the windows of a stream.

Profiled on the streaming bench (memray against the process's RSS, 1M -> 4M rows): the
training process's live heap stayed flat while its RSS grew by ~350 MB over the epoch, all
of it in glibc's main heap ([heap] in smaps). Each window's arrays are freed, but small
objects allocated between them pin the heap's top, so glibc keeps the holes. malloc_trim
returns every free page, wherever it lies (madvise); it costs about a millisecond here, once
per window. Elsewhere than glibc it does nothing. Arrow's own pool (mimalloc in these
wheels) keeps freed pages too: at the 10M-row test split's scoring, 330 MB of RSS that
memray saw no live allocation for; release_unused hands them back.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import pyarrow as pa


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None


def release_free_pages() -> None:
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
