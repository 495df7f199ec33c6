"""Coalesce bursts of change signals into one change set per source.

A burst is handled once it has been quiet for ``quiet`` seconds, or at the
latest ``max_delay`` seconds after its first signal, so a stream of saves
never starves the index.  Everything a burst says about one source is merged
into one ``Pending``: paths are a set, and the stronger kinds of work absorb
the weaker (a HEAD move makes the per-path hashes unnecessary: the HEAD diff
plus ``git status`` covers them), so a checkout that touches 10,000 files is
one HEAD-level sync, not 10,000 jobs.

``Debouncer`` is pure bookkeeping on an injected clock (tests drive it with
numbers); ``ChangeQueue`` wraps it for threads: the watcher puts, the writer
blocks in ``get`` until a burst is due or a task arrives.  A put never waits
for work in progress.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

Clock = Callable[[], float]


class Level(IntEnum):
    """How much a sync must look at; a higher level covers the lower ones."""

    PATHS = 0
    """Hash only the paths named (working-tree edits)."""
    HEAD = 1
    """A HEAD or ref moved: when HEAD really moved, diff against the indexed commit plus
    ``git status``; the paths named so far are kept (a ref of another branch moving does
    not make them unnecessary)."""
    RECONCILE = 2
    """A ``git status``-based sync (periodic, start-up, or more paths than ``max_paths``)."""
    RESCAN = 3
    """Something the events cannot describe (a directory vanished, ``.gitignore`` changed):
    a reconcile, and the watches are refreshed."""
    FULL = 4
    """Events were lost (queue overflow) or an operator asked: every file is rehashed."""


@dataclass(slots=True)
class Pending:
    """What one source's burst asks for."""

    first_at: float
    """Clock time of the burst's first signal."""
    last_at: float
    """Clock time of the burst's latest signal."""
    level: Level = Level.PATHS
    paths: set[str] = field(default_factory=set)
    """Working-tree paths named by events (dropped from level RECONCILE up)."""
    urgent: bool = False
    """Due at once (a reconcile request, not a file event)."""

    def due_at(self, quiet: float, max_delay: float) -> float:
        if self.urgent:
            return self.first_at
        return min(self.last_at + quiet, self.first_at + max_delay)


class Debouncer:
    """Per-source bursts on an injected clock (no threads, no sleeping)."""

    def __init__(
        self,
        *,
        quiet: float,
        max_delay: float,
        max_paths: int,
        clock: Clock = time.monotonic,
    ) -> None:
        self.quiet = quiet
        self.max_delay = max(max_delay, quiet)
        self.max_paths = max_paths
        self.clock = clock
        self._pending: dict[str, Pending] = {}

    def add(
        self,
        source: str,
        *,
        paths: Iterable[str] = (),
        level: Level = Level.PATHS,
        urgent: bool = False,
        now: float | None = None,
    ) -> None:
        """Record a signal for ``source`` (paths matter up to level HEAD)."""
        now = self.clock() if now is None else now
        p = self._pending.get(source)
        if p is None:
            p = self._pending[source] = Pending(first_at=now, last_at=now)
        p.last_at = now
        p.urgent = p.urgent or urgent
        if level > p.level:
            p.level = level
        if p.level <= Level.HEAD:
            p.paths.update(paths)
            if len(p.paths) > self.max_paths:
                p.level = Level.RECONCILE
        if p.level >= Level.RECONCILE:
            p.paths.clear()

    def deadline(self) -> float | None:
        """When the earliest pending burst becomes due (None: nothing pending)."""
        if not self._pending:
            return None
        return min(p.due_at(self.quiet, self.max_delay) for p in self._pending.values())

    def take(self, now: float | None = None) -> dict[str, Pending]:
        """Remove and return every burst that is due at ``now``."""
        now = self.clock() if now is None else now
        due = {
            s: p for s, p in self._pending.items() if p.due_at(self.quiet, self.max_delay) <= now
        }
        for s in due:
            del self._pending[s]
        return due

    def due(self, now: float | None = None) -> bool:
        """Whether a burst is due at ``now`` (``take`` would return it)."""
        deadline = self.deadline()
        return deadline is not None and deadline <= (self.clock() if now is None else now)

    def drop(self, source: str) -> None:
        self._pending.pop(source, None)

    def peek(self, source: str) -> Pending | None:
        return self._pending.get(source)

    def __len__(self) -> int:
        return len(self._pending)


