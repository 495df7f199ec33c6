"""The portable backends: watchdog's own observers (``native``) and its polling one (``polling``).

``native`` is ``watchdog.observers.Observer``, which watchdog picks per OS: FSEvents on
macOS, ReadDirectoryChangesW on Windows, kqueue on the BSDs (inotify on Linux).  Each
source schedules the working tree and its git dir recursively (a path inside one already
scheduled is not scheduled twice); events are mapped back to (directory, name) and handed
to the same rules as inotify's.  What these observers cannot do: count their watches
(kqueue needs a descriptor per file, FSEvents none) or say when events were lost, so a
source is ``degraded`` only when scheduling fails, and the periodic reconcile
(``daemon.reconcile_interval_s``) is what repairs a lost event.

``polling`` scans every ``poll_interval`` seconds and diffs snapshots.  Its scans go
through ``_listdir``, which leaves out what no event of ours could use: directories git
ignores, nested repositories, the git dir inside the tree, and in a git dir everything
but ``HEAD``, ``packed-refs``, ``refs/`` and ``logs/HEAD``.  A git rename of ``HEAD.lock``
over ``HEAD`` shows up there as ``HEAD`` deleted and created (a new inode).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.polling import PollingObserverVFS

from codechunkd import logs
from codechunkd.daemon.watcher import Change, Sink, SourceWatch, Watcher, _Dir
from codechunkd.git.changes import Source

log = logs.get_logger("codechunkd.watcher")

#: The entries of a git dir a polling scan keeps (``refs`` only where the refs live).
_GIT_ENTRIES = frozenset({"HEAD", "packed-refs", "refs", "logs"})
_COMMON_ENTRIES = frozenset({"packed-refs", "refs"})
#: Events that may change what a path holds; "attrib" is a change of mode alone (``chmod``:
#: a file made readable again is read at once, not at the next reconcile).
_WRITES = frozenset({"created", "modified", "closed", "attrib"})


class _Handler(FileSystemEventHandler):
    """The observer's handler for one source: every event goes to ``ObserverSourceWatch``."""

    def __init__(self, sw: ObserverSourceWatch) -> None:
        self.sw = sw

    def dispatch(self, event: FileSystemEvent) -> None:
        self.sw.on_event(event)


