"""Turn file events into change signals: paths of a working tree, or "HEAD moved".

One interface, three backends (``daemon.watcher``; ``watchers.make_watcher`` picks one):

- ``inotify`` (``watch_inotify.py``, the Linux default): one inotify descriptor and one
  watch per directory git does not ignore, counted against the kernel's budget first, so
  running short is a logged, visible ``degraded`` state with a periodic reconcile in its
  place (watchdog's recursive observer would silently watch only the first N directories);
- ``native`` (``watch_observer.py``, the default elsewhere): watchdog's ``Observer`` for the
  OS, recursive on the tree and the git dir: FSEvents on macOS, ReadDirectoryChangesW on
  Windows, kqueue on the BSDs (on Linux it is watchdog's inotify observer);
- ``polling`` (``watch_observer.py``): watchdog's polling observer, the last resort; its
  scans skip what git ignores and everything in the git dir but HEAD, refs and logs.

Every backend turns its events into the same ``Change`` and hands it to the same rules
(``SourceWatch.handle``), so the semantics are the backend's only in what it can see.
Facts the rules are built on (measured; see the project's FACTS.md):

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

The callbacks run on the backend's thread and only put signals into the writer's queue
(``Sink``), which never blocks on work in progress.
"""

from __future__ import annotations

import contextlib
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

import pygit2

from codechunkd import logs
from codechunkd.daemon.debounce import Level
from codechunkd.display import printable
from codechunkd.git.changes import Source, SourceKind, path_is_ignored

log = logs.get_logger("codechunkd.watcher")

SYSCTL = "fs.inotify.max_user_watches"
POLL_INTERVAL_S = 1.0
"""How often the polling backend scans (tests pass a shorter one)."""


