"""Turn inotify events into change signals: paths of a working tree, or "HEAD moved".

Built on watchdog's inotify layer (``InotifyFD``: one inotify descriptor, one
reader thread, a callback per watch) rather than its recursive observer,
because the observer watches every directory below the root, ignored trees
included, and says nothing when it runs out of watches (it silently watches
the first N directories).  Here each source adds one watch per directory git
does not ignore, counted against the budget first, so running short is a
logged, visible ``degraded`` state with a periodic reconcile in its place.

Facts this module is built on (measured; see the project's FACTS.md):

- git never modifies ``HEAD`` or a ref in place: it renames ``HEAD.lock`` over
  ``HEAD`` and ``refs/heads/x.lock`` over the ref, so *moved-to* events on
  ``HEAD``, ``refs/**`` and ``packed-refs`` are what count, plus
  ``logs/HEAD`` being written;
- a linked worktree's HEAD is ``<main>/.git/worktrees/<name>/HEAD``, its refs
  are the main repository's;
- editors save by renaming a temporary file over the target (a moved-to event,
  no modify);
- a path deleted and re-created (checkout) is simply a path: the sync reads
  what is on disk when the burst is handled.

The callbacks run on the inotify thread and only put signals into the
writer's queue (``Sink``), which never blocks on work in progress.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pygit2
import structlog
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

from codechunkd.daemon.debounce import Level
from codechunkd.git.changes import Source, SourceKind

log = structlog.get_logger("codechunkd.watcher")

MASK = Mask(
    IN.IN_CLOSE_WRITE
    | IN.IN_MODIFY
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
SYSCTL = "fs.inotify.max_user_watches"
_GONE = IN.IN_DELETE | IN.IN_MOVED_FROM
_APPEARED = IN.IN_CREATE | IN.IN_MOVED_TO
_WRITTEN = IN.IN_CLOSE_WRITE | IN.IN_MOVED_TO | IN.IN_MODIFY


class Sink(Protocol):
    def __call__(
        self,
        source: str,
        *,
        paths: Iterable[str] = (),
        level: Level = Level.PATHS,
        urgent: bool = False,
    ) -> None: ...


def kernel_watch_limit() -> int:
    try:
        return int(Path("/proc/sys/fs/inotify/max_user_watches").read_text())
    except (OSError, ValueError):
        return 8192


def watches_in_use() -> int:
    """inotify watches held by this user's processes (the ones /proc lets us read)."""
    uid = os.getuid()
    used = 0
    for pid in os.listdir("/proc"):
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


@dataclass(frozen=True, slots=True)
class _Dir:
    kind: str
    """``tree`` (working tree), ``git`` (the source's git dir), ``common`` (the shared git
    dir of a linked worktree), ``refs`` (under ``refs/``) or ``logs``."""
    rel: str
    """Path relative to the working tree (``tree``) or to the git dir."""


def _common_dir(git_dir: str) -> str:
    return git_dir.split("/worktrees/")[0] if "/worktrees/" in git_dir else git_dir


