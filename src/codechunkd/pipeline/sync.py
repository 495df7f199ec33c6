"""Bring one source's rows up to date: change set → chunks → vectors → store.

``Syncer.sync`` is the whole pipeline for one source, used by ``codechunkd
index`` and by the daemon.  It is idempotent and crash-safe: the source's
state is marked *pending* before the first write and advanced only after the
last, so an interrupted run leaves a mark that makes the next one reconcile
every file against the manifest.

This module owns the order of the steps and the marks between them: the pending
state, the crash points (``sync.pending``, ``sync.applied``, ``sync.state_written``,
``sync.done``), the choice of writing text first and the fill after it
(``pipeline/fill.py``), with the state kept pending until the fill ends.  The steps
live beside it and must not write the state: the plan (``pipeline/plan.py``), the
state records (``pipeline/state.py``), the batches read, embedded and written
(``pipeline/reading.py``, ``pipeline/vectors.py``, ``pipeline/batches.py``; the Ray
engine's in ``pipeline/distributed.py``), the table's upkeep (``pipeline/upkeep.py``)
and the report (``pipeline/report.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from codechunkd import logs
from codechunkd.chunking.tokens import counter_for
from codechunkd.config.settings import Settings
from codechunkd.embedding.embedder import Embedder
from codechunkd.git.changes import ChangeSet, FileVersion, GitSource, Matcher
from codechunkd.pipeline.batches import FIRST_BATCH_FILES, BatchWriter
from codechunkd.pipeline.fill import FillReport, VectorFill
from codechunkd.pipeline.order import Rank, ranker
from codechunkd.pipeline.order import order_rank as order_rank  # re-exported
from codechunkd.pipeline.plan import change_set, fingerprint, in_order, plan, stale
from codechunkd.pipeline.progress import WRITING_TEXT, _Meter
from codechunkd.pipeline.progress import Progress as Progress  # re-exported
from codechunkd.pipeline.progress import SyncProgress as SyncProgress  # re-exported
from codechunkd.pipeline.reading import BatchReader
from codechunkd.pipeline.report import SyncReport
from codechunkd.pipeline.state import done_state, pending_state, state_moved
from codechunkd.pipeline.upkeep import build_vector_index_if_due, remove_interrupted_writes, upkeep
from codechunkd.pipeline.vectors import Vectors
from codechunkd.pipeline.workers import ChunkPool, chunk_workers
from codechunkd.storage.cache import EmbeddingCache, SummaryCache
from codechunkd.storage.coverage import coverage
from codechunkd.storage.crashpoints import crashpoint
from codechunkd.storage.rows import IndexedFile
from codechunkd.storage.store import IndexStore, SourceState

log = logs.get_logger("codechunkd.sync")


class Syncer:
    """The pipeline, configured once; ``sync`` runs it for one source."""

    def __init__(
        self,
        settings: Settings,
        store: IndexStore,
        embedder: Embedder,
        cache: EmbeddingCache,
        summaries: SummaryCache | None = None,
        *,
        check_writer: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.check_writer = check_writer
        """Raises when this process may no longer write the index (an ``s3://`` lease taken
        over: ``Lease.check``); called before each batch commit and state write."""
        self.store = store
        self.embedder = embedder
        self.cache = cache
        # LLM summaries already made for this content, model and prompt (see pipeline/summarize.py)
        if summaries is None and settings.summaries.url and settings.summaries.model:
            summaries = SummaryCache(cache.path)
        self.summaries = summaries
        self.matcher = Matcher(settings.files.include, settings.files.exclude)
        self.count_tokens = counter_for(settings.embedding.model)
        self.fingerprint = fingerprint(settings, embedder.model_id)
        self._hash_index = False
        self._unfilled: set[str] = set()
        """Sources that may have rows without a vector (``pipeline/fill.py``)."""
        self._looked: set[str] = set()
        """Sources whose table this process has looked at for rows without a vector."""
        self._last_total = 0
        self._fill_ranks: dict[str, Rank] = {}
        """The order of each source's last text-first change (``pipeline/order.py``): its
        fill's order, kept while the fill pauses for other work."""
        self._fill_marked: set[str] = set()
        """Sources whose ``pending`` mark this process set for their fill alone, every file
        written: their next sync need not look at every file (a mark found at start, which
        a crash may have left mid-write, does)."""
        workers = chunk_workers(settings)
        self.chunk_pool = ChunkPool(workers, settings) if workers > 1 else None
        """Worker processes that chunk a multi-batch change (``index.chunk_workers``)."""
        self.reader = BatchReader(settings, self.count_tokens, self.chunk_pool)
        self.vectors = Vectors(settings, embedder, cache, summaries)
        self.batches = BatchWriter(
            settings, store, self.reader, self.vectors, still_writer=self._still_writer
        )

    @property
    def seed_problem(self) -> str | None:
        """Why the seed is not used now (None: it is, or none is set)."""
        return self.vectors.seed_problem

    def close(self) -> None:
        """End the chunking worker processes, if any were started (idempotent)."""
        if self.chunk_pool is not None:
            self.chunk_pool.close()

    # -- the pipeline ---------------------------------------------------------

    def sync(
        self,
        git: GitSource,
        *,
        paths: Iterable[str] | None = None,
        full: bool = False,
        progress: Progress | None = None,
        yield_to: Callable[[], bool] | None = None,
    ) -> SyncReport:
        """Make the index reflect the source now.  ``paths``: only these changed (file events).
        ``yield_to``: asked during a long vector fill; when it says other work waits, the
        fill stops there and the next sync of the source takes it up again."""
        started = time.monotonic()
        source = git.source
        self.store.ensure_writable(self.embedder.model_id, self.embedder.dimension)
        if not self._hash_index:  # so that this index can seed others
            self.store.ensure_embed_hash_index()
            self._hash_index = True
        state = self.store.state(source.id)
        stale_langs = stale(state.fingerprint, self.fingerprint) if state else frozenset()
        # a pending mark this process left for a fill alone: every file is written
        interrupted = state is not None and state.pending is not None
        interrupted = interrupted and source.id not in self._fill_marked
        full = full or state is None or interrupted or bool(stale_langs)
        if interrupted:
            self.remove_interrupted_writes()
        changes = change_set(git, state, paths, full)
        manifest = self.store.manifest(source.id)

        report = SyncReport(
            repo=source.repo,
            branch=changes.head.branch,
            commit=changes.head.commit,
            full=changes.full,
        )
        report.seed_skipped = self.seed_problem
        todo, deletes, known = plan(
            changes, manifest, stale_langs, report, matcher=self.matcher, store=self.store
        )
        del manifest
        todo, rank = in_order(git, todo, changes)
        if todo or deletes:
            self._still_writer()
            self._fill_marked.discard(source.id)
            self.store.put_state(self._state(git, state, changes, pending=True))
            crashpoint("sync.pending")
            self._apply(git, changes, todo, deletes, known, report, progress, rank)
            crashpoint("sync.applied")
        # a pending mark left by an interrupted run goes as soon as the index matches,
        # even when this run found nothing left to write
        if todo or deletes or state is None or state.pending or state_moved(state, changes):
            self._still_writer()  # a writer that lost the index must not advance its state
            done = self._state(git, state, changes, pending=False)
            if self._unfilled_rows(git.source.id):  # the fill follows: marked until it ends
                done = replace(done, pending=done.commit or "unborn")
                self._fill_marked.add(source.id)
            self.store.put_state(done)
        else:
            self.store.write_state_file()  # the mirror may lag (e.g. written by an older run)
        crashpoint("sync.state_written")
        self._fill_vectors(git, report, progress, yield_to)
        self.cache.evict()
        if not (todo or deletes):  # else _apply kept the table in shape after each batch
            self.upkeep()
        crashpoint("sync.done")
        report.seconds = time.monotonic() - started
        log.info("sync_done", **report.as_dict())
        return report

    def _state(
        self, git: GitSource, old: SourceState | None, changes: ChangeSet, *, pending: bool
    ) -> SourceState:
        """The state record before the first write (pending) or after the last
        (``pipeline/state.py``)."""
        fp, model = self.fingerprint, self.embedder.model_id
        if pending:
            return pending_state(git.source, old, changes, fingerprint=fp, model_id=model)
        return done_state(self.store, git.source, changes, fingerprint=fp, model_id=model)

    def _unfilled_rows(self, sid: str) -> bool:
        """Whether rows of ``sid`` lack a vector: written so by this process, or found so
        (looked for once per source and process)."""
        if sid not in self._looked:
            self._looked.add(sid)
            if not coverage(self.store, sid).complete:
                self._unfilled.add(sid)
        return sid in self._unfilled

    def _fill_vectors(
        self,
        git: GitSource,
        report: SyncReport,
        progress: Progress | None,
        yield_to: Callable[[], bool] | None = None,
    ) -> None:
        """Embed the rows written without a vector: this sync's text-first write, what an
        interrupted run left, or what a fill paused for other work (``yield_to``) left."""
        sid = git.source.id
        if not self._unfilled_rows(sid):
            return
        # marked pending until every vector is set: a run killed in the fill leaves a mark that
        # makes the next one finish it (``codechunkd index``'s no-op path reads state.json)
        written = self.store.state(sid)
        if written is not None and written.pending is None:
            self._still_writer()
            self.store.put_state(replace(written, pending=written.commit or "unborn"))
            self._fill_marked.add(sid)
        rank = self._fill_ranks.get(sid) or ranker(git, None, walk=False)
        meter = _Meter(self._last_total, report, progress)
        meter.fill = FillReport()
        # the source's rows, as the state record written after its last write counts them
        meter.rows = written.chunks if written is not None else self.store.count(sid)[1]
        before = report.embedded
        fill = VectorFill(
            self.store,
            self.embedder,
            self.cache,
            batch_size=self.settings.embedding.batch_size,
            window=self.settings.embedding.max_seq_length,
            check=self.vectors.check,
            upkeep=self.upkeep,
            before_commit=self._still_writer,
        )

        def on_slice(done: FillReport) -> None:
            report.embedded = before + done.embedded
            meter.report_fill(done)

        done = fill.run(
            sid, rank, load=lambda: self.load_model(meter), on_slice=on_slice, stop=yield_to
        )
        report.embedded = before + done.embedded
        report.reused += done.reused
        report.fill_paused = done.paused
        if done.paused:  # marked pending still; the next sync takes it up
            return
        self._unfilled.discard(sid)
        self._fill_ranks.pop(sid, None)
        if written is not None:
            self._still_writer()
            self.store.put_state(replace(written, pending=None))
        self._fill_marked.discard(sid)
        meter.report_fill(done)

    def remove_interrupted_writes(self) -> int:
        """Delete data files that no version of the table references (``pipeline/upkeep.py``):
        the writer, before it writes, when a run was interrupted.  Returns the bytes freed."""
        return remove_interrupted_writes(self.store, self.settings)

    def _still_writer(self) -> None:
        if self.check_writer is not None:
            self.check_writer()

    def upkeep(self, *, force: bool = False) -> bool:
        """Keep ``chunks`` indexed and unfragmented (``pipeline/upkeep.py``): the writer, after
        each batch and sync; ``force`` (the daemon's scheduled upkeep) folds whatever is new.
        Returns whether it folded."""
        return upkeep(self.store, self.settings, force=force)

    def build_vector_index_if_due(self) -> bool:
        """Train the IVF-PQ index once the table has ``index.vector_index_rows`` rows."""
        return build_vector_index_if_due(self.store, self.settings)

    def load_model(self, meter: _Meter | None = None) -> float | None:
        """Load the model now if it is not loaded, saying so: seconds taken, or None.

        The first load on a machine can take a minute (the ONNX export, the thread
        calibration); without this it would happen silently inside the first embedding.
        """
        load = getattr(self.embedder, "load", None)
        if load is None or getattr(self.embedder, "loaded", True):
            return None
        log.info("model_loading", model=self.embedder.model_id)
        if meter is not None:
            meter.report(None, activity="loading the model")
        t0 = time.monotonic()
        load()
        seconds = time.monotonic() - t0
        log.info("model_loaded", model=self.embedder.model_id, seconds=round(seconds, 1))
        if meter is not None:
            meter.report(None, "filling vectors" if meter.fill is not None else None)
        return seconds

    def _apply(
        self,
        git: GitSource,
        changes: ChangeSet,
        todo: Sequence[FileVersion],
        deletes: Sequence[str],
        known: set[str],
        report: SyncReport,
        progress: Progress | None,
        rank: Rank,
    ) -> None:
        """Write the plan: ``todo`` and ``deletes`` in batches (``pipeline/batches.py``), text
        first when the change is larger than its first batch (the fill sets the vectors, in
        ``rank``'s order)."""
        total = len(todo) + len(deletes)
        meter = _Meter(total, report, progress)
        self._last_total = total
        text_first = len(todo) > FIRST_BATCH_FILES
        if text_first:
            meter.writing = WRITING_TEXT
            self._fill_ranks[git.source.id] = rank
        meter.report(0)
        if text_first:  # the model is needed only by the fill, after every file is written
            self._unfilled.add(git.source.id)
        elif todo:
            self.load_model(meter)
        self.batches.write(
            git, changes, todo, deletes, known, report, meter, compute=not text_first
        )

    def index_files(
        self, git: GitSource, versions: Sequence[FileVersion], report: SyncReport
    ) -> list[IndexedFile]:
        """Read, chunk and embed ``versions``: the rows ``write_batch`` takes, written by the
        caller (a Ray worker's half of ``pipeline/distributed.py``; ``_apply`` overlaps the two
        halves on one machine instead)."""
        return self.vectors.embed(
            [self.reader.index_file(git, v, report) for v in versions], report
        )