class Sink(Protocol):
    def __call__(
        self,
        source: str,
        *,
        paths: Iterable[str] = (),
        level: Level = Level.PATHS,
        urgent: bool = False,
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class _Dir:
    kind: str
    """``tree`` (working tree), ``git`` (the source's git dir), ``common`` (the shared git
    dir of a linked worktree), ``refs`` (under ``refs/``) or ``logs``."""
    rel: str
    """Path relative to the working tree (``tree``) or to the git dir, ``/``-separated."""


@dataclass(frozen=True, slots=True)
class Change:
    """One event on an entry of a watched directory, as every backend reports it."""

    name: str
    is_dir: bool
    gone: bool = False
    """Deleted or moved away."""
    appeared: bool = False
    """Created or moved in."""
    written: bool = False
    """Content written: modified, closed after writing, or renamed into place."""
    final: bool = False
    """Written for good: closed after writing or renamed into place (not a partial write)."""


def _common_dir(git_dir: str) -> str:
    return git_dir.split("/worktrees/")[0] if "/worktrees/" in git_dir else git_dir


class SourceWatch(ABC):
    """The watches of one source; the rules that turn a backend's ``Change`` into signals."""

    backend = ""

    def __init__(self, owner: Watcher, source: Source) -> None:
        self.owner = owner
        self.source = source
        self.root = source.repo if source.kind is SourceKind.WORKTREE else None
        self.git_dir = source.git_dir.rstrip("/")
        self.common = _common_dir(self.git_dir)
        self._repo = pygit2.Repository(self.git_dir)  # our own handle, for ignore rules
        self._git_lock = threading.Lock()  # used from the event and the writer threads
        self._lock = threading.RLock()
        self.degraded: str | None = None
        self.events = 0
        self.dropped = 0
        self.overflows = 0
        self.failed = 0  # events whose handling raised (each answered by a full rehash)

    # -- what a backend provides ------------------------------------------------

    @property
    @abstractmethod
    def watches(self) -> int:
        """Watches (inotify) or scheduled observer paths this source holds."""

    @abstractmethod
    def start(self) -> None:
        """Watch the source (or say why only in part: ``degraded``)."""

    @abstractmethod
    def stop(self) -> None: ...

    def refresh(self) -> None:  # noqa: B027 - a hook; most backends need nothing
        """Catch up after lost events or new ignore rules (the writer calls it on a RESCAN)."""

    def _watch_new_tree(self, dirs: list[str]) -> list[str]:
        """Watch directories that appeared; returns those now watched."""
        return dirs

    def _watch_new_git_dir(self, d: _Dir, name: str) -> None:  # noqa: B027 - a hook; most backends need nothing
        """A directory appeared in a watched git dir (``refs/…`` or ``logs``)."""

    def _forget(self, rel: str) -> None:  # noqa: B027 - a hook; most backends need nothing
        """A tree directory went away."""

    # -- git's view of the tree -------------------------------------------------

    def _ignored(self, path: str) -> bool:
        with self._git_lock:
            return path_is_ignored(self._repo, path)

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

    def _files_in(self, dirs: Iterable[str]) -> list[str]:
        assert self.root is not None
        out: list[str] = []
        for rel in dirs:
            with contextlib.suppress(OSError):
                for e in os.scandir(os.path.join(self.root, rel)):
                    if not e.is_dir(follow_symlinks=False):
                        out.append(f"{rel}/{e.name}" if rel else e.name)
        return out

    # -- the rules (event thread) -------------------------------------------------

    def handle(self, d: _Dir, change: Change) -> None:
        """One change in a watched directory: a path signal, a HEAD signal, or nothing.

        An event whose handling raises is logged and counted (``failed``), and answered
        with an urgent full rehash: the backend's thread outlives it, and what the event
        would have said is found all the same."""
        self.events += 1
        try:
            if d.kind == "tree":
                self._on_tree_change(d.rel, change)
            else:
                self._on_git_change(d, change)
        except Exception:  # one event must not end the watching
            self.failed += 1
            log.exception(
                "watch_event_failed",
                source=self.source.id,
                dir=printable(d.rel),
                name=printable(change.name),
            )
            self._signal(level=Level.FULL, urgent=True)

    def _on_tree_change(self, rel: str, change: Change) -> None:
        name = change.name
        path = f"{rel}/{name}" if rel else name
        if change.is_dir:
            if rel == "" and name == ".git":
                return
            if change.gone:
                self._forget(path)
                self._signal(level=Level.RESCAN)
            elif change.appeared and not self._ignored_dir(path):
                with self._lock:
                    added = self._watch_new_tree(list(self._tree_dirs(path)))
                self._signal(paths=self._files_in(added))
            return
        if name == ".gitignore":
            self._signal(level=Level.RESCAN)
            return
        if self._ignored(path):
            self.dropped += 1
            return
        self._signal(paths=(path,))

    def _on_git_change(self, d: _Dir, change: Change) -> None:
        name = change.name
        if name.endswith(".lock"):
            return
        if change.is_dir:
            if change.appeared:
                self._watch_new_git_dir(d, name)
            return
        moved = False
        if d.kind == "refs":
            moved = True  # a ref written, renamed into place or deleted
        elif d.kind in ("git", "common"):
            moved = (name == "packed-refs" or (name == "HEAD" and d.kind == "git")) and change.final
        elif d.kind == "logs":
            moved = name == "HEAD" and change.written
        if moved:
            self._signal(level=Level.HEAD)

    def on_root_gone(self) -> None:
        self._signal(level=Level.RESCAN)

    def on_queue_overflow(self) -> None:
        """Events were lost (the backend says so): every file must be rehashed, now."""
        self.overflows += 1
        self._signal(level=Level.FULL, urgent=True)

    def _signal(
        self, *, paths: Iterable[str] = (), level: Level = Level.PATHS, urgent: bool = False
    ) -> None:
        self.owner.sink(self.source.id, paths=paths, level=level, urgent=urgent)

    def health(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "watches": self.watches,
            "degraded": self.degraded,
            "events": self.events,
            "dropped": self.dropped,
            "overflows": self.overflows,
            "failed": self.failed,
        }


class Watcher(ABC):
    """The watches of every source of the daemon, on one backend."""

    backend = ""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self._sources: dict[str, SourceWatch] = {}
        self._lock = threading.Lock()

    @abstractmethod
    def _source_watch(self, source: Source) -> SourceWatch: ...

    @abstractmethod
    def start(self) -> None:
        """Start delivering events (sources may be added before or after)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop and join the backend's threads."""

    @property
    def used(self) -> int:
        return sum(s.watches for s in self._sources.values())

    def add(self, source: Source) -> SourceWatch:
        with self._lock:
            old = self._sources.get(source.id)
        if old is not None:
            return old
        sw = self._source_watch(source)
        with self._lock:
            self._sources[source.id] = sw
        sw.start()
        log.info(
            "watching",
            repo=source.repo,
            backend=self.backend,
            watches=sw.watches,
            degraded=bool(sw.degraded),
        )
        return sw

    def remove(self, source_id: str) -> None:
        with self._lock:
            sw = self._sources.pop(source_id, None)
        if sw is not None:
            sw.stop()

    def get(self, source_id: str) -> SourceWatch | None:
        return self._sources.get(source_id)

    def health(self) -> dict[str, object]:
        return {"backend": self.backend, "watches": self.used}
