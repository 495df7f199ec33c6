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
the lock, exit 0.  A second SIGINT exits at once.  SIGHUP reloads settings.  The index
directory deleted under it: shut down the same way, keeping the lock beside the socket,
and start ``again`` in the same process on a new directory.

This module owns the service's life: its state (``Service.__init__``, the ``Daemon``
protocol of ``runtime.py``), start-up, the main loop (signals, readiness, retries,
systemd) and shutdown, which never ends the process itself (``codechunkd run`` does).
What each thread does lives beside it, as functions of that state:

    writer.py         the writer's units of work: tasks, syncs, each source's runtime
    sources.py        the sources served, added and removed; the two halves of a reload
    scheduling.py     the scheduled jobs (reconciles, compaction, idle unload, summaries)
    snapshot.py       the status snapshot, the writer's health, the systemd line
    serving.py        the control socket's searches and the partial-index bookkeeping
    embedder_lock.py  the one model the writer and the searches share, turn by turn

It must not sync, search or render itself: it starts the threads that do.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from codechunkd import heap, logs
from codechunkd.config.settings import Settings
from codechunkd.daemon import scheduling, serving, snapshot, sources, writer
from codechunkd.daemon.control import ControlServer, SourceSpec, write_sources
from codechunkd.daemon.debounce import ChangeQueue, Debouncer, Level, Task
from codechunkd.daemon.embedder_lock import Clock, LockedEmbedder
from codechunkd.daemon.jobs import Upkeep
from codechunkd.daemon.runtime import RerankTally, SourceRuntime
from codechunkd.daemon.status import StatusSnapshot
from codechunkd.daemon.systemd import Notifier
from codechunkd.daemon.watcher import Watcher
from codechunkd.daemon.watchers import make_watcher
from codechunkd.embedding.embedder import make_embedder
from codechunkd.errors import IndexLocked
from codechunkd.pipeline.summarize import Summarizer, SummaryRun
from codechunkd.pipeline.sync import Syncer
from codechunkd.storage.cache import EmbeddingCache
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.lease import LeaseLost, lease_check, writer_lock
from codechunkd.storage.lock import WriterLock
from codechunkd.storage.store import IndexStore

log = logs.get_logger("codechunkd.daemon")


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