class Task(StrEnum):
    """Work for the writer that is not a source's changes (it alone writes the index)."""

    COMPACT = "compact"
    """Fold new rows into the indexes, compact, prune old versions."""
    WARMUP = "warmup"
    """Load the model after the first reconcile, so the first search does not wait."""
    RELOAD = "reload"
    """Apply settings and sources re-read on SIGHUP or ``codechunkd add``."""
    SUMMARIES = "summaries"
    """Write the summaries the scheduler fetched."""
    SOURCES = "sources"
    """Try again the sources that could not be opened (``sources.retry_unavailable``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Work:
    """What the writer does next: due bursts, then queued tasks."""

    changes: dict[str, Pending]
    tasks: tuple[Task, ...]


class ChangeQueue:
    """The thread-safe inbox of the writer: bursts from the watcher, tasks from the scheduler."""

    def __init__(self, debouncer: Debouncer) -> None:
        self._deb = debouncer
        self._tasks: deque[Task] = deque()
        self._cond = threading.Condition()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def put(
        self,
        source: str,
        *,
        paths: Iterable[str] = (),
        level: Level = Level.PATHS,
        urgent: bool = False,
    ) -> None:
        with self._cond:
            if self._closed:
                return
            self._deb.add(source, paths=paths, level=level, urgent=urgent)
            self._cond.notify()

    def submit(self, task: Task) -> None:
        """Queue a task for the writer (deduplicated while waiting)."""
        with self._cond:
            if self._closed or task in self._tasks:
                return
            self._tasks.append(task)
            self._cond.notify()

    def get(self, timeout: float | None = None) -> Work | None:
        """Block until a burst is due or a task waits; None when closed or on timeout."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._closed:
                due = self._deb.take()
                if due or self._tasks:
                    tasks = tuple(self._tasks)
                    self._tasks.clear()
                    return Work(changes=due, tasks=tasks)
                deadline = self._deb.deadline()
                wait = None if deadline is None else max(0.0, deadline - self._deb.clock())
                if end is not None:
                    left = end - time.monotonic()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)
            return None

    def close(self) -> None:
        """Stop intake and wake the writer (pending bursts are abandoned)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def drop(self, source: str) -> None:
        with self._cond:
            self._deb.drop(source)

    def configure(self, *, quiet: float, max_delay: float, max_paths: int) -> None:
        with self._cond:
            self._deb.quiet = quiet
            self._deb.max_delay = max(max_delay, quiet)
            self._deb.max_paths = max_paths
            self._cond.notify()

    def pending(self, source: str) -> tuple[int, Level | None, float | None]:
        """(paths waiting, level, clock time of the first signal) of a source."""
        with self._cond:
            p = self._deb.peek(source)
            if p is None:
                return 0, None, None
            return len(p.paths), p.level, p.first_at

    def paths(self, source: str) -> frozenset[str]:
        """The paths a source's waiting burst names."""
        with self._cond:
            p = self._deb.peek(source)
            return frozenset(p.paths) if p is not None else frozenset()

    def wanted(self) -> bool:
        """Whether the writer is wanted elsewhere: a burst is due, a reload waits, or intake
        is closed (a shutdown).  A long job of the writer (a first index's vector fill)
        asks between its steps, and stops to let the rest through."""
        with self._cond:
            return self._closed or Task.RELOAD in self._tasks or self._deb.due()

    def busy(self) -> bool:
        with self._cond:
            return bool(len(self._deb) or self._tasks)