class SourceWatch:
    """The watches of one source (a watchdog ``WatchCallback``)."""

    def __init__(self, owner: Watcher, source: Source) -> None:
        self.owner = owner
        self.source = source
        self.root = source.repo if source.kind is SourceKind.WORKTREE else None
        self.git_dir = source.git_dir.rstrip("/")
        self.common = _common_dir(self.git_dir)
        self._repo = pygit2.Repository(self.git_dir)  # our own handle, for ignore rules
        self._git_lock = threading.Lock()  # used from the inotify and the writer threads
        self._dirs: dict[WatchDescriptor, _Dir] = {}
        self._lock = threading.RLock()
        self.degraded: str | None = None
        self.events = 0
        self.dropped = 0
        self.overflows = 0

    # -- setup ------------------------------------------------------------------

    @property
    def watches(self) -> int:
        return len(self._dirs)

    def _ignored(self, path: str) -> bool:
        try:
            with self._git_lock:
                return bool(self._repo.path_is_ignored(path))
        except pygit2.GitError:
            return False

    def _ignored_dir(self, rel: str) -> bool:
        return self._ignored(rel + "/")

    def _tree_dirs(self, rel: str = "") -> Iterator[str]:
        """Directories of the working tree below ``rel`` that git does not ignore."""
        assert self.root is not None
        stack = [rel]
        while stack:
            d = stack.pop()
            yield d
            try:
                entries = list(os.scandir(os.path.join(self.root, d)))
            except OSError:
                continue
            for e in entries:
                if not e.is_dir(follow_symlinks=False):
                    continue
                sub = f"{d}/{e.name}" if d else e.name
                if e.name == ".git" or os.path.lexists(os.path.join(e.path, ".git")):
                    continue  # the git dir, or a nested repository / submodule
                if self._ignored_dir(sub):
                    continue
                stack.append(sub)

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
        wd = self.owner.add_watch(path, self)
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
            budget = self.owner.budget()
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
                    self._degrade(None, self.owner.budget())
                    break
                raise
            added.append(rel)
        return added

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
        self.owner.remove_watches(wds, self)

    # -- events (inotify thread) --------------------------------------------------

    def on_event(self, event: InotifyEvent) -> None:
        with self._lock:
            d = self._dirs.get(event.wd)
        if d is None or not event.name:
            if d is not None and d.kind == "tree" and d.rel == "" and event.is_delete_self:
                self._signal(level=Level.RESCAN)
            return
        self.events += 1
        name = os.fsdecode(event.name)
        if d.kind == "tree":
            self._on_tree_event(d.rel, name, event)
        else:
            self._on_git_event(d, name, event)

    def _on_tree_event(self, rel: str, name: str, event: InotifyEvent) -> None:
        path = f"{rel}/{name}" if rel else name
        if event.is_directory:
            if rel == "" and name == ".git":
                return
            if event.mask & _GONE:
                self._forget(path)
                self._signal(level=Level.RESCAN)
            elif event.mask & _APPEARED and not self._ignored_dir(path):
                with self._lock:
                    added = self._add_tree(list(self._tree_dirs(path)))
                self._signal(paths=self._files_in(added))
            return
        if name == ".gitignore":
            self._signal(level=Level.RESCAN)
            return
        if self._ignored(path):
            self.dropped += 1
            return
        self._signal(paths=(path,))

    def _files_in(self, dirs: Iterable[str]) -> list[str]:
        assert self.root is not None
        out: list[str] = []
        for rel in dirs:
            with contextlib.suppress(OSError):
                for e in os.scandir(os.path.join(self.root, rel)):
                    if not e.is_dir(follow_symlinks=False):
                        out.append(f"{rel}/{e.name}" if rel else e.name)
        return out

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
        self.owner.remove_watches(gone, self)

    def _on_git_event(self, d: _Dir, name: str, event: InotifyEvent) -> None:
        if name.endswith(".lock"):
            return
        if event.is_directory:
            if d.kind == "refs" and event.mask & _APPEARED:
                with self._lock, contextlib.suppress(OSError):
                    sub = os.path.join(d.rel, name)
                    self._add(os.path.join(self.common, sub), _Dir("refs", sub))
            if d.kind == "git" and name == "logs" and event.mask & _APPEARED:
                with self._lock, contextlib.suppress(OSError):
                    self._add(os.path.join(self.git_dir, "logs"), _Dir("logs", "logs"))
            return
        moved = False
        if d.kind == "refs":
            moved = True  # a ref written, renamed into place or deleted
        elif d.kind in ("git", "common"):
            moved = (name == "packed-refs" or (name == "HEAD" and d.kind == "git")) and bool(
                event.mask & (IN.IN_MOVED_TO | IN.IN_CLOSE_WRITE)
            )
        elif d.kind == "logs":
            moved = name == "HEAD" and bool(event.mask & _WRITTEN)
        if moved:
            self._signal(level=Level.HEAD)

    def on_watch_deleted(self, wd: WatchDescriptor) -> None:
        with self._lock:
            self._dirs.pop(wd, None)

    def on_queue_overflow(self) -> None:
        self.overflows += 1
        self._signal(level=Level.FULL, urgent=True)

    def _signal(
        self, *, paths: Iterable[str] = (), level: Level = Level.PATHS, urgent: bool = False
    ) -> None:
        self.owner.sink(self.source.id, paths=paths, level=level, urgent=urgent)

    def health(self) -> dict[str, object]:
        return {
            "watches": self.watches,
            "degraded": self.degraded,
            "events": self.events,
            "dropped": self.dropped,
            "overflows": self.overflows,
        }


class Watcher:
    """One inotify descriptor (and reader thread) for every source of the daemon."""

    def __init__(self, sink: Sink, *, max_watches: int = 0) -> None:
        self.sink = sink
        self._fd = InotifyFD()
        self._started = False
        self._sources: dict[str, SourceWatch] = {}
        self._lock = threading.Lock()
        self.used_at_start = 0
        if max_watches > 0:
            self.limit = max_watches
        else:
            self.limit = kernel_watch_limit()
            self.used_at_start = watches_in_use()

    @property
    def used(self) -> int:
        return sum(s.watches for s in self._sources.values())

    def budget(self) -> int:
        """Watches this daemon may still add."""
        return max(0, self.limit - self.used_at_start - self.used)

    def start(self) -> None:
        if not self._started:
            self._fd.start()
            self._started = True

    def add(self, source: Source) -> SourceWatch:
        with self._lock:
            old = self._sources.get(source.id)
        if old is not None:
            return old
        sw = SourceWatch(self, source)
        with self._lock:
            self._sources[source.id] = sw
        sw.start()
        log.info("watching", repo=source.repo, watches=sw.watches, degraded=bool(sw.degraded))
        return sw

    def remove(self, source_id: str) -> None:
        with self._lock:
            sw = self._sources.pop(source_id, None)
        if sw is not None:
            sw.stop()

    def get(self, source_id: str) -> SourceWatch | None:
        return self._sources.get(source_id)

    def add_watch(self, path: str, cb: SourceWatch) -> WatchDescriptor:
        return self._fd.add_callback(os.fsencode(path), MASK, cb, CallbackId(id(cb)))

    def remove_watches(self, wds: Iterable[WatchDescriptor], cb: SourceWatch) -> None:
        with contextlib.suppress(OSError):
            self._fd.remove_callbacks([(wd, CallbackId(id(cb))) for wd in wds])

    def health(self) -> dict[str, object]:
        return {"watches": self.used, "limit": self.limit, "in_use_at_start": self.used_at_start}

    def stop(self) -> None:
        """Close the descriptor and join the reader thread."""
        self._fd.stop()
        if self._started:
            self._fd.join(timeout=5)