def _change_queue(settings: Settings, clock: Clock) -> ChangeQueue:
    """The writer's queue: file events debounced as ``[daemon]`` says, and tasks."""
    d = settings.daemon
    return ChangeQueue(
        Debouncer(
            quiet=d.debounce_ms / 1000,
            max_delay=d.max_delay_ms / 1000,
            max_paths=d.max_paths,
            clock=clock,
        )
    )


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
        lock: WriterLock | None = None,
        patient: bool = False,
    ) -> None:
        self.settings = settings
        self.cli_specs = list(specs)
        self.load_settings = load_settings
        self.notifier = notifier or Notifier()
        self.clock = clock
        self.paths = IndexPaths.of(settings)
        self.lock = lock or writer_lock(self.paths, what="codechunkd run")
        self.sources: dict[str, SourceRuntime] = {}
        self.unavailable: dict[SourceSpec, str] = {}
        """Sources that could not be opened, and why: tried again (``_retry_unavailable``)."""
        self._unavailable_tries = 0
        self._unavailable_at = 0.0
        self.listed: list[SourceSpec] = []
        """``sources.json``'s sources as last read (``sources.specs``), carried to a new
        index directory when this one is deleted (``again``)."""
        self.index_lost: str | None = None
        """Why this daemon stops to start ``again``: its index directory was deleted."""
        self._retake = lock is not None
        """This service carries on its predecessor's lock (``again``)."""
        self.patient = patient
        """Wait for a writer lock another holds (this image let go of it: ``recycle``)."""
        self.recycle: str | None = None
        """Why this daemon stops for ``codechunkd run`` to exec itself (``_check_memory``)."""
        self.memory_baseline: float | None = None
        self.should_exit = False
        self.force_exit = False
        self.signalled = False
        """SIGTERM or SIGINT came: stop, whatever else happened."""
        self.abandoned = False
        """Set by ``run`` when shutdown left a batch in flight (the process must end now)."""
        self.reload_requested = False
        self.serving = threading.Event()
        """Set once the control socket answers: systemd hears READY=1."""
        self.ready = threading.Event()
        """Set once every source has been synced (or keeps failing): caught up."""
        self._ready_sent = False
        self._caught_up_said = False
        self.wake = threading.Event()
        """Wakes the main loop early (a signal, a reload asked for, readiness, a failure)."""
        self.started_at = clock()
        self.started_wall = datetime.now(UTC)
        self.index_size: tuple[float, int | None] = (-1e9, None)
        """(clock time, bytes) of the last read of the index's size (``snapshot.index_bytes``)."""
        self.next_settings: Settings | None = None
        """Settings ``reload`` read, for the writer to apply (``sources.apply_reload``)."""
        self.batches = 0
        """Batches that wrote or deleted chunks (counted by the writer)."""
        self.progress_at = clock()
        """When the running sync last made progress (``snapshot.stuck_s``)."""
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
        self.summary_run: SummaryRun | None = None
        """A summary run fetched by the scheduler, for the writer to write."""
        self.stop_flag = threading.Event()
        """Set at shutdown: ends a summary request in flight without waiting for it."""
        self.reranks = RerankTally()
        self.queue = _change_queue(settings, clock)

    # -- the script -------------------------------------------------------------

    def run(self) -> int:
        """Serve until a signal stops it; returns the exit status.

        It never ends the process itself: when the batch in flight was abandoned
        (``abandoned`` is then true) the writer thread may still be writing and still
        holds the lock, and the caller must end the process at once, unflushed
        (``codechunkd run`` does, with ``os._exit``); a test in-process just returns.
        """
        with capture_signals(self.handle_signal):
            if self._retake:
                assert isinstance(self.lock, WriterLock)
                self.lock.retake_index()
            else:
                self._acquire()  # IndexLocked (exit 5) before anything else
            try:
                if self.listed and not (self.paths.meta / "sources.json").exists():
                    write_sources(self.paths.meta / "sources.json", self.listed)
                self.startup()
                self.main_loop()
            finally:
                self.abandoned = self.shutdown()
        if self.abandoned:  # the writer is inside a batch; its source's state says pending
            if self.force_exit:
                return 130
            lost = (self.index_lost or self.recycle) is not None and not self.signalled
            if lost:  # no start again in this process: the service manager's, on exit 15
                why = "index_directory_removed" if self.index_lost else "daemon_recycling"
                log.error(f"{why}_exiting", exit=LeaseLost.exit_code)
            return LeaseLost.exit_code if lost else 0
        return LeaseLost.exit_code if self.lease_lost else 0

    def _acquire(self) -> None:
        """Take the writer lock; a ``patient`` daemon waits while another writer has it."""
        while True:
            try:
                self.lock.acquire()
                return
            except IndexLocked as exc:
                if not self.patient or self.should_exit:
                    raise
                log.warning("waiting_for_writer_lock", holder=exc.pid, index=exc.path)
                self.wake.wait(1.0)
                self.wake.clear()

    @property
    def restart(self) -> bool:
        """The index directory was deleted under this daemon, and nothing asked it to stop:
        ``codechunkd run`` starts ``again`` on a new one."""
        return self.index_lost is not None and not self.signalled and not self.abandoned

    def again(self) -> Service:
        """The daemon after this one, on a new index directory (``restart``): the same
        settings, the same sources (``sources.json``'s written again), this one's lock
        beside the socket kept, so no other writer came in between."""
        assert isinstance(self.lock, WriterLock)  # only a directory's lock sees it deleted
        nxt = Service(
            self.settings,
            specs=self.cli_specs,
            load_settings=self.load_settings,
            notifier=self.notifier,
            clock=self.clock,
            lock=self.lock,
        )
        nxt.listed = list(self.listed)
        return nxt

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
            self.should_exit = self.signalled = True
        self.wake.set()

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
        self.syncer = self.make_syncer(self.settings)
        self.summarizer = scheduling.open_summaries(self)
        self.watcher = make_watcher(self.queue.put, backend=d.watcher, max_watches=d.max_watches)
        for spec in self.specs():
            sources.add_source(self, spec, strict=spec in self.cli_specs and not self._retake)
        self.watcher.start()
        self.control = ControlServer(
            self.paths.socket,
            {
                "status": lambda _req: self.status(),
                "search": self.search,
                "reload": functools.partial(sources.request_reload, self),
                "ping": lambda _req: {"ok": True, "pid": os.getpid()},
                "unload": lambda _req: {"ok": scheduling.unload_if_idle(self, 0.0)},
                "recycle": lambda _req: {"ok": self.start_again("asked to")},
            },
        )
        self.control.start()
        self.serving.set()
        self.writer = threading.Thread(
            target=writer.writer_loop, args=(self,), name="writer", daemon=True
        )
        self.writer.start()
        self.upkeep = Upkeep()
        scheduling.schedule(self, self.upkeep)
        self.upkeep.start()
        log.info(
            "daemon_started",
            pid=os.getpid(),
            index=self.paths.uri,
            sources=[str(rt.spec) for rt in self.sources.values()],
            socket=str(self.paths.socket),
        )

    def make_syncer(self, settings: Settings) -> Syncer:
        """The writer's syncer; with an ``s3://`` lease it reads the lease back before each
        commit, so a daemon whose lease was taken over stops before its next write (``tick``
        sees ``lost``), not only at its next renewal."""
        assert self.store is not None and self.embedder is not None and self.cache is not None
        return Syncer(
            settings, self.store, self.embedder, self.cache, check_writer=lease_check(self.lock)
        )

    def main_loop(self) -> None:
        while not self.should_exit:
            self.wake.clear()  # before the tick: a wake-up during it is not lost
            self.tick()
            interval = self.notifier.watchdog_interval
            self.wake.wait(min(interval, 5.0) if interval else 5.0)

    def tick(self) -> None:
        """One turn of the main loop: reloads, readiness, retries, systemd."""
        if self.lease_lost:  # an s3:// lease another writer took over
            log.error("writer_lease_lost", index=self.paths.uri)
            self.should_exit = True
            return
        lost = self.lock.problem() if isinstance(self.lock, WriterLock) else None
        if lost and not self.should_exit:  # rm -rf of the index: index it again, anew
            log.error("index_directory_removed", index=self.paths.uri, error=lost)
            self.index_lost = lost
            self.should_exit = True
            return
        if self.reload_requested:
            self.reload_requested = False
            sources.reload(self)
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
        self._retry_unavailable(now)
        for rt in list(self.sources.values()):
            if rt.retry_at is not None and rt.retry_at <= now:
                rt.retry_at = None
                self.queue.put(rt.id, level=Level.RECONCILE, urgent=True)
        self._check_memory()
        if self._ready_sent:
            self.notifier.status(self.status_line())
        if self.notifier.watchdog_interval and snapshot.writer_healthy(self):
            self.notifier.ping()

    def _check_memory(self) -> None:
        """Idle, with its memory grown past ``daemon.recycle_growth_mb`` over what it was
        when first idle: start again in a new process image (``recycle``). Lance keeps some
        of what each commit allocated, which only a new process gives back
        (docs/operations.md, Measured)."""
        limit = self.settings.daemon.recycle_growth_mb
        if limit <= 0 or not self.ready.is_set() or self.queue.busy():
            return
        if any(rt.busy_since is not None for rt in list(self.sources.values())):
            return
        now = heap.resident_mib()
        base = self.memory_baseline
        if now is None or (base is not None and now - base <= limit):
            return
        heap.release_freed_memory()  # what glibc kept but could give back, first
        now = heap.resident_mib() or now
        if base is None:
            self.memory_baseline = now
        elif now - base > limit:
            self.start_again(f"grown from {base:.0f} to {now:.0f} MiB")

    def start_again(self, why: str) -> bool:
        """Stop, for ``codechunkd run`` to exec itself (``recycle``)."""
        log.warning("daemon_recycling", why=why)
        self.recycle = why
        self.should_exit = True
        self.wake.set()
        return True

    def _retry_unavailable(self, now: float) -> None:
        """Have the writer try the sources that could not be opened again, with back-off
        (2 s, doubling, at most 5 minutes) while any is left."""
        if not self.unavailable:
            self._unavailable_tries = 0
            return
        if now < self._unavailable_at:
            return
        if self._unavailable_tries:  # not at once: add_source has just tried
            self.queue.submit(Task.SOURCES)
        self._unavailable_tries += 1
        self._unavailable_at = now + min(300.0, 2.0 ** min(self._unavailable_tries, 9))

    def shutdown(self) -> bool:
        """Stop intake, finish or abandon the batch in flight, release.  True: abandoned."""
        again = self.restart or (self.recycle is not None and not self.signalled)
        if self.restart:
            self.notifier.reloading()  # systemd: the same process, ready again soon
        elif again:
            self.notifier.reloading("to give its memory back")
        else:
            self.notifier.stopping()
        log.info("daemon_stopping", again=again)
        self.stop_flag.set()
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
            if self.restart:
                assert isinstance(self.lock, WriterLock)
                self.lock.release_index()  # the lock beside the socket stays, for ``again``
            else:
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

    # -- what the control socket and the command line ask -------------------------

    def specs(self) -> list[SourceSpec]:
        """The sources to serve (``sources.specs``)."""
        return sources.specs(self)

    def snapshot(self, *, read_git: bool = True) -> StatusSnapshot:
        """What the daemon knows now, as values (``snapshot.snapshot``)."""
        return snapshot.snapshot(self, read_git=read_git)

    def status(self) -> dict[str, Any]:
        """The control socket's ``status`` (``snapshot.status``)."""
        return snapshot.status(self)

    def status_line(self) -> str:
        """The systemd status line (``snapshot.status_line``)."""
        return snapshot.status_line(self)

    def search(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """The control socket's ``search`` (``serving.search``)."""
        return serving.search(self, doc)
