"""Read a file only if it is a regular one: a FIFO would block the read for ever, a device
(``/dev/zero``) never ends.

Settings files, ``state.json``, a ref file, a version manifest, the ONNX layout cache: a
path someone else can replace is opened with ``open_regular_file`` or read whole, to a
bound, with ``read_regular_file``.  Below every layer (standard library only).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotARegularFile(OSError):
    """What ``open_regular_file`` and ``read_regular_file`` refuse; it says what the path is
    instead (``a named pipe (FIFO), not a regular file``) or that it is too big."""


def _check_regular(st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise NotARegularFile(f"{kind}, not a regular file")


@contextlib.contextmanager
def open_regular_file(path: Path) -> Iterator[BinaryIO]:
    """``path`` opened for reading if it is a regular file (links followed), else
    ``NotARegularFile``: a FIFO would block the read, a device (``/dev/zero``) never ends.

    The type is checked before opening (opening some devices does something), then again
    on the descriptor, opened non-blocking: a file swapped for a FIFO in between cannot
    block either."""
    _check_regular(os.stat(path))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    with open(os.open(path, flags | getattr(os, "O_CLOEXEC", 0)), "rb") as file:
        _check_regular(os.fstat(file.fileno()))
        yield file


def read_regular_file(path: Path, limit: int, *, limit_says: str) -> bytes:
    """The bytes of ``path``, a regular file (``open_regular_file``) of at most ``limit``
    bytes; a bigger one is refused by its size before it is read, and the read stops one
    byte past the limit (it may grow meanwhile).  ``limit_says`` ends the refusal's text:
    ``more than {limit_says}``."""
    with open_regular_file(path) as file:
        size = os.fstat(file.fileno()).st_size
        if size > limit:
            raise NotARegularFile(f"{size} bytes, more than {limit_says}")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise NotARegularFile(f"more than {limit_says}")
    return data
