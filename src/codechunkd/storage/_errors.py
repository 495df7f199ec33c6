"""One translation of LanceDB, Arrow, SQLite and OS errors into ``StoreError``s.

Storage owns LanceDB and SQLite, so storage is where their exceptions stop: every
method of ``IndexStore`` and of the caches that touches them is wrapped with
``translating``, and the user sees one line with an exit code, never a traceback.
A missing or unreadable file of the index is ``IndexDamaged`` (``codechunkd index
--rebuild`` repairs it); a full or read-only disk, a permission, a lock held
elsewhere is a plain ``StoreError`` (a rebuild would not help, so none is suggested).
"""

from __future__ import annotations

import errno
import functools
import re
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from codechunkd.errors import CodechunkdError, IndexDamaged, StoreError
from codechunkd.storage.objectstore import failure_reason

_RUST_LOCATION = re.compile(r",\s*/\S*?\.rs:\d+:\d+")
_ENVIRONMENT = re.compile(
    r"no space left|disk is full|disk quota|permission denied|read-only file system|"
    r"too many open files|cannot allocate memory|out of memory|database is locked",
    re.IGNORECASE,
)
_ENV_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EMFILE}
_URL = re.compile(r"https?://[^/\s?\"']+")
_DAMAGE = re.compile(
    r"not found: |no such file|was not found|sufficient data|corrupt|failed to decode|"
    r"invalid range|unexpected end|unexpected eof|invalid protobuf|not a lance file|"
    r"invalid magic|checksum|not a database|malformed|file size is too small|"
    r"field ids but \d+ column",
    re.IGNORECASE,
)


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, without the Rust source locations LanceDB adds."""
    text = " ".join(_RUST_LOCATION.sub("", str(exc)).split())
    return text or type(exc).__name__


def translate(exc: BaseException, what: str, *, damage: bool = False) -> StoreError:
    """``exc`` as a one-line ``StoreError`` that says what was being done.

    ``damage``: an error that is not the environment's (disk, permissions, the object
    store) means the files are damaged, whatever LanceDB's words (opening a table that
    exists: its manifest is all there is to read)."""
    if isinstance(exc, StoreError):
        return exc
    text = f"{what}: {one_line(exc)}"
    reason = failure_reason(text) if "s3://" in what else None
    if reason:  # LanceDB's object-store errors are long Rust texts: say what they mean
        server = _URL.search(text)
        return StoreError(f"{what}: {reason}" + (f" ({server.group(0)})" if server else ""))
    if (isinstance(exc, OSError) and exc.errno in _ENV_ERRNOS) or _ENVIRONMENT.search(text):
        return StoreError(text)
    if damage or isinstance(exc, FileNotFoundError) or _DAMAGE.search(text):
        return IndexDamaged(text)
    return StoreError(text)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def translating(
    what: str, *, damage: bool = False
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Translate what the wrapped method raises (see ``translate``, and its ``damage``),
    naming the object's ``uri`` or ``path``.  Our own errors pass through, so wrapped
    methods may nest."""

    def wrap(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return fn(*args, **kwargs)
            except CodechunkdError:
                raise
            except Exception as exc:
                where = getattr(args[0], "uri", None) or getattr(args[0], "path", None)
                where_ = f"{what} in {where}" if where else what
                raise translate(exc, where_, damage=damage) from exc

        return call

    return wrap