class ObserverSourceWatch(SourceWatch):
    """The scheduled paths of one source on a watchdog observer."""

    def __init__(self, owner: ObserverWatcher, source: Source) -> None:
        super().__init__(owner, source)
        self.observer = owner
        self.backend = owner.backend
        self.handler = _Handler(self)
        self._scheduled: list[ObservedWatch] = []
        # the OS's separators (git's paths use "/", watchdog's events os.sep)
        self._git = os.path.normpath(self.git_dir)
        self._common = os.path.normpath(self.common)
        self._root = os.path.normpath(self.root) if self.root is not None else None
        # longest first: a linked worktree's git dir lies inside the common one
        regions = [(self._git, "git")]
        if self._common != self._git:
            regions.append((self._common, "common"))
        if self._root is not None:
            regions.append((self._root, "tree"))
        self._regions = sorted(regions, key=lambda r: len(r[0]), reverse=True)
        self._ignored_dirs: dict[str, bool] = {}

    @property
    def watches(self) -> int:
        return len(self._scheduled)

    def _roots(self) -> list[str]:
        """Paths to schedule: with a ``listdir`` filter each region on its own (the filter
        keeps them apart); without one, no path inside another already scheduled."""
        paths = [base for base, _ in sorted(self._regions, key=lambda r: len(r[0]))]
        if self.observer.polling:
            return paths
        out: list[str] = []
        for p in paths:
            if not any(p == q or p.startswith(q + os.sep) for q in out):
                out.append(p)
        return out

    def start(self) -> None:
        for path in self._roots():
            try:
                watch = self.observer.schedule(self.handler, path)
            except OSError as exc:
                self.degraded = (
                    f"the {self.backend} watcher could not watch {path}: "
                    f"{exc.strerror or exc}; falling back to periodic reconcile"
                )
                log.warning(
                    "watch_failed",
                    repo=self.source.repo,
                    backend=self.backend,
                    path=path,
                    error=str(exc),
                    fallback="periodic_reconcile",
                )
                return
            self._scheduled.append(watch)

    def stop(self) -> None:
        for watch in self._scheduled:
            self.observer.unschedule(self.handler, watch)
        self._scheduled.clear()

    def refresh(self) -> None:
        self._ignored_dirs.clear()  # the ignore rules may have changed

    # -- polling scans ----------------------------------------------------------

    def keep(self, dirpath: str, entry: os.DirEntry[str]) -> bool:
        """Whether a polling scan of ``dirpath`` (in one of our regions) keeps ``entry``."""
        if dirpath == self._git:
            return entry.name in (_GIT_ENTRIES if self._common == self._git else {"HEAD", "logs"})
        if dirpath == self._common:
            return entry.name in _COMMON_ENTRIES
        located = self._locate(entry.path)
        if located is None:
            return False
        d, _ = located
        if d.kind == "logs":
            return entry.name == "HEAD"
        if d.kind != "tree" or not entry.is_dir(follow_symlinks=False):
            return True
        rel = f"{d.rel}/{entry.name}" if d.rel else entry.name
        if os.path.lexists(os.path.join(entry.path, ".git")):
            return False  # a nested repository or submodule
        ignored = self._ignored_dirs.get(rel)
        if ignored is None:
            ignored = self._ignored_dirs[rel] = self._ignored_dir(rel)
        return not ignored

    # -- events (observer thread) -------------------------------------------------

    def owns(self, path: str) -> bool:
        return any(path == base or path.startswith(base + os.sep) for base, _ in self._regions)

    def _locate(self, path: str) -> tuple[_Dir, str] | None:
        """The watched directory and entry name of an event's path (None: not ours)."""
        for base, region in self._regions:
            if not path.startswith(base + os.sep):
                continue
            parent, _, name = path[len(base) + 1 :].rpartition(os.sep)
            parent = parent.replace(os.sep, "/")
            if region == "tree":
                if parent.split("/", 1)[0] == ".git" or (parent == "" and name == ".git"):
                    return None
                return _Dir("tree", parent), name
            if parent == "" and region in ("git", "common"):
                return _Dir(region, ""), name
            if region == "git" and parent == "logs":
                return _Dir("logs", "logs"), name
            if (parent == "refs" or parent.startswith("refs/")) and (
                region == "common" or self._common == self._git
            ):
                return _Dir("refs", parent), name
            return None
        return None

    def on_event(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        src = os.fsdecode(event.src_path)
        if kind in ("deleted", "moved") and src == self._root:
            self.on_root_gone()
            return
        if kind == "moved":
            self._route(src, Change("", event.is_directory, gone=True))
            dest = os.fsdecode(event.dest_path)
            self._route(
                dest, Change("", event.is_directory, appeared=True, written=True, final=True)
            )
        elif kind == "deleted":
            self._route(src, Change("", event.is_directory, gone=True))
        elif kind in _WRITES:
            created = kind == "created"
            self._route(
                src, Change("", event.is_directory, appeared=created, written=True, final=True)
            )

    def _route(self, path: str, change: Change) -> None:
        located = self._locate(path)
        if located is None:
            return
        d, name = located
        if change.is_dir and not (change.gone or change.appeared):
            return  # a directory's own "modified": its entries have events of their own
        self.handle(
            d,
            Change(name, change.is_dir, change.gone, change.appeared, change.written, change.final),
        )


class ObserverWatcher(Watcher):
    """Every source on one watchdog observer (``native``) or one polling observer."""

    def __init__(self, sink: Sink, *, polling: bool, poll_interval: float) -> None:
        super().__init__(sink)
        self.polling = polling
        self.backend = "polling" if polling else "native"
        self.poll_interval = poll_interval
        self._observer: BaseObserver = (
            PollingObserverVFS(os.stat, self._listdir, polling_interval=poll_interval)
            if polling
            else Observer()
        )
        self._refs: dict[ObservedWatch, int] = {}
        self._started = False

    def _source_watch(self, source: Source) -> SourceWatch:
        return ObserverSourceWatch(self, source)

    def schedule(self, handler: _Handler, path: str) -> ObservedWatch:
        """Schedule ``path`` recursively for ``handler`` (a path two sources share is one watch)."""
        self.start()  # emitters start as they are scheduled: a failure is this source's
        with self._lock:
            watch = self._observer.schedule(handler, path, recursive=True)
            self._refs[watch] = self._refs.get(watch, 0) + 1
            return watch

    def unschedule(self, handler: _Handler, watch: ObservedWatch) -> None:
        with self._lock:
            left = self._refs.get(watch, 0) - 1
            if left > 0:
                self._refs[watch] = left
                self._observer.remove_handler_for_watch(handler, watch)
                return
            self._refs.pop(watch, None)
        with contextlib.suppress(KeyError):  # the emitter stopped on its own (root gone)
            self._observer.unschedule(watch)

    def _listdir(self, path: str | None) -> Iterator[os.DirEntry[str]]:
        """``os.scandir`` for the polling scans, less what no source of ours watches."""
        assert path is not None
        with os.scandir(path) as it:
            entries = list(it)
        for sw in list(self._sources.values()):
            if isinstance(sw, ObserverSourceWatch) and sw.owns(path):
                return iter([e for e in entries if sw.keep(path, e)])
        return iter(entries)

    def start(self) -> None:
        if not self._started:
            self._observer.start()
            self._started = True

    def stop(self) -> None:
        """Stop the observer, even one never started (watchdog's inotify observer starts its
        reader thread when it is made, and stops it in ``stop``)."""
        self._observer.stop()
        if self._started:
            self._observer.join(timeout=5)

    def health(self) -> dict[str, object]:
        out = super().health()
        if self.polling:
            out["poll_interval_s"] = self.poll_interval
        return out
