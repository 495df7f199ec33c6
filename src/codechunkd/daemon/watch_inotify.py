"""The inotify backend (Linux): one counted watch per directory git does not ignore.

Built on watchdog's inotify layer (``InotifyFD``: one inotify descriptor, one
reader thread, a callback per watch) rather than its recursive observer,
because the observer watches every directory below the root, ignored trees
included, and says nothing when it runs out of watches (it silently watches
the first N directories).  Here each source adds one watch per directory git
does not ignore, counted against the budget first, so running short is a
logged, visible ``degraded`` state with a periodic reconcile in its place.

Importing this module needs a libc with inotify (watchdog raises otherwise):
``make_watcher`` imports it only when the inotify backend is chosen.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable
from pathlib import Path

from watchdog.observers.inotify_c import (
    CallbackId,
    InotifyEvent,
    InotifyFD,
    Mask,
    WatchDescriptor,
)
from watchdog.observers.inotify_c import (
    InotifyConstants as IN,
)

from codechunkd import logs
from codechunkd.daemon.watcher import SYSCTL, Change, Sink, SourceWatch, Watcher, _Dir
from codechunkd.git.changes import Source

log = logs.get_logger("codechunkd.watcher")

MASK = Mask(
    IN.IN_CLOSE_WRITE
    | IN.IN_MODIFY
    | IN.IN_ATTRIB  # a file made readable again (chmod) is read at once, not at a reconcile
    | IN.IN_CREATE
    | IN.IN_DELETE
    | IN.IN_MOVED_FROM
    | IN.IN_MOVED_TO
    | IN.IN_DELETE_SELF
    | IN.IN_MOVE_SELF
    | IN.IN_ONLYDIR
    | IN.IN_DONT_FOLLOW
    | IN.IN_EXCL_UNLINK
)
_GONE = IN.IN_DELETE | IN.IN_MOVED_FROM
_APPEARED = IN.IN_CREATE | IN.IN_MOVED_TO
_WRITTEN = IN.IN_CLOSE_WRITE | IN.IN_MOVED_TO | IN.IN_MODIFY
_FINAL = IN.IN_MOVED_TO | IN.IN_CLOSE_WRITE


def kernel_watch_limit() -> int:
    try:
        return int(Path("/proc/sys/fs/inotify/max_user_watches").read_text())
    except (OSError, ValueError):
        return 8192


def watches_in_use() -> int:
    """inotify watches held by this user's processes (the ones /proc lets us read)."""
    uid = os.getuid()
    used = 0
    try:
        pids = os.listdir("/proc")
    except OSError:  # no /proc (a container without it): count none
        return 0
    for pid in pids:
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                    continue
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    used += sum(1 for line in f if line.startswith("inotify wd:"))
            except OSError:
                continue
    return used


def _change(event: InotifyEvent) -> Change:
    return Change(
        name=os.fsdecode(event.name),
        is_dir=event.is_directory,
        gone=bool(event.mask & _GONE),
        appeared=bool(event.mask & _APPEARED),
        written=bool(event.mask & _WRITTEN),
        final=bool(event.mask & _FINAL),
    )


