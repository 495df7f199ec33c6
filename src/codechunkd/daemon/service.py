"""The daemon: startup → main loop → shutdown, around one writer thread.

The five stages, as the service drives them::

    trigger   Watcher (inotify) / Upkeep (timer) ──► ChangeQueue (debounce, coalesce)
    change    writer thread: Syncer.sync(git, paths=… | HEAD diff + status | full)
    chunks    └─ chunker, per changed file
    vectors   └─ embedding cache, then the (low-priority, idle-unloaded) model
    store     └─ IndexStore: one atomic commit per batch; state advances after it

Ready means serving: systemd hears ``READY=1`` as soon as the control socket
answers status and search, not after the first index; until every source has
been synced once, status says ``indexing`` with the sync's progress and search
answers from the rows written so far, marked ``partial``.

Threads: the inotify reader (puts signals, never waits on work), the writer
(the only thread that writes the index: syncs, compaction, reloads), the
control socket (status and searches, on its own read handle), APScheduler's
(posts requests to the writer), and the main thread, which only handles
signals, systemd notifications and retries.  Signal handlers set flags.

Shutdown (SIGTERM/SIGINT): stop intake, let the batch in flight finish for
``daemon.shutdown_timeout_s``, abandon it after that (the source's state was
marked pending before the first write, so the next start redoes it), release
the lock, exit 0.  A second SIGINT exits at once.  SIGHUP reloads settings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from types import FrameType
from typing import Any

import numpy as np
import structlog

from codechunkd import heap
from codechunkd.config.settings import Settings
from codechunkd.daemon.answer import ModelBusy, answer_search
from codechunkd.daemon.control import (
    ControlServer,
    SourceSpec,
    merge_sources,
    read_sources,
)
from codechunkd.daemon.debounce import ChangeQueue, Debouncer, Level, Pending, Task, Work
from codechunkd.daemon.jobs import Upkeep
from codechunkd.daemon.status import (
    DaemonSnapshot,
    SourceSnapshot,
    StatusSnapshot,
    document,
    status_line,
)
from codechunkd.daemon.systemd import Notifier
from codechunkd.daemon.watcher import SourceWatch, Watcher
from codechunkd.daemon.watchers import make_watcher
from codechunkd.embedding.embedder import Embedder, Vectors, make_embedder
from codechunkd.errors import CodechunkdError, ConfigError, StoreError
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.summarize import Summarizer, SummaryRun, open_summarizer
from codechunkd.pipeline.sync import Syncer, SyncProgress
from codechunkd.storage.cache import EmbeddingCache
from codechunkd.storage.coverage import table_counts
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.lease import LeaseLost, lease_check, writer_lock, writer_problem
from codechunkd.storage.store import IndexStore, read_state_file

log = structlog.get_logger("codechunkd.daemon")

Clock = Callable[[], float]


class LockedEmbedder:
    """One embedding call at a time, in slices, remembering when it was last used.

    The writer and the control socket's searches share one model (a fast
    tokenizer must not be used from two threads at once); slicing the writer's
    large calls lets a search in between wait for at most one slice: turns are
    taken in arrival order (a ticket lock; a plain lock lets the writer take it
    back before a waiting search wakes).

    A slice keeps every worker of the model busy: at least ``slice_size`` texts and
    two per worker (``parallelism``: onnx sessions, requests in flight), growing
    with the measured speed to what takes about ``slice_seconds``, up to one full
    batch per worker.  So a search waits about that long, and a model with many
    sessions is not starved by slices smaller than its batches.
    """

    def __init__(
        self,
        inner: Embedder,
        *,
        slice_size: int = 16,
        slice_seconds: float = 0.25,
        clock: Clock = time.monotonic,
        timer: Clock = time.perf_counter,
    ):
        self.inner = inner
        self.slice_size = slice_size
        self.slice_seconds = slice_seconds
        self.clock = clock
        self.timer = timer
        self.last_used = clock()
        self.loading = False
        """The writer is loading the model (a first run: export, calibration)."""
        self.loading_since: float | None = None
        """When the load began (``clock``), while ``loading``."""
        self.slices = 0
        """Slices (calls to the model) done so far."""
        self.texts_per_s = 0.0
        """Measured speed of the model in slices (a moving average; 0 before the first)."""
        self._cond = threading.Condition()
        self._next_ticket = 0
        self._serving = 0
        self._abandoned: set[int] = set()
        self._local = threading.local()

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def loaded(self) -> bool:
        return bool(getattr(self.inner, "loaded", True))

    @property
    def waited_slices(self) -> int:
        """Turns of other calls that this thread's last call waited for before it ran."""
        return int(getattr(self._local, "waited", 0))

    @contextlib.contextmanager
    def _turn(self, wait_s: float | None = None) -> Iterator[None]:
        """Hold the model; turns are served in the order they were asked for.  ``wait_s``:
        give the turn up after that long (``ModelBusy``): the model is loading, or the
        writer's slice is held (a remote server that does not answer)."""
        with self._cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            first = self._serving
            deadline = None if wait_s is None else self.timer() + wait_s
            try:
                while self._serving != ticket:
                    left = None if deadline is None else deadline - self.timer()
                    if left is not None and left <= 0:
                        raise ModelBusy(wait_s or 0.0)
                    self._cond.wait(left)
            except BaseException:
                self._abandoned.add(ticket)  # never served: the next in line must not wait
                raise
        self._local.waited = ticket - first
        try:
            yield
        finally:
            with self._cond:
                self._serving += 1
                while self._serving in self._abandoned:
                    self._abandoned.discard(self._serving)
                    self._serving += 1
                self._cond.notify_all()

    def slice_texts(self) -> int:
        """Texts in the next slice: every worker busy, about ``slice_seconds`` of work."""
        workers = max(1, int(getattr(self.inner, "parallelism", 1)))
        batch = max(1, int(getattr(self.inner, "batch_size", self.slice_size)))
        least = max(self.slice_size, 2 * workers)
        most = max(least, workers * batch)
        wanted = int(self.texts_per_s * self.slice_seconds)
        return min(most, max(least, wanted))

    def load(self) -> None:
        """Load the model now (the writer does, before its first embedding, to say so)."""
        load = getattr(self.inner, "load", None)
        if load is not None:
            self.loading, self.loading_since = True, self.clock()
            try:
                with self._turn():
                    load()
                    self.last_used = self.clock()
            finally:
                self.loading, self.loading_since = False, None
            heap.release_freed_memory()  # the model file's parse buffers, freed by now

    def embed_within(self, texts: Sequence[str], wait_s: float) -> Vectors:
        """A few texts (a query) in one turn, if the model is free within ``wait_s``; else
        ``ModelBusy`` (the search then answers from the full text)."""
        with self._turn(wait_s):
            out = self.inner.embed(texts)
            self.last_used = self.clock()
            return out

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return self.inner.embed(texts)
        parts = []
        done = 0
        cold = not self.loaded
        while done < len(texts):
            with self._turn():
                size = self.slice_texts()
                started = self.timer()
                parts.append(self.inner.embed(texts[done : done + size]))
                self._measured(min(size, len(texts) - done), self.timer() - started)
                self.last_used = self.clock()
                self.slices += 1
            done += size
        if cold and self.loaded:  # loaded by this call: give back what loading freed
            heap.release_freed_memory()
        return np.concatenate(parts).astype(np.float32, copy=False)

    def _measured(self, count: int, seconds: float) -> None:
        """Fold one slice's speed into ``texts_per_s`` (short slices, e.g. queries, skipped)."""
        if count < self.slice_size or seconds <= 0:
            return
        rate = count / seconds
        self.texts_per_s = rate if not self.texts_per_s else 0.7 * self.texts_per_s + 0.3 * rate

    def unload_if_idle(self, idle: float) -> bool:
        unload = getattr(self.inner, "unload", None)
        with self._turn():
            if unload is None or not self.loaded or self.clock() - self.last_used < idle:
                return False
            unload()
        gc.collect()  # the model's objects may sit in reference cycles: free them now
        heap.release_freed_memory()
        log.info("model_unloaded", idle_s=idle)
        return True


