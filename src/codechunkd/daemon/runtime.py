"""What the running daemon holds: one ``SourceRuntime`` per source, and ``Daemon``.

``Daemon`` is the protocol of the service's state that its parts share: the writer
(``writer.py``), the sources and reloads (``sources.py``), the scheduled jobs
(``scheduling.py``), the status snapshot (``snapshot.py``) and the searches
(``serving.py``) are functions of it, and ``Service`` (``service.py``) is the one class
that has it.  Each part's module says which of it that part writes.  This module holds
values and types only: it must not do any work, and imports no other part.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from codechunkd.config.settings import Settings
from codechunkd.daemon.control import SourceSpec
from codechunkd.daemon.debounce import ChangeQueue
from codechunkd.daemon.embedder_lock import Clock, LockedEmbedder
from codechunkd.daemon.jobs import Upkeep
from codechunkd.daemon.watcher import SourceWatch, Watcher
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.summarize import Summarizer, SummaryRun
from codechunkd.pipeline.sync import Syncer, SyncProgress
from codechunkd.storage.cache import EmbeddingCache
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.lease import WriterGuard
from codechunkd.storage.store import IndexStore


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
    missing: bool = False
    """The repository was gone at the last sync (``writer.present``)."""

    @property
    def id(self) -> str:
        return self.git.source.id


@dataclasses.dataclass(slots=True)
class RerankTally:
    """The searches the reranking server failed since start (``serving.py`` counts them
    under ``lock``, from the control socket's threads; ``status`` reads them)."""

    failed: int = 0
    last_error: str | None = None
    last_failed_at: float | None = None
    """Clock time of the last failure."""
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


class Daemon(Protocol):
    """The service's shared state (``Service.__init__`` sets each value).

    Threads: the writer writes the sources (added and removed by a reload, and their
    runtimes), ``settings`` and ``syncer`` (a reload), ``progress_at``, ``batches`` and
    ``ready``; the main thread ``next_settings`` and a runtime's ``retry_at`` (a retry
    due); the main thread and the control socket's ``reload`` ``reload_requested``; the
    scheduler ``summary_run`` (the writer takes it); status and searches only read, but
    for ``index_size`` (status's cache of the index's size) and ``reranks`` (searches
    count the reranker's failures).
    """

    settings: Settings
    cli_specs: list[SourceSpec]
    listed: list[SourceSpec]
    load_settings: Callable[[], Settings] | None
    clock: Clock
    paths: IndexPaths
    lock: WriterGuard
    sources: dict[str, SourceRuntime]
    unavailable: dict[SourceSpec, str]
    reload_requested: bool
    ready: threading.Event
    wake: threading.Event
    started_at: float
    started_wall: datetime
    index_size: tuple[float, int | None]
    next_settings: Settings | None
    batches: int
    progress_at: float
    store: IndexStore | None
    reader: IndexStore | None
    cache: EmbeddingCache | None
    embedder: LockedEmbedder | None
    syncer: Syncer | None
    watcher: Watcher | None
    writer: threading.Thread | None
    upkeep: Upkeep | None
    summarizer: Summarizer | None
    summaries_error: str | None
    summary_run: SummaryRun | None
    stop_flag: threading.Event
    queue: ChangeQueue
    reranks: RerankTally

    def make_syncer(self, settings: Settings) -> Syncer:
        """The writer's syncer for ``settings`` (at start-up and at each reload)."""
        ...
