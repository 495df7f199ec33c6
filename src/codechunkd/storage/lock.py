"""One writer per index directory: an exclusive ``flock`` naming its holder.

The lock is advisory and released by the kernel when the holder dies, so a
crash never leaves a stale lock behind.  The file holds the holder's pid and
command so that the refusal message can name it.

A writer takes two lock files: ``<index>/_codechunkd/writer.lock`` (what older
versions take too) and, first, ``<runtime dir>/<hash of the index's path>.lock``
beside the control socket.  The second outlives the index directory: with the
directory deleted under a running daemon, a ``codechunkd index`` that makes it
again finds a new, unlocked ``writer.lock`` there but is still refused by the
runtime one.  The holder learns that its ``writer.lock`` is gone (``problem``,
``check``: the file at the path is not the one it locked) and stops writing; a daemon then
starts again on a new directory (``retake_index``, the outer lock held throughout).

Each file is opened without following a symbolic link (one pointing outside
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
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from codechunkd.errors import ConfigError, IndexLocked, StoreError
from codechunkd.storage.layout import private_dir

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


_MAX_PID = 2**31 - 1
"""No process has a larger pid (``pid_t`` is 32 bits); ``os.kill`` overflows beyond it."""


def read_holder(path: Path) -> tuple[int, str] | None:
    """(pid, command) written in a lock file by its holder, if any (held or not).

    None when no holder can be known from it: no file, one that cannot be read (a folder
    in its place), or one that names no process (empty, a pid that no process can have).
    Readers go on without a holder; a writer's ``_open_lock`` refuses such a path itself.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            head = f.read(256)
    except OSError:  # a folder (EISDIR), a device that refuses to be read
        return None
    pid, _, what = head.decode("ascii", "replace").strip().partition(" ")
    if not pid.isdigit() or not 0 < int(pid) <= _MAX_PID:
        return None
    return int(pid), what


def live_holder(path: Path) -> tuple[int, str] | None:
    """``read_holder``, when that process is alive and the file is still locked.

    A holder killed by SIGKILL or the OOM killer leaves its pid in the file, and that pid
    may belong to another process since (pid reuse is quick in a container): where the
    kernel's table of locks can be read (``/proc/locks``), a file nobody holds a ``flock``
    on has no live holder, whoever has the pid now.  It is read, not probed with a lock
    of our own, which would make a writer starting at that instant find the file taken.
    """
    found = read_holder(path)
    if found is None:
        return None
    try:
        os.kill(found[0], 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's (a pid reused): still alive
    except OSError:  # no process can have that pid
        return None
    if flocked(path) is False:
        return None
    return found


def flocked(path: Path) -> bool | None:
    """Whether a process holds a ``flock`` on the file at ``path``; None when the kernel's
    table cannot be read (not Linux).  Matched by inode number alone: a lock on a file of
    another file system with the same number reads as held, as it did before this check
    (the device numbers there are not always those ``stat`` gives, e.g. on overlayfs)."""
    try:
        ino = os.stat(path, follow_symlinks=False).st_ino
        with open("/proc/locks", "rb") as f:
            table = f.read(64 << 20)
    except OSError:
        return None
    for line in table.splitlines():
        fields = line.split()  # b"1:", b"FLOCK", b"ADVISORY", b"WRITE", pid, b"MAJ:MIN:INO", …
        if (
            len(fields) >= 6
            and fields[1] == b"FLOCK"
            and fields[5].rpartition(b":")[2] == b"%d" % ino
        ):
            return True
    return False


class _LockFile:
    """One ``flock``ed file, and whether the file at its path is still the one locked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def lock(self, what: str) -> bool:
        fd = _open_lock(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {what}\n".encode())
        self.fd = fd
        return True

    def intact(self) -> bool:
        """The path still names the file this process locked (not removed or replaced)."""
        if self.fd is None:
            return True
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        held = os.fstat(self.fd)
        return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing drops the flock
            self.fd = None


class WriterLock:
    """The writer lock of ``path`` (``<index>/_codechunkd/writer.lock``), and of ``outer``
    (a lock file outside the index directory, taken first) when given."""

    def __init__(
        self,
        path: Path,
        *,
        what: str = "codechunkd",
        outer: Path | None = None,
        index: str | None = None,
        make_dir: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self._make_dir = make_dir or (lambda: path.parent.mkdir(parents=True, exist_ok=True))
        """Makes the lock file's directory once the outer lock is ours (never before: a
        refused writer makes nothing, not even a deleted index's directory again)."""
        self.outer = outer
        self.what = what
        self.index = index or str(path.parent.parent)
        self._inner = _LockFile(path)
        self._files = ([_LockFile(outer)] if outer is not None else []) + [self._inner]

    def holder(self) -> int | None:
        """Pid written by the current holder, if any."""
        for f in self._files:
            found = read_holder(f.path)
            if found is not None:
                return found[0]
        return None

    def acquire(self) -> None:
        if self.outer is not None:
            _private_parent(self.outer)
        for f in self._files:
            try:
                if f is self._inner:  # made only once the outer lock is ours
                    self._make_dir()
                locked = f.lock(self.what)
            except BaseException:
                self.release()
                raise
            if not locked:  # named by the file refused (the outer one may be ours by now)
                found = read_holder(f.path)
                self.release()
                raise IndexLocked(self.index, found[0] if found else None)

    def retake_index(self) -> None:
        """Lock the index's ``writer.lock`` again once it was removed (the directory deleted
        under a running daemon), the lock beside the socket still held: the directory is
        made anew, and nobody else could have written there meanwhile.  ``IndexLocked``
        when another writer took it all the same (one that takes no outer lock)."""
        self._inner.release()  # the removed file's descriptor
        try:
            self._make_dir()
            locked = self._inner.lock(self.what)
        except BaseException:
            self.release()
            raise
        if not locked:
            found = read_holder(self.path)
            self.release()
            raise IndexLocked(self.index, found[0] if found else None)

    def release_index(self) -> None:
        """Let go of the index's ``writer.lock`` alone, keeping the lock beside the socket
        (for ``retake_index``)."""
        self._inner.release()

    def problem(self) -> str | None:
        """Why this holder must not write any more (its ``writer.lock`` is gone), or None."""
        if self._inner.intact():
            return None
        return (
            f"{self.path} was removed or replaced under this writer (was the index directory "
            f"{self.index} deleted?); nothing more is written: restart it to index again"
        )

    def check(self) -> None:
        """Raise ``StoreError`` (``problem``) before a write that must not happen."""
        problem = self.problem()
        if problem:
            raise StoreError(problem)

    def release(self) -> None:
        for f in reversed(self._files):
            f.release()

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


def _private_parent(path: Path) -> None:
    """The runtime directory of the outer lock: made 0700, or refused when not ours alone."""
    problem = private_dir(path.parent)
    if problem:
        raise ConfigError(
            f"not trusting the runtime directory for the writer lock: {problem}; remove it, "
            "or set XDG_RUNTIME_DIR to a directory of your own",
            key="XDG_RUNTIME_DIR",
        )
