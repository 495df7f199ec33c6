"""Working-tree files, opened without leaving the tree, blocking, or reading too much.

A path inside the working tree is reached one component at a time with
``openat`` and ``O_NOFOLLOW``: a directory replaced by a symlink (``conf ->
/etc``) is never followed, so no byte from outside the repository is read.
The file itself is opened with ``O_NONBLOCK`` (a FIFO that replaced a file
must not block the writer in ``open()``), and ``fstat`` of the opened
descriptor decides what it is and how big it is before one byte is read.

Errors are ``OSError``s: ``ENOENT``/``ENOTDIR``/``ELOOP`` mean the path is not
a file of the working tree (a component is missing, a file, or a symlink);
``EACCES``/``EPERM``/``EIO`` mean it is there but cannot be read.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

# O_PATH: traversing a directory needs only its search bit, as path lookup does
_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1 << 20

#: errors that say "this path is not a file of the working tree" (rather than "cannot be read")
ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG})


def is_absent(exc: OSError) -> bool:
    """True when ``exc`` means the path is not (or no longer) a file inside the tree."""
    return exc.errno in ABSENT


def _parts(path: str) -> list[str]:
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise OSError(errno.ENOENT, "not a path inside the working tree", path)
    return parts


@contextmanager
def parent_dir(root: str, path: str) -> Iterator[tuple[int, str]]:
    """(descriptor of the directory holding ``path``, its last component).

    Every directory between ``root`` and the file is opened with ``O_NOFOLLOW``:
    a symlinked directory raises ``ELOOP``, a file where a directory should be
    ``ENOTDIR``.
    """
    *dirs, name = _parts(path)
    fd = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)  # the root itself was resolved by the caller
    try:
        for part in dirs:
            sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = sub
        yield fd, name
    finally:
        os.close(fd)


def lstat(root: str, path: str) -> os.stat_result:
    """``lstat`` of a path inside the tree, reached without following a symlink."""
    with parent_dir(root, path) as (fd, name):
        return os.stat(name, dir_fd=fd, follow_symlinks=False)


def readlink(root: str, path: str) -> str:
    """The target of a symlink inside the tree (the link itself, never followed)."""
    with parent_dir(root, path) as (fd, name):
        return os.readlink(name, dir_fd=fd)


@contextmanager
def open_file(root: str, path: str) -> Iterator[tuple[int, os.stat_result]]:
    """(descriptor, fstat) of a regular file inside the tree, opened without blocking.

    Anything but a regular file (a FIFO, a socket, a device, a directory)
    raises ``ENOENT``-like ``OSError``: it is not a file version.
    """
    with parent_dir(root, path) as (dfd, name):
        fd = os.open(name, _FILE_FLAGS, dir_fd=dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.ENOENT, "not a regular file", path)
        yield fd, st
    finally:
        os.close(fd)


def read_at_most(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd`` (fewer at end of file)."""
    parts: list[bytes] = []
    left = limit
    while left > 0:
        got = os.read(fd, min(left, _CHUNK))
        if not got:
            break
        parts.append(got)
        left -= len(got)
    return b"".join(parts)


def hash_fd(fd: int, size: int) -> str:
    """git's blob id of the ``size`` bytes of a regular file, read in bounded pieces.

    A file that shrinks while it is read raises ``EAGAIN``: it is being
    written, and the event that ends the write brings it back.
    """
    h = hashlib.sha1(f"blob {size}\0".encode(), usedforsecurity=False)
    left = size
    while left > 0:
        got = os.read(fd, min(left, _CHUNK))
        if not got:
            raise OSError(errno.EAGAIN, "file changed while it was hashed")
        h.update(got)
        left -= len(got)
    return h.hexdigest()


def blob_of(root: str, path: str, st: os.stat_result | None = None) -> str:
    """git's blob id of a file or symlink of the tree as it is now (a symlink: its target's
    text, never what it points to), reached and read as above: never outside the tree,
    never blocking.  Anything else raises ``OSError`` (``ENOENT`` for a FIFO, a socket, a
    directory).  ``st``: the path's ``lstat``, when the caller has it."""
    st = st if st is not None else lstat(root, path)
    if stat.S_ISLNK(st.st_mode):
        target = os.fsencode(readlink(root, path))
        head = f"blob {len(target)}\0".encode()
        return hashlib.sha1(head + target, usedforsecurity=False).hexdigest()
    with open_file(root, path) as (fd, opened):
        return hash_fd(fd, opened.st_size)