class InotifySourceWatch(SourceWatch):
    """The inotify watches of one source (a watchdog ``WatchCallback``)."""

    backend = "inotify"

    def __init__(self, owner: InotifyWatcher, source: Source) -> None:
        super().__init__(owner, source)
        self.inotify = owner
        self._dirs: dict[WatchDescriptor, _Dir] = {}

    # -- setup ------------------------------------------------------------------

    @property
    def watches(self) -> int:
        return len(self._dirs)

    def _git_dirs(self) -> list[tuple[str, _Dir]]:
        out = [(self.git_dir, _Dir("git", ""))]
        if os.path.isdir(os.path.join(self.git_dir, "logs")):
            out.append((os.path.join(self.git_dir, "logs"), _Dir("logs", "logs")))
        if self.common != self.git_dir:
            out.append((self.common, _Dir("common", "")))
        refs = os.path.join(self.common, "refs")
        for root, dirs, _ in os.walk(refs):
            rel = os.path.relpath(root, self.common)
            out.append((root, _Dir("refs", rel)))
            dirs.sort()
        return out

    def _add(self, path: str, d: _Dir) -> None:
        wd = self.inotify.add_watch(path, self)
        self._dirs[wd] = d

    def start(self) -> None:
        """Add every watch, or only the git ones when the budget is short."""
        with self._lock:
            for path, d in self._git_dirs():
                try:
                    self._add(path, d)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    self._degrade(None, 0)
                    return
            if self.root is None:
                return
            dirs = list(self._tree_dirs())
            budget = self.inotify.budget()
            if len(dirs) > budget:
                self._degrade(len(dirs), budget)
                return
            self._add_tree(dirs)

    def _add_tree(self, dirs: Iterable[str]) -> list[str]:
        assert self.root is not None
        added: list[str] = []
        for rel in dirs:
            try:
                self._add(os.path.join(self.root, rel) if rel else self.root, _Dir("tree", rel))
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    self._degrade(None, self.inotify.budget())
                    break
                raise
            added.append(rel)
        return added

    def _watch_new_tree(self, dirs: list[str]) -> list[str]:
        return self._add_tree(dirs)

    def _watch_new_git_dir(self, d: _Dir, name: str) -> None:
        with self._lock, contextlib.suppress(OSError):
            if d.kind == "refs":
                sub = os.path.join(d.rel, name)
                self._add(os.path.join(self.common, sub), _Dir("refs", sub))
            elif d.kind == "git" and name == "logs":
                self._add(os.path.join(self.git_dir, "logs"), _Dir("logs", "logs"))

    def _degrade(self, needed: int | None, available: int) -> None:
        self.degraded = (
            f"inotify watch limit: {needed or 'more'} directories to watch, {available} watches "
            f"available; raise {SYSCTL} (sysctl -w {SYSCTL}=524288); falling back to "
            "periodic reconcile"
        )
        log.warning(
            "inotify_watch_limit",
            repo=self.source.repo,
            needed=needed,
            available=available,
            sysctl=SYSCTL,
            fallback="periodic_reconcile",
        )

    def refresh(self) -> None:
        """Watch directories that appeared while events were lost or ignore rules changed."""
        if self.root is None or self.degraded:
            return
        with self._lock:
            have = {d.rel for d in self._dirs.values() if d.kind == "tree"}
            missing = [rel for rel in self._tree_dirs() if rel not in have]
            if missing:
                self._add_tree(missing)

    def stop(self) -> None:
        with self._lock:
            wds = list(self._dirs)
            self._dirs.clear()
        self.inotify.remove_watches(wds, self)

    def _forget(self, rel: str) -> None:
        """Drop the watches of a directory that moved away (the kernel keeps them)."""
        with self._lock:
            gone = [
                wd
                for wd, d in self._dirs.items()
                if d.kind == "tree" and (d.rel == rel or d.rel.startswith(rel + "/"))
            ]
            for wd in gone:
                del self._dirs[wd]
        self.inotify.remove_watches(gone, self)

    # -- events (inotify thread) --------------------------------------------------

    def on_event(self, event: InotifyEvent) -> None:
        with self._lock:
            d = self._dirs.get(event.wd)
        if d is None or not event.name:
            if d is not None and d.kind == "tree" and d.rel == "" and event.is_delete_self:
                self.on_root_gone()
            return
        self.handle(d, _change(event))

    def on_watch_deleted(self, wd: WatchDescriptor) -> None:
        with self._lock:
            self._dirs.pop(wd, None)


class InotifyWatcher(Watcher):
    """One inotify descriptor (and reader thread) for every source of the daemon."""

    backend = "inotify"

    def __init__(self, sink: Sink, *, max_watches: int = 0) -> None:
        super().__init__(sink)
        self._fd = InotifyFD()
        self._started = False
        self.used_at_start = 0
        if max_watches > 0:
            self.limit = max_watches
        else:
            self.limit = kernel_watch_limit()
            self.used_at_start = watches_in_use()

    def _source_watch(self, source: Source) -> SourceWatch:
        return InotifySourceWatch(self, source)

    def budget(self) -> int:
        """Watches this daemon may still add."""
        return max(0, self.limit - self.used_at_start - self.used)

    def start(self) -> None:
        if not self._started:
            self._fd.start()
            self._started = True

    def add_watch(self, path: str, cb: InotifySourceWatch) -> WatchDescriptor:
        return self._fd.add_callback(os.fsencode(path), MASK, cb, CallbackId(id(cb)))

    def remove_watches(self, wds: Iterable[WatchDescriptor], cb: InotifySourceWatch) -> None:
        with contextlib.suppress(OSError):
            self._fd.remove_callbacks([(wd, CallbackId(id(cb))) for wd in wds])

    def health(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "watches": self.used,
            "limit": self.limit,
            "in_use_at_start": self.used_at_start,
        }

    def stop(self) -> None:
        """Close the descriptor and join the reader thread."""
        self._fd.stop()
        if self._started:
            self._fd.join(timeout=5)
