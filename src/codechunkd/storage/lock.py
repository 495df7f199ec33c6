"""One writer per index directory: an exclusive ``flock`` naming its holder.

The lock is advisory and released by the kernel when the holder dies, so a
crash never leaves a stale lock behind.  The file holds the holder's pid and
command so that the refusal message can name it.

The file is opened without following a symbolic link (one pointing outside
would have its target truncated), created 0600 (another user who can open it
can ``flock`` it and keep every writer out), and refused when another user
owns it, with a message that says so.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from pathlib import Path
from types import TracebackType

from codechunkd.errors import IndexLocked, StoreError

_OPEN = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _open_lock(path: Path) -> int:
    """The lock file's descriptor, or ``StoreError`` when it is not a file of ours."""
    try:
        fd = os.open(path, _OPEN, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"{path} is a symbolic link; remove it") from None
        raise StoreError(f"cannot open {path}: {exc.strerror}") from None
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = f"{path} is not a regular file"
    elif info.st_uid != os.geteuid():
        problem = f"{path} is owned by uid {info.st_uid}, not you (uid {os.geteuid()}); remove it"
    if problem:
        os.close(fd)
        raise StoreError(problem)
    os.fchmod(fd, 0o600)  # one made 0644 by an older codechunkd: nobody else may flock it
    return fd


class WriterLock:
    def __init__(self, path: Path, *, what: str = "codechunkd") -> None:
        self.path = path
        self.what = what
        self._fd: int | None = None

    def holder(self) -> int | None:
        """Pid written by the current holder, if any."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            text = (f.read(64) or b"").decode("ascii", "replace").split()
        return int(text[0]) if text and text[0].isdigit() else None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_lock(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise IndexLocked(str(self.path.parent.parent), self.holder()) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {self.what}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
