"""glibc heap settings for long writers: few arenas, freed pages returned (no-ops elsewhere).

A cold index allocates and frees batch after batch from many threads: the reader, the
embedder, and LanceDB's and Lance's runtimes (dozens of threads). glibc gives each
contending thread an arena, up to 8 per core, and keeps what was freed in each of them,
so the resident size of a long index ratchets up although its live data does not grow.
Two arenas cut a cold index's peak RSS by a fifth (bench/cold.py; docs/operations.md, Measured).
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

from codechunkd import platform

ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number, from malloc.h


@functools.cache
def _libc() -> Any | None:
    """glibc's handle, or None where the C library is another (musl, macOS, Windows)."""
    if not platform.glibc():
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018 - glibc has both
    except (OSError, AttributeError):  # not glibc
        return None
    return libc


def limit_arenas() -> None:
    """Cap glibc's malloc arenas at ``ARENAS``, unless ``MALLOC_ARENA_MAX`` says otherwise.

    Call it before threads start: arenas already created stay.
    """
    libc = _libc()
    if libc is not None and "MALLOC_ARENA_MAX" not in os.environ:
        libc.mallopt(_M_ARENA_MAX, ARENAS)


def release_freed_memory() -> None:
    """Give the heap's free pages back to the system (after a batch)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def resident_mib() -> float | None:
    """This process's resident memory in MiB, from ``/proc/self/statm`` (None where there
    is none: macOS, Windows)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