def _did_something(report: Mapping[str, Any]) -> bool:
    """A sync report (``SyncReport.as_dict``) that changed rows or files."""
    return any(report[k] for k in ("added", "changed", "deleted", "renamed", "chunks"))


@dataclasses.dataclass(slots=True)
class SourceRuntime:
    """What the daemon knows about one source (written by the writer, read by status)."""

    spec: SourceSpec
    git: GitSource
    watch: SourceWatch | None = None
    indexed: tuple[str | None, str] | None = None
    """(commit, branch) the index reflects, after the last successful sync."""
    synced: bool = False
    last_batch: dict[str, Any] | None = None
    last_batch_at: float | None = None
    errors: int = 0
    consecutive_failures: int = 0
    last_error: str | None = None
    busy_since: float | None = None
    """Clock time the running sync started (None: idle)."""
    progress: SyncProgress | None = None
    """The running sync's progress (None: idle)."""
    failing: str | None = None
    """Why the last sync failed; cleared when a reconcile succeeds."""
    unsaved: set[str] = dataclasses.field(default_factory=set)
    """Edited paths whose sync failed: they wait for the retry (counted as pending)."""
    retry_at: float | None = None

    @property
    def id(self) -> str:
        return self.git.source.id


@contextlib.contextmanager
def capture_signals(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """Install ``handler`` for SIGTERM, SIGINT and SIGHUP; restore the old ones after.

    SIGHUP (reload) is POSIX only: where the platform has none, only the stops are caught.
    """
    hup = getattr(signal, "SIGHUP", None)
    sigs = (signal.SIGTERM, signal.SIGINT, *([hup] if hup is not None else []))
    old = {s: signal.signal(s, handler) for s in sigs}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class Service:
    """``Service(settings, ...).run()`` is ``codechunkd run``."""

    def __init__(
        self,
        settings: Settings,
        *,
        specs: Iterable[SourceSpec] = (),
        load_settings: Callable[[], Settings] | None = None,
        notifier: Notifier | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.settings = settings
        self.cli_specs = list(specs)
        self._load_settings = load_settings
        self.notifier = notifier or Notifier()
        self.clock = clock
        self.paths = IndexPaths.of(settings)
        self.lock = writer_lock(self.paths, what="codechunkd run")
        self.sources: dict[str, SourceRuntime] = {}
        self.should_exit = False
        self.force_exit = False
        self.abandoned = False
        """Set by ``run`` when shutdown left a batch in flight (the process must end now)."""
        self.reload_requested = False
        self.serving = threading.Event()
        """Set once the control socket answers: systemd hears READY=1."""
        self.ready = threading.Event()
        """Set once every source has been synced (or keeps failing): caught up."""
        self._ready_sent = False
        self._caught_up_said = False
        self._wake = threading.Event()
        self.started_at = clock()
        self.started_wall = datetime.now(UTC)
        self._size: tuple[float, int | None] = (-1e9, None)
        self._next_settings: Settings | None = None
        self._batches = 0
        self._progress_at = clock()
        self.store: IndexStore | None = None
        self.reader: IndexStore | None = None
        self.cache: EmbeddingCache | None = None
        self.embedder: LockedEmbedder | None = None
        self.syncer: Syncer | None = None
        self.watcher: Watcher | None = None
        self.control: ControlServer | None = None
        self.writer: threading.Thread | None = None
        self.upkeep: Upkeep | None = None
        self.summarizer: Summarizer | None = None
        self.summaries_error: str | None = None
        """Why LLM summaries could not start (shown by ``status``)."""
        self._summary_run: SummaryRun | None = None
        self._stop = threading.Event()
        """Set at shutdown: ends a summary request in flight without waiting for it."""
        d = settings.daemon
        self.queue = ChangeQueue(
            Debouncer(
                quiet=d.debounce_ms / 1000,
                max_delay=d.max_delay_ms / 1000,
                max_paths=d.max_paths,
                clock=clock,
            )
        )

    # -- the script -------------------------------------------------------------

    def run(self) -> int:
        """Serve until a signal stops it; returns the exit status.

        It never ends the process itself: when the batch in flight was abandoned
        (``abandoned`` is then true) the writer thread may still be writing and still
        holds the lock, and the caller must end the process at once, unflushed
        (``codechunkd run`` does, with ``os._exit``); a test in-process just returns.
        """
        with capture_signals(self.handle_signal):
            self.lock.acquire()  # IndexLocked (exit 5) before anything else
            try:
                self.startup()
                self.main_loop()
            finally:
                self.abandoned = self.shutdown()
        if self.abandoned:  # the writer is inside a batch; its source's state says pending
            return 130 if self.force_exit else 0
        return LeaseLost.exit_code if self.lease_lost else 0

    @property
    def lease_lost(self) -> bool:
        """Another writer took this daemon's ``s3://`` lease over (found by a renewal, or
        by the check before a commit): it must stop writing, and exits 15."""
        return bool(getattr(self.lock, "lost", False))

    def handle_signal(self, sig: int, frame: FrameType | None) -> None:
        """Only flags (no logging, no locks but the wake-up event)."""
        if sig == signal.SIGHUP:
            self.reload_requested = True
        elif sig == signal.SIGINT and self.should_exit:
            self.force_exit = True
        else:
            self.should_exit = True
        self._wake.set()

    def startup(self) -> None:
        """Open the stages, watch every source, serve the socket, start writer and jobs."""
        d = self.settings.daemon
        if d.nice:
            with contextlib.suppress(OSError, AttributeError):  # no os.nice on Windows
                os.nice(d.nice)
        options = self.paths.storage_options
        self.store = IndexStore(
            self.paths.uri, state_file=self.paths.state_file, storage_options=options
        )
        self.reader = IndexStore(self.paths.uri, storage_options=options)
        self.embedder = LockedEmbedder(make_embedder(self.settings.embedding), clock=self.clock)
        self.cache = EmbeddingCache(
            self.paths.cache, max_entries=self.settings.embedding.cache_size
        )
        self.syncer = self._syncer(self.settings)
        self.summarizer = self._open_summarizer()
        self.watcher = make_watcher(self.queue.put, backend=d.watcher, max_watches=d.max_watches)
        for spec in self.specs():
            self.add_source(spec, strict=spec in self.cli_specs)
        self.watcher.start()
        self.control = ControlServer(
            self.paths.socket,
            {
                "status": lambda _req: self.status(),
                "search": self.search,
                "reload": self._request_reload,
                "ping": lambda _req: {"ok": True, "pid": os.getpid()},
                "unload": lambda _req: {"ok": self._unload_if_idle(0.0)},
            },
        )
        self.control.start()
        self.serving.set()
        self.writer = threading.Thread(target=self._writer_loop, name="writer", daemon=True)
        self.writer.start()
        self.upkeep = Upkeep()
        self._schedule(self.upkeep)
        self.upkeep.start()
        log.info(
            "daemon_started",
            pid=os.getpid(),
            index=self.paths.uri,
            sources=[str(rt.spec) for rt in self.sources.values()],
            socket=str(self.paths.socket),
        )

    def _syncer(self, settings: Settings) -> Syncer:
        """The writer's syncer; with an ``s3://`` lease it reads the lease back before each
        commit, so a daemon whose lease was taken over stops before its next write (``tick``
        sees ``lost``), not only at its next renewal."""
        assert self.store is not None and self.embedder is not None and self.cache is not None
        return Syncer(
            settings, self.store, self.embedder, self.cache, check_writer=lease_check(self.lock)
        )

    def main_loop(self) -> None:
        while not self.should_exit:
            self._wake.clear()  # before the tick: a wake-up during it is not lost
            self.tick()
            interval = self.notifier.watchdog_interval
            self._wake.wait(min(interval, 5.0) if interval else 5.0)

    def tick(self) -> None:
        """One turn of the main loop: reloads, readiness, retries, systemd."""
        if self.lease_lost:  # an s3:// lease another writer took over
            log.error("writer_lease_lost", index=self.paths.uri)
            self.should_exit = True
            return
        if self.reload_requested:
            self.reload_requested = False
            self.reload()
        if self.serving.is_set() and not self._ready_sent:
            self._ready_sent = True
            self.notifier.ready(self.status_line())
            log.info(
                "daemon_ready",
                seconds=round(self.clock() - self.started_at, 2),
                caught_up=self.ready.is_set(),
            )
        if self.ready.is_set() and not self._caught_up_said:
            self._caught_up_said = True
            log.info("daemon_caught_up", seconds=round(self.clock() - self.started_at, 2))
            if self.upkeep is not None:
                self.upkeep.run_soon("summaries")  # the backlog of the first reconcile
        now = self.clock()
        for rt in list(self.sources.values()):
            if rt.retry_at is not None and rt.retry_at <= now:
                rt.retry_at = None
                self.queue.put(rt.id, level=Level.RECONCILE, urgent=True)
        if self._ready_sent:
            self.notifier.status(self.status_line())
        if self.notifier.watchdog_interval and self.writer_healthy():
            self.notifier.ping()

    def shutdown(self) -> bool:
        """Stop intake, finish or abandon the batch in flight, release.  True: abandoned."""
        self.notifier.stopping()
        log.info("daemon_stopping")
        self._stop.set()
        if self.watcher is not None:
            self.watcher.stop()
        if self.upkeep is not None:
            self.upkeep.shutdown()
        self.queue.close()
        abandoned = False
        if self.writer is not None:
            deadline = time.monotonic() + self.settings.daemon.shutdown_timeout_s
            self._say_what_shutdown_waits_for()
            while self.writer.is_alive() and time.monotonic() < deadline:
                if self.force_exit:
                    break
                self.writer.join(0.1)
            if self.writer.is_alive():
                abandoned = True
                log.warning(
                    "batch_abandoned",
                    timeout_s=self.settings.daemon.shutdown_timeout_s,
                    forced=self.force_exit,
                )
        if self.control is not None:
            self.control.stop()
        if not abandoned:  # else the writer may still write: the lock goes with the process
            if self.syncer is not None:
                self.syncer.close()  # its chunking workers, if it started any
            if self.cache is not None:
                self.cache.close()
            if self.summarizer is not None:
                self.summarizer.cache.close()
            self.lock.release()
        log.info("daemon_stopped", abandoned=abandoned)
        return abandoned

    def _say_what_shutdown_waits_for(self) -> None:
        """Log the batch the shutdown waits for, how long, and that a second Ctrl-C ends it."""
        busy = [rt.git.source.repo for rt in list(self.sources.values()) if rt.busy_since]
        if busy and self.writer is not None and self.writer.is_alive():
            log.warning(
                "waiting_for_batch",
                repos=busy,
                timeout_s=self.settings.daemon.shutdown_timeout_s,
                hint="press Ctrl-C again to stop now; the batch is redone at the next start",
            )

    # -- sources ----------------------------------------------------------------

    def specs(self) -> list[SourceSpec]:
        configured = [SourceSpec.parse(s) for s in self.settings.daemon.sources]
        listed = read_sources(self.paths.meta / "sources.json")
        return merge_sources(self.cli_specs, configured, listed)

    def add_source(self, spec: SourceSpec, *, strict: bool = False) -> None:
        try:
            git = GitSource(spec.path, ref=spec.ref)
        except CodechunkdError as exc:
            if strict:
                raise
            log.error("source_unavailable", source=str(spec), error=str(exc))
            return
        if git.source.id in self.sources:
            return
        rt = SourceRuntime(spec=spec, git=git)
        state = self.store.state(git.source.id) if self.store else None
        if state is not None and state.pending is None:
            rt.indexed = (state.commit, state.branch)
        assert self.watcher is not None
        rt.watch = self.watcher.add(git.source)
        self.sources[rt.id] = rt
        self.queue.put(rt.id, level=Level.RECONCILE, urgent=True)

    def remove_source(self, source_id: str) -> None:
        rt = self.sources.pop(source_id, None)
        if rt is None:
            return
        self.queue.drop(source_id)
        if self.watcher is not None:
            self.watcher.remove(source_id)
        log.info("source_removed", repo=rt.git.source.repo)

    # -- the writer -------------------------------------------------------------

    def _writer_loop(self) -> None:
        while True:
            work = self.queue.get()
            if work is None:
                return
            try:
                self.step(work)
            except Exception:
                log.exception("writer_step_failed")

    def step(self, work: Work) -> None:
        """Run one unit of work: queued tasks, then every due burst."""
        for task in work.tasks:
            self._run_task(task)
        for source_id, pending in work.changes.items():
            if self.queue.closed:
                log.info("changes_abandoned", sources=len(work.changes))
                return
            rt = self.sources.get(source_id)
            if rt is not None:
                self.sync(rt, pending)
        if not self.ready.is_set() and all(
            rt.synced or rt.consecutive_failures for rt in self.sources.values()
        ):
            self.ready.set()
            self._wake.set()
            self.queue.submit(Task.WARMUP)

    def sync(self, rt: SourceRuntime, pending: Pending) -> None:
        assert self.syncer is not None
        level = pending.level
        kwargs: dict[str, Any] = {}
        if level is Level.PATHS:
            kwargs["paths"] = sorted(pending.paths)
        elif level is Level.HEAD:
            head = rt.git.head()
            if rt.indexed == (head.commit, head.branch):
                if not pending.paths:
                    return  # another ref moved (a fetch): nothing to do
                kwargs["paths"] = sorted(pending.paths)
        elif level is Level.FULL:
            kwargs["full"] = True
        if level >= Level.RESCAN and rt.watch is not None:
            rt.watch.refresh()
        started = self.clock()
        lag_ms = round((started - pending.first_at) * 1000)
        rt.busy_since = started
        self._progress_at = started
        structlog.contextvars.bind_contextvars(
            batch_id=uuid.uuid4().hex[:8], trigger=level.name.lower(), lag_ms=lag_ms
        )
        try:
            problem = writer_problem(self.lock)  # its index directory deleted: write nothing
            if problem:
                raise StoreError(problem)
            report = self.syncer.sync(
                rt.git, progress=functools.partial(self._progress, rt), **kwargs
            )
        except Exception as exc:  # noqa: BLE001 - logged, counted, retried with back-off
            rt.errors += 1
            rt.consecutive_failures += 1
            rt.last_error = str(exc) or type(exc).__name__
            rt.failing = rt.last_error
            rt.unsaved |= pending.paths
            backoff = min(300.0, 2.0 ** min(rt.consecutive_failures, 9))
            rt.retry_at = self.clock() + backoff
            log.error("sync_failed", repo=rt.git.source.repo, error=rt.last_error, retry_s=backoff)
            self._wake.set()
            return
        finally:
            rt.busy_since = None
            rt.progress = None
            structlog.contextvars.unbind_contextvars("batch_id", "trigger", "lag_ms")
        if level >= Level.RECONCILE:  # the whole source was looked at: nothing is owed
            rt.failing = None
            rt.unsaved.clear()
        else:
            rt.unsaved -= pending.paths
        rt.consecutive_failures = 0
        rt.retry_at = None
        rt.synced = True
        rt.indexed = (report.commit, report.branch)
        doc = report.as_dict()
        if rt.last_batch is not None and not _did_something(doc):
            return  # a reconcile that found nothing: the last batch stays the last real one
        rt.last_batch_at = self.clock()
        rt.last_batch = {
            "trigger": level.name.lower(),
            "lag_ms": lag_ms,
            "at": datetime.now(UTC).isoformat(),
            **{
                k: doc[k]
                for k in (
                    "added",
                    "changed",
                    "deleted",
                    "renamed",
                    "embedded",
                    "reused",
                    "seeded",
                    "seed_skipped",
                    "chunks",
                    "truncated",
                )
            },
            "seconds": doc["seconds"],
        }
        if report.chunks or report.deleted:
            self._batches += 1

    def _run_task(self, task: Task) -> None:
        assert self.store is not None and self.upkeep is not None
        if task is Task.COMPACT:
            error: BaseException | None = None
            try:
                assert self.syncer is not None
                self.syncer.upkeep(force=True)  # compaction, version pruning, index refresh
            except Exception as exc:  # noqa: BLE001 - counted in the job's stats
                error = exc
                log.error("compact_failed", error=str(exc))
            self.upkeep.record("compact", error)
        elif task is Task.WARMUP:
            assert self.embedder is not None
            try:
                self.embedder.embed(["warm up"])
            except CodechunkdError as exc:
                log.error("model_warmup_failed", error=str(exc))
        elif task is Task.RELOAD:
            self._apply_reload()
        elif task is Task.SUMMARIES:
            run, self._summary_run = self._summary_run, None
            if run is not None and self.summarizer is not None:
                try:
                    self.summarizer.finish(run)  # writes the summaries: the writer's half
                except CodechunkdError as exc:
                    log.error("summaries_write_failed", error=str(exc))

    # -- scheduled upkeep -------------------------------------------------------

    def _schedule(self, upkeep: Upkeep) -> None:
        d = self.settings.daemon
        upkeep.add("reconcile", d.reconcile_interval_s, self._reconcile_all)
        upkeep.add(
            "degraded_reconcile", d.degraded_reconcile_s, self._reconcile_degraded, recorded=True
        )
        upkeep.add(
            "compact", d.compact_interval_s, lambda: self.queue.submit(Task.COMPACT), recorded=True
        )
        if d.idle_unload_s > 0:
            upkeep.add("idle_unload", max(5.0, d.idle_unload_s / 4), self._unload_if_idle)
        if self.summarizer is not None and self.summarizer.enabled:
            upkeep.add("summaries", self.settings.summaries.interval_s, self._fetch_summaries)

    def _open_summarizer(self) -> Summarizer | None:
        assert self.store is not None
        try:
            return open_summarizer(self.settings, self.store, reader=self.reader, stop=self._stop)
        except ConfigError as exc:
            log.error("summaries_unavailable", error=str(exc))
            self.summaries_error = str(exc)
            return None

    def _fetch_summaries(self) -> None:
        """The scheduler's half of a summary run: requests into the cache, no table write."""
        if self.summarizer is None or self._summary_run is not None:
            return
        run = self.summarizer.fetch()
        if run.stopped_by != "disabled":
            self._summary_run = run
            self.queue.submit(Task.SUMMARIES)

    def _reconcile_all(self) -> None:
        for rt in list(self.sources.values()):
            self.queue.put(rt.id, level=Level.RECONCILE, urgent=True)

    def _reconcile_degraded(self) -> None:
        """Reconcile the degraded sources; a run is counted only when there was one."""
        degraded = [rt for rt in self.sources.values() if rt.watch and rt.watch.degraded]
        for rt in degraded:
            self.queue.put(rt.id, level=Level.RECONCILE, urgent=True)
        if degraded and self.upkeep is not None:
            self.upkeep.record("degraded_reconcile", None)

    def _unload_if_idle(self, idle: float | None = None) -> bool:
        if self.embedder is None:
            return False
        return self.embedder.unload_if_idle(
            self.settings.daemon.idle_unload_s if idle is None else idle
        )

    # -- reload -----------------------------------------------------------------

    def _request_reload(self, _req: Mapping[str, Any]) -> dict[str, bool]:
        self.reload_requested = True
        self._wake.set()
        return {"ok": True}

    def reload(self) -> None:
        """Re-read settings and the sources list (main thread); the writer applies them."""
        try:
            new = self._load_settings() if self._load_settings else self.settings
        except ConfigError as exc:
            log.error("reload_failed", error=str(exc))
            return
        old = self.settings
        if new.embedding != old.embedding or new.index != old.index:
            log.warning("reload_needs_restart", sections=["embedding", "index"])
            new = dataclasses.replace(new, embedding=old.embedding, index=old.index)
        self._next_settings = new
        self.queue.submit(Task.RELOAD)

    def _apply_reload(self) -> None:
        new = self._next_settings or self.settings
        self._next_settings = None
        assert self.store is not None and self.embedder is not None and self.cache is not None
        self.settings = new
        before = self.syncer.fingerprint if self.syncer is not None else None
        if self.syncer is not None:
            self.syncer.close()  # between syncs (this is the writer's task): no batch in flight
        self.syncer = self._syncer(new)
        if before is not None and self.syncer.fingerprint != before:
            # what is indexed changed (files.exclude, the size limit, chunking): apply it now,
            # not at the next periodic reconcile (newly excluded files must not stay searchable)
            self._reconcile_all()
        d = new.daemon
        self.queue.configure(
            quiet=d.debounce_ms / 1000, max_delay=d.max_delay_ms / 1000, max_paths=d.max_paths
        )
        if self.upkeep is not None:
            self.upkeep.reschedule("reconcile", d.reconcile_interval_s)
            self.upkeep.reschedule("degraded_reconcile", d.degraded_reconcile_s)
            self.upkeep.reschedule("compact", d.compact_interval_s)
        wanted = self.specs()
        have = {rt.spec: sid for sid, rt in self.sources.items()}
        for spec, sid in have.items():
            if spec not in wanted:
                self.remove_source(sid)
        for spec in wanted:
            if spec not in have:
                self.add_source(spec)
        log.info("reloaded", sources=[str(rt.spec) for rt in self.sources.values()])

    # -- status and search (control thread) --------------------------------------

    def _progress(self, rt: SourceRuntime, progress: SyncProgress) -> None:
        rt.progress = progress
        self._progress_at = self.clock()

    def stuck_s(self, rt: SourceRuntime, now: float) -> float:
        """Seconds the running sync of ``rt`` has made no progress (a table commit or an
        embedded slice); 0 when idle.  A long cold index is busy, not stalled."""
        if rt.busy_since is None:
            return 0.0
        last = max(self._progress_at, self.embedder.last_used if self.embedder else 0.0)
        return max(0.0, now - max(last, rt.busy_since))

    def model_loading_s(self) -> float | None:
        """Seconds the model has been loading (export, calibration), or None."""
        since = self.embedder.loading_since if self.embedder is not None else None
        return None if since is None else max(0.0, self.clock() - since)

    def writer_healthy(self) -> bool:
        if self.writer is None or not self.writer.is_alive():
            return False
        stall = self.settings.daemon.stall_after_s
        now = self.clock()
        return all(self.stuck_s(rt, now) < stall for rt in self.sources.values())

    def index_bytes(self) -> int | None:
        at, size = self._size
        now = self.clock()
        if now - at > 60 and self.store is not None:
            try:
                size = self.store.size_bytes()
            except OSError:
                size = None
            self._size = (now, size)
        return size

    def snapshot(self, *, read_git: bool = True) -> StatusSnapshot:
        """What the daemon knows now, as values (``status`` renders it).

        ``read_git=False`` (the systemd line, every few seconds) reads neither git nor
        ``state.json`` nor the summaries' backlog: memory only.
        """
        now = self.clock()
        stored = {}
        if read_git:
            doc = read_state_file(self.paths.state_file) or {}
            stored = {s.get("source"): s for s in doc.get("sources", [])}
        sources = tuple(
            self._source_snapshot(rt, stored.get(rt.id), now, read_git=read_git)
            for rt in list(self.sources.values())
        )
        summaries: dict[str, Any] = {"enabled": False, "backlog": None}
        if self.summarizer is not None and read_git:
            # counted now (one filtered count_rows: cheap, see operations.md): an edit shows
            summaries = self.summarizer.status(refresh=True)
        elif self.summarizer is None:
            summaries["reason"] = self.summaries_error or "not started"
        cache = self.cache.stats() if self.cache is not None else None
        from codechunkd import __version__

        return StatusSnapshot(
            daemon=DaemonSnapshot(
                pid=os.getpid(),
                version=__version__,
                started_at=self.started_wall.isoformat(),
                uptime_s=now - self.started_at,
                caught_up=self.ready.is_set(),
                writer_healthy=self.writer_healthy(),
                stall_after_s=self.settings.daemon.stall_after_s,
                model_loaded=bool(self.embedder and self.embedder.loaded),
                model_loading_s=self.model_loading_s(),
                cache={
                    "hits": cache.hits,
                    "misses": cache.misses,
                    "entries": cache.entries,
                    "hit_rate": round(cache.hit_rate, 4),
                }
                if cache is not None and read_git
                else None,
                watcher=self.watcher.health() if self.watcher else None,
                jobs=self.upkeep.as_dict() if self.upkeep else {},
                summaries=summaries,
                socket=str(self.paths.socket),
            ),
            index=self.paths.uri,
            index_bytes=self.index_bytes() if read_git else None,
            sources=sources,
        )

    def _source_snapshot(
        self, rt: SourceRuntime, record: Mapping[str, Any] | None, now: float, *, read_git: bool
    ) -> SourceSnapshot:
        src = rt.git.source
        commit, branch = rt.indexed or (None, None)
        record = record or {
            "source": src.id,
            "kind": str(src.kind),
            "repo": src.repo,
            "git_dir": src.git_dir,
            "ref": src.ref,
            "branch": branch,
            "commit": commit,
            "dirty": {},
            "pending": None,
            "files": 0,
            "chunks": 0,
            "updated_at": None,
        }
        table = table_counts(self.reader, src.id) if read_git else None
        head: str | None = None
        head_branch = "?"
        if read_git:
            try:
                now_head = GitSource(rt.spec.path, ref=rt.spec.ref).head()
                head, head_branch = now_head.commit, now_head.branch
            except CodechunkdError:
                pass
        queued, level, first = self.queue.pending(rt.id)
        paths = self.queue.paths(rt.id) | rt.unsaved
        last = (
            dict(rt.last_batch, ago_s=round(now - (rt.last_batch_at or now), 3))
            if rt.last_batch
            else None
        )
        return SourceSnapshot(
            record=record,
            head=head,
            head_branch=head_branch,
            head_read=read_git,
            live=True,
            synced=rt.synced,
            pending_paths=max(queued, len(paths)),
            pending_level=level.name.lower() if level is not None else None,
            waiting_s=now - first if first is not None else 0.0,
            busy_s=now - rt.busy_since if rt.busy_since is not None else 0.0,
            stuck_s=self.stuck_s(rt, now),
            progress=rt.progress.as_dict() if rt.progress is not None else None,
            last_batch=last,
            errors=rt.errors,
            consecutive_failures=rt.consecutive_failures,
            last_error=rt.last_error,
            failing=rt.failing,
            watcher=rt.watch.health() if rt.watch is not None else None,
            table=table,
        )

    def status(self) -> dict[str, Any]:
        doc = document(self.snapshot())
        problem = writer_problem(self.lock)  # e.g. the index directory deleted under us
        if problem:
            doc["daemon"].update(state="stalled", reason=problem)
        return doc

    def status_line(self) -> str:
        return status_line(self.snapshot(read_git=False))

    def partial(self, repo: str | None = None) -> dict[str, Any] | None:
        """How much of a first (or interrupted) index is written, while one is running.

        None when every source (of ``repo``) is whole: synced by this daemon, or left
        complete (not pending) by a previous run.
        """
        running = [
            rt
            for rt in list(self.sources.values())
            if not rt.synced and rt.indexed is None and (repo is None or rt.git.source.repo == repo)
        ]
        if not running:
            return None
        total = sum(rt.progress.files_total for rt in running if rt.progress is not None)
        counts = [table_counts(self.reader, rt.git.source.id) or {} for rt in running]
        return {  # what the table holds now, not what the sync has read or embedded
            "files_done": sum(c.get("files", 0) for c in counts),
            "files_total": total,
            "chunks": sum(c.get("chunks", 0) for c in counts),
            "sources": [rt.git.source.repo for rt in running],
        }

    def search(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a control-socket search (``SearchRequest``'s JSON) with the warm model;
        while the model loads (or when it cannot), at once from the full text, saying so."""
        assert self.embedder is not None and self.reader is not None
        waiting = self.embedder.loading or (not self.embedder.loaded and not self.ready.is_set())
        return answer_search(
            doc,
            self.reader,
            self.settings,
            self.embedder,
            text_only=self.model_note() if waiting else None,
            partial=self.partial,
        )

    def model_note(self) -> str:
        """Why a search now goes without its query vector."""
        loading = self.model_loading_s()
        if loading is not None:
            return f"the model is loading ({loading:.0f} s: export, calibration)"
        return "the first index is being written; the model loads after it"
