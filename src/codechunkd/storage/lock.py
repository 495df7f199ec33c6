"""One writer per index directory: an exclusive ``flock`` naming its holder.

The lock is advisory and released by the kernel when the holder dies, so a
crash never leaves a stale lock behind.  The file holds the holder's pid and
command so that the refusal message can name it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from types import TracebackType

from codechunkd.errors import IndexLocked


class WriterLock:
    def __init__(self, path: Path, *, what: str = "codechunkd") -> None:
        self.path = path
        self.what = what
        self._fd: int | None = None

    def holder(self) -> int | None:
        """Pid written by the current holder, if any."""
        try:
            text = self.path.read_text().split()
        except OSError:
            return None
        return int(text[0]) if text and text[0].isdigit() else None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
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
