"""Giving a reloaded bundle's memory back to the operating system (glibc; elsewhere a no-op).

A bundle's arrays are large allocations. glibc serves those with mmap, but raises its mmap
threshold each time such a block is freed, so after a reload the next bundle's arrays come from
the heap, and a heap freed in pieces is not returned: resident memory grew by about a bundle
over the first reloads. A fixed threshold keeps every large array in mmap (returned on free),
and ``malloc_trim`` returns the heap pages the old bundle's small objects leave free.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3  # mallopt parameters (malloc.h)
M_ARENA_MAX = -8
MMAP_THRESHOLD = 1 << 20  # arrays of 1 MiB and more: always mmap


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _libc()


def keep_large_allocations_returnable() -> None:
    if _LIBC is not None:
        _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        _LIBC.mallopt(M_ARENA_MAX, 1)


def give_back() -> None:
    """Return free heap pages to the system (called when an old bundle is collected)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
