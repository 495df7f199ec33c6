"""Bring one source's rows up to date: change set → chunks → vectors → store.

``Syncer.sync`` is the whole pipeline for one source, used by ``codechunkd
index`` and by the daemon.  It is idempotent and crash-safe: the source's
state is marked *pending* before the first write and advanced only after the
last, so an interrupted run leaves a mark that makes the next one reconcile
every file against the manifest.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from itertools import zip_longest
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog

from codechunkd.chunking.chunker import CHUNKER_VERSION, Chunk, content_hash
from codechunkd.chunking.tokens import counter_for
from codechunkd.config.settings import Settings
from codechunkd.embedding.base import vector_problems
from codechunkd.embedding.embedder import Embedder
from codechunkd.errors import EmbeddingError
from codechunkd.git.changes import (
    REFUSALS,
    UNREADABLE,
    ChangeSet,
    FileVersion,
    GitSource,
    Matcher,
)
from codechunkd.git.files import read_raw
from codechunkd.heap import release_freed_memory
from codechunkd.llm.summaries import EXTRACTIVE, PROMPT_VERSION, extractive_summary, llm_source
from codechunkd.pipeline.fill import FillReport, VectorFill
from codechunkd.pipeline.order import Rank, ordered, ranker
from codechunkd.pipeline.order import order_rank as order_rank  # re-exported
from codechunkd.pipeline.prepare import Prepared, prepare_file
from codechunkd.pipeline.progress import Progress as Progress  # re-exported
from codechunkd.pipeline.progress import SyncProgress as SyncProgress  # re-exported
from codechunkd.pipeline.progress import _Meter
from codechunkd.pipeline.workers import ChunkPool, chunk_workers
from codechunkd.storage.cache import EmbeddingCache, SummaryCache
from codechunkd.storage.coverage import coverage
from codechunkd.storage.crashpoints import crashpoint
from codechunkd.storage.rows import EmbeddedChunk, FileRecord, IndexedFile
from codechunkd.storage.seed import Seed, SeedUnusable
from codechunkd.storage.store import IndexStore, SourceState

log = structlog.get_logger("codechunkd.sync")


@dataclass(slots=True)
class SyncReport:
    """What one sync did (counts are of files unless named otherwise)."""

    repo: str = ""
    branch: str = ""
    commit: str | None = None
    full: bool = False
    added: int = 0
    changed: int = 0
    deleted: int = 0
    renamed: int = 0
    unchanged: int = 0
    embedded: int = 0
    """Chunks whose vectors were computed."""
    reused: int = 0
    """Chunks whose vectors came from the cache."""
    seeded: int = 0
    """Chunks whose vectors came from the seed (``index.seed``), through the cache."""
    seed_skipped: str | None = None
    """Why the seed was not used (unreadable, older schema, other model); None: it was, or
    none is set."""
    seed_refused: int = 0
    """Vectors the seed offered that were refused (not finite, all zeros, null): their
    chunks were embedded here instead."""
    chunks: int = 0
    """Chunks written."""
    vectorless: int = 0
    """Chunks written without their vector (text first: the fill sets it after)."""
    skipped: Counter[str] = field(default_factory=Counter)
    replaced_utf8: int = 0
    """Files that were not valid UTF-8 and were decoded with replacement characters."""
    truncated: int = 0
    """Chunks longer than the model's window (only their head was embedded)."""
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "repo": self.repo,
            "branch": self.branch,
            "commit": self.commit,
            "full": self.full,
            "added": self.added,
            "changed": self.changed,
            "deleted": self.deleted,
            "renamed": self.renamed,
            "unchanged": self.unchanged,
            "embedded": self.embedded,
            "reused": self.reused,
            "seeded": self.seeded,
            "seed_skipped": self.seed_skipped,
            "seed_refused": self.seed_refused,
            "chunks": self.chunks,
            "vectorless": self.vectorless,
            "skipped": dict(self.skipped),
            "replaced_utf8": self.replaced_utf8,
            "truncated": self.truncated,
            "seconds": round(self.seconds, 3),
            "chunks_per_second": round(self.chunks / self.seconds, 1) if self.seconds else 0.0,
        }


def fingerprint(settings: Settings, model_id: str) -> str:
    """Hash of everything that shapes a source's rows: when it changes, rows are rebuilt."""
    s = settings
    parts = [
        f"chunker={CHUNKER_VERSION}",
        f"budget={s.chunking.budget}",
        f"merge={s.chunking.merge_siblings}",
        f"ext={sorted(s.chunking.extensions.items())}",
        f"model={model_id}",
        f"max={s.files.max_file_size}",
        f"inc={s.files.include}",
        f"exc={s.files.exclude}",
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def up_to_date(git: GitSource, recorded: Mapping[str, Any] | None, fingerprint: str) -> bool:
    """True when the recorded state (``state.json``) is exactly the source as it is now.

    Exact because the index reflects (commit, working-tree differences): when
    HEAD and every difference's blob id are the same, so is every file.  The
    mirror is written after the table, so it can only lag behind: a lagging
    mirror answers False and the caller takes the full path.
    """
    return fresh_changes(git, recorded, fingerprint) is not None


def fresh_changes(
    git: GitSource, recorded: Mapping[str, Any] | None, fingerprint: str
) -> ChangeSet | None:
    """The source's change set when it is ``up_to_date`` (nothing to write), else None:
    what a no-op run still reports (``standing_skips``)."""
    if not recorded or recorded.get("pending") or recorded.get("fingerprint") != fingerprint:
        return None
    since = recorded.get("commit")
    since_dirty = recorded.get("dirty") or {}
    if git.head().commit != since:
        return None
    changes = git.change_set(since=since, since_dirty=since_dirty)
    if changes.full or dict(changes.dirty) != dict(since_dirty):
        return None
    return changes


def standing_skip(version: FileVersion, matcher: Matcher) -> str | None:
    """The skip a run reports for ``version`` although nothing is read: a refused path
    (``FileVersion.refused``), or a file still unreadable (its blob ``UNREADABLE``:
    nothing could be hashed, so nothing is read either).  Said again by every run that
    looks at the path, so that a problem stays visible until it is fixed.  None for a
    path the settings exclude."""
    reason = version.refused or ("unreadable" if version.blob == UNREADABLE else None)
    if reason is None:
        return None
    if version.path.endswith("/"):  # a directory: include globs name files, only excludes apply
        return None if matcher.excludes(version.path) else reason
    return reason if matcher(version.path) else None


def standing_skips(changes: ChangeSet, matcher: Matcher) -> Counter[str]:
    """``standing_skip`` of every version of a change set, counted (a no-op run's report)."""
    return Counter(r for v in changes.versions if (r := standing_skip(v, matcher)) is not None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunked:
    """One file read and chunked, or skipped with a reason."""

    version: FileVersion
    language: str
    chunks: list[Chunk]
    skip_reason: str | None = None


SEED_RETRY_S = 300.0
"""A seed that could not be used is tried again after this long (a daemon outlives outages)."""


#: A big change's first batch: later ones double up to ``index.batch_files``.  A batch is
#: searchable once committed, so a first index answers with hits after a few files'
#: embedding, not after a whole batch's (256 files: minutes on 2 cores).
FIRST_BATCH_FILES = 8


def _slices(items: Sequence[FileVersion], size: int, *, first: int) -> list[Sequence[FileVersion]]:
    """``items`` in order, in slices of ``first``, twice that, … up to ``size`` files."""
    out: list[Sequence[FileVersion]] = []
    step, i = min(first, size), 0
    while i < len(items):
        out.append(items[i : i + step])
        i += step
        step = min(step * 2, size)
    return out


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
        self._seed: Seed | None = None
        self._seed_failed_at: float | None = None
        self.seed_problem: str | None = None
        """Why the seed is not used now (None: it is, or none is set)."""
        self._hash_index = False
        self._unfilled: set[str] = set()
        """Sources that may have rows without a vector (``pipeline/fill.py``)."""
        self._looked: set[str] = set()
        """Sources whose table this process has looked at for rows without a vector."""
        self._last_total = 0
        self._rank: Rank | None = None
        """The order of the last change (``pipeline/order.py``): the fill's order."""
        workers = chunk_workers(settings)
        self.chunk_pool = ChunkPool(workers, settings) if workers > 1 else None
        """Worker processes that chunk a multi-batch change (``index.chunk_workers``)."""

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
    ) -> SyncReport:
        """Make the index reflect the source now.  ``paths``: only these changed (file events)."""
        started = time.monotonic()
        source = git.source
        self.store.ensure_writable(self.embedder.model_id, self.embedder.dimension)
        if not self._hash_index:  # so that this index can seed others
            self.store.ensure_embed_hash_index()
            self._hash_index = True
        state = self.store.state(source.id)
        stale_settings = state is not None and state.fingerprint != self.fingerprint
        full = full or state is None or state.pending is not None or stale_settings
        if state is not None and state.pending is not None:
            self.remove_interrupted_writes()
        changes = self._change_set(git, state, paths, full)
        manifest = self.store.manifest(source.id)

        report = SyncReport(
            repo=source.repo,
            branch=changes.head.branch,
            commit=changes.head.commit,
            full=changes.full,
        )
        report.seed_skipped = self.seed_problem
        todo, deletes, known = self._plan(changes, manifest, stale_settings, report)
        del manifest
        todo = self._ordered(git, todo, changes)
        if todo or deletes:
            self._still_writer()
            self.store.put_state(self._state(git, state, changes, pending=True))
            crashpoint("sync.pending")
            self._apply(git, changes, todo, deletes, known, report, progress)
            crashpoint("sync.applied")
        # a pending mark left by an interrupted run goes as soon as the index matches,
        # even when this run found nothing left to write
        if todo or deletes or state is None or state.pending or self._state_moved(state, changes):
            self._still_writer()  # a writer that lost the index must not advance its state
            done = self._state(git, state, changes, pending=False)
            if self._unfilled_rows(git.source.id):  # the fill follows: marked until it ends
                done = replace(done, pending=done.commit or "unborn")
            self.store.put_state(done)
        else:
            self.store.write_state_file()  # the mirror may lag (e.g. written by an older run)
        crashpoint("sync.state_written")
        self._fill_vectors(git, report, progress)
        self.cache.evict()
        if not (todo or deletes):  # else _apply kept the table in shape after each batch
            self.upkeep()
        crashpoint("sync.done")
        report.seconds = time.monotonic() - started
        log.info("sync_done", **report.as_dict())
        return report

    def _unfilled_rows(self, sid: str) -> bool:
        """Whether rows of ``sid`` lack a vector: written so by this process, or found so
        (looked for once per source and process)."""
        if sid not in self._looked:
            self._looked.add(sid)
            if not coverage(self.store, sid).complete:
                self._unfilled.add(sid)
        return sid in self._unfilled

    def _fill_vectors(self, git: GitSource, report: SyncReport, progress: Progress | None) -> None:
        """Embed the rows written without a vector: this sync's text-first write, or what an
        interrupted run left."""
        sid = git.source.id
        if not self._unfilled_rows(sid):
            return
        # marked pending until every vector is set: a run killed in the fill leaves a mark that
        # makes the next one finish it (``codechunkd index``'s no-op path reads state.json)
        written = self.store.state(sid)
        if written is not None and written.pending is None:
            self._still_writer()
            self.store.put_state(replace(written, pending=written.commit or "unborn"))
        rank = self._rank or ranker(git, None, walk=False)
        meter = _Meter(self._last_total, report, progress)
        meter.fill = FillReport()
        before = report.embedded
        fill = VectorFill(
            self.store,
            self.embedder,
            self.cache,
            batch_size=self.settings.embedding.batch_size,
            window=self.settings.embedding.max_seq_length,
            check=self._check_vectors,
            upkeep=self.upkeep,
            before_commit=self._still_writer,
        )

        def on_slice(done: FillReport) -> None:
            report.embedded = before + done.embedded
            meter.report_fill(done)

        done = fill.run(sid, rank, load=lambda: self.load_model(meter), on_slice=on_slice)
        report.embedded = before + done.embedded
        report.reused += done.reused
        self._unfilled.discard(sid)
        if written is not None:
            self._still_writer()
            self.store.put_state(replace(written, pending=None))
        meter.report_fill(done)

    def remove_interrupted_writes(self) -> int:
        """Delete data files that no version of the table references: those an interrupted
        build wrote and never committed (a Ray driver killed before its commit).  The writer
        calls it before it writes, when a run was interrupted (one writer per index: no write
        of anyone else can be in progress).  Returns the bytes freed."""
        keep = timedelta(hours=self.settings.index.keep_versions_hours)
        freed = self.store.remove_unreferenced_files(keep)
        if freed:
            log.info("unreferenced_files_removed", bytes=freed)
        return freed

    def _still_writer(self) -> None:
        if self.check_writer is not None:
            self.check_writer()

    def upkeep(self, *, force: bool = False) -> bool:
        """Keep ``chunks`` indexed and unfragmented (the writer, after each batch and sync).

        The full-text index is created as soon as the table has rows, the vector index once
        it has ``index.vector_index_rows``; both while they are small. Later rows are folded
        in (``IndexStore.fold``) once ``index.fold_rows`` rows or ``index.compact_fragments``
        fragments are new, so no step ever works on the whole table and a cold index of a
        large repository stays within the memory of a small one. ``force`` (the daemon's
        scheduled upkeep) folds whatever is new. Between folds the full-text index takes
        the new rows at once (``IndexStore.index_text``, costing about what was written):
        rows it does not cover are scanned by every text query, which then runs several
        times slower (docs/operations.md). Returns whether it folded.
        """
        self.store.ensure_fts()
        self.build_vector_index_if_due()
        idx = self.settings.index
        rows, fragments = self.store.unfolded(idx.fold_rows)
        if not (
            fragments and (force or fragments >= idx.compact_fragments or rows >= idx.fold_rows)
        ):
            t0 = time.monotonic()
            if added := self.store.index_text():
                log.debug("text_indexed", rows=added, ms=round((time.monotonic() - t0) * 1000))
            return False
        t0 = time.monotonic()
        self.store.fold(
            timedelta(hours=idx.keep_versions_hours),
            fragment_rows=idx.fold_rows,
            merge=rows < idx.fold_rows // 4,  # a trickle: into the latest delta, not a new one
        )
        log.info("folded", rows=rows, fragments=fragments, ms=round((time.monotonic() - t0) * 1000))
        return True

    def build_vector_index_if_due(self) -> bool:
        """Train the IVF-PQ index once the table has ``index.vector_index_rows`` rows."""
        if self.store.has_vector_index():
            return False
        rows = self.store.rows()
        if rows < self.settings.index.vector_index_rows:
            return False
        # trained on vectors only: rows written text first have none yet (storage/coverage.py)
        rows = coverage(self.store).vectors
        if rows < self.settings.index.vector_index_rows:
            return False
        t0 = time.monotonic()
        self.store.build_vector_index()
        log.info("vector_index_built", rows=rows, ms=round((time.monotonic() - t0) * 1000))
        return True

    def _change_set(
        self,
        git: GitSource,
        state: SourceState | None,
        paths: Iterable[str] | None,
        full: bool,
    ) -> ChangeSet:
        if paths is not None and not full and state is not None:
            head, versions = git.versions_of(sorted(set(paths)))
            if head.commit == state.commit:  # pure working-tree edits: no status() call
                dirty = dict(state.dirty)
                for v in versions:
                    if v.dirty:
                        dirty[v.path] = v.blob
                    else:
                        dirty.pop(v.path, None)
                return ChangeSet(
                    source=git.source, head=head, full=False, versions=tuple(versions), dirty=dirty
                )
        return git.change_set(
            since=state.commit if state else None,
            since_dirty=state.dirty if state else {},
            full=full,
        )

    @staticmethod
    def _state_moved(state: SourceState, changes: ChangeSet) -> bool:
        return (
            state.commit != changes.head.commit
            or state.branch != changes.head.branch
            or dict(state.dirty) != dict(changes.dirty)
        )

    def _state(
        self, git: GitSource, old: SourceState | None, changes: ChangeSet, *, pending: bool
    ) -> SourceState:
        if pending:  # the old position stays the base until the new one is fully written
            files, chunks = (old.files, old.chunks) if old else (0, 0)
            return SourceState(
                source=git.source,
                branch=old.branch if old else changes.head.branch,
                commit=old.commit if old else None,
                dirty=old.dirty if old else {},
                pending=changes.head.commit or "unborn",
                fingerprint=old.fingerprint if old else self.fingerprint,
                embedding_model=self.embedder.model_id,
                files=files,
                chunks=chunks,
            )
        files, chunks = self.store.count(git.source.id)
        return SourceState(
            source=git.source,
            branch=changes.head.branch,
            commit=changes.head.commit,
            dirty=dict(changes.dirty),
            pending=None,
            fingerprint=self.fingerprint,
            embedding_model=self.embedder.model_id,
            files=files,
            chunks=chunks,
        )

    def _plan(
        self,
        changes: ChangeSet,
        manifest: dict[str, FileRecord],
        stale_settings: bool,
        report: SyncReport,
    ) -> tuple[list[FileVersion], list[str], set[str]]:
        """(files to index, paths to delete, paths that may have rows in the index).

        Rows of a path not in the manifest exist only after a crash, and a crash
        leaves the state pending, which makes the next sync full: a full sync
        also looks for paths with chunk rows.
        """
        todo: list[FileVersion] = []
        deletes: list[str] = []
        wanted: set[str] = set()
        for v in changes.versions:
            if v.blob is None or not self.matcher(v.path):
                if v.path in manifest:
                    deletes.append(v.path)
                if (reason := standing_skip(v, self.matcher)) is not None:
                    report.skipped[reason] += 1
                    log.warning("file_refused", path=v.shown, reason=REFUSALS.get(reason, reason))
                continue
            wanted.add(v.path)
            rec = manifest.get(v.path)
            if rec is not None and rec.blob == v.blob and not stale_settings:
                if v.blob == UNREADABLE:  # still unreadable: said again by every run
                    report.skipped["unreadable"] += 1
                    log.warning("file_unreadable", path=v.shown)
                continue
            todo.append(v)
        known = set(manifest)
        if changes.full:
            known |= self.store.chunk_paths(changes.source.id)
            deletes.extend(sorted(known - wanted - set(deletes)))
        # an exact rename is a delete and an add of the same blob
        deleted_blobs = Counter(manifest[p].blob for p in deletes if p in manifest)
        for v in todo:
            if v.path in manifest:
                report.changed += 1
            elif deleted_blobs[v.blob or ""] > 0:
                deleted_blobs[v.blob or ""] -= 1
                report.renamed += 1
            else:
                report.added += 1
        report.deleted = len(deletes) - report.renamed
        if changes.full:
            report.unchanged = len(wanted) - report.added - report.changed - report.renamed
        else:
            report.unchanged = len(manifest) - report.changed - len(deletes)
        return todo, deletes, known

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
            meter.report(None, "filling vectors" if meter.fill is not None else "indexing")
        return seconds

    def _ordered(
        self, git: GitSource, todo: list[FileVersion], changes: ChangeSet
    ) -> list[FileVersion]:
        """Files in the order that makes an index useful soonest (``pipeline/order.py``),
        whatever the size of the change; the vectors are filled in the same order."""
        dirty = {p for p in changes.dirty}
        self._rank = ranker(git, changes.head.commit, walk=len(todo) > 1, dirty=dirty)
        return ordered(todo, self._rank)

    def _apply(
        self,
        git: GitSource,
        changes: ChangeSet,
        todo: Sequence[FileVersion],
        deletes: Sequence[str],
        known: set[str],
        report: SyncReport,
        progress: Progress | None,
    ) -> None:
        size = self.settings.index.batch_files
        total = len(todo) + len(deletes)
        done = 0
        meter = _Meter(total, report, progress)
        self._last_total = total
        meter.report(0)
        text_first = len(todo) > FIRST_BATCH_FILES
        if text_first:  # the model is needed only by the fill, after every file is written
            self._unfilled.add(git.source.id)
        elif todo:
            self.load_model(meter)
        batches = _slices(todo, size, first=FIRST_BATCH_FILES)
        removals = [deletes[i : i + size] for i in range(0, len(deletes), size)]
        empty: Sequence[Any] = ()
        work = list(zip_longest(batches, removals, fillvalue=empty))
        for (batch, dels), read, prepare_s in self._prepared(git, work, report):
            t0 = time.monotonic()
            embedded_before, reused_before = report.embedded, report.reused
            ready = self._embed(
                read,
                report,
                functools.partial(meter.report_within, done),
                compute=not text_first,
            )
            t1 = time.monotonic()
            new = not any(v.path in known for v in batch)
            self._still_writer()
            self.store.write_batch(
                git.source, changes.head, ready, dels, model_id=self.embedder.model_id, new=new
            )
            written = sum(len(f.chunks) for f in ready)
            done += len(batch) + len(dels)
            report.chunks += written
            report.vectorless += sum(1 for f in ready for c in f.chunks if c.vector is None)
            log.info(
                "batch_committed",
                repo=git.source.repo,
                files=len(batch),
                deleted=len(dels),
                chunks=written,
                embedded=report.embedded - embedded_before,
                reused=report.reused - reused_before,
                prepare_ms=round(prepare_s * 1000),
                embed_ms=round((t1 - t0) * 1000),
                write_ms=round((time.monotonic() - t1) * 1000),
            )
            meter.report(done)
            del ready, read
            self.upkeep()
            release_freed_memory()  # batches come and go: return their pages

    def _prepared(
        self,
        git: GitSource,
        work: Sequence[tuple[Sequence[FileVersion], Sequence[str]]],
        report: SyncReport,
    ) -> Iterator[tuple[tuple[Sequence[FileVersion], Sequence[str]], list[Chunked], float]]:
        """Batches read and chunked one ahead, on another thread, while this one embeds.

        The queue holds one prepared batch: memory stays bounded by two batches
        whatever the size of the change, and the embedder (the bottleneck) never
        waits for reading or parsing.
        """
        if len(work) <= 1:  # nothing to overlap with
            for only in work:
                t0 = time.monotonic()
                read = [self._index_file(git, v, report) for v in only[0]]
                yield only, read, time.monotonic() - t0
            return
        out: queue.Queue[tuple[int, list[Chunked], float] | BaseException] = queue.Queue(maxsize=1)
        stop = threading.Event()

        def produce() -> None:
            try:
                for i, (batch, _) in enumerate(work):
                    if stop.is_set():
                        return
                    t0 = time.monotonic()
                    read = self._read_batch(git, batch, report)
                    out.put((i, read, time.monotonic() - t0))
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer, re-raised there
                out.put(exc)

        # daemon: a process that abandons a batch at shutdown must not wait for this thread
        producer = threading.Thread(target=produce, name="sync-prepare", daemon=True)
        producer.start()
        try:
            for _ in work:
                got = out.get()
                if isinstance(got, BaseException):
                    raise got
                i, read, seconds = got
                yield work[i], read, seconds
        finally:
            stop.set()
            while producer.is_alive():  # unblock a producer waiting on a full queue
                with contextlib.suppress(queue.Empty):
                    out.get(timeout=0.05)
            self.close()  # a daemon keeps no idle chunking workers between large changes

    def index_files(
        self, git: GitSource, versions: Sequence[FileVersion], report: SyncReport
    ) -> list[IndexedFile]:
        """Read, chunk and embed ``versions``: the rows ``write_batch`` takes, written by the
        caller (a Ray worker's half of ``pipeline/distributed.py``; ``_apply`` overlaps the two
        halves on one machine instead)."""
        return self._embed([self._index_file(git, v, report) for v in versions], report)

    def _read_batch(
        self, git: GitSource, batch: Sequence[FileVersion], report: SyncReport
    ) -> list[Chunked]:
        """One batch read and chunked: in this thread, or with chunk workers read here
        (pygit2 stays in this process) and decoded and chunked on the workers, in order."""
        pool = self.chunk_pool
        if pool is None:
            return [self._index_file(git, v, report) for v in batch]
        done: list[Prepared | None] = []  # None: chunked by the workers, in this order
        raws: list[tuple[FileVersion, bytes]] = []
        for v in batch:
            version, raw = read_raw(git, v, max_size=self.settings.files.max_file_size)
            if isinstance(raw, str):
                done.append(Prepared(version=version, skip_reason=raw))
            else:
                done.append(None)
                raws.append((version, raw))
        chunked = iter(pool.prepare(raws))
        return [self._chunked(p if p is not None else next(chunked), report) for p in done]

    # -- one file -------------------------------------------------------------

    def _index_file(self, git: GitSource, version: FileVersion, report: SyncReport) -> Chunked:
        """Read and chunk one file (a skip is a file with a reason and no chunks)."""
        assert version.blob is not None
        return self._chunked(prepare_file(git, version, self.settings, self.count_tokens), report)

    def _chunked(self, done: Prepared, report: SyncReport) -> Chunked:
        """A prepared file as the pipeline carries it; its skip or decoding counted, logged."""
        version = done.version
        if done.replaced_utf8:
            report.replaced_utf8 += 1
            log.info("decoded_with_replacement", path=version.shown, reason="not valid UTF-8")
        if done.error is not None:
            log.warning("chunking_failed", path=version.shown, error=done.error)
        if done.skip_reason is not None:
            if done.skip_reason == "unreadable":
                log.warning("file_unreadable", path=version.shown)
            return self._skip(done.version, done.skip_reason, report)
        return Chunked(version=done.version, language=done.language, chunks=done.chunks)

    @staticmethod
    def _skip(version: FileVersion, reason: str, report: SyncReport) -> Chunked:
        report.skipped[reason] += 1
        return Chunked(version=version, language="", chunks=[], skip_reason=reason)

    def _embed(
        self,
        files: Sequence[Chunked],
        report: SyncReport,
        files_ready: Callable[[int], None] | None = None,
        *,
        compute: bool = True,
    ) -> list[IndexedFile]:
        """Vectors for every chunk: from the cache, else computed once per distinct text
        (``compute=False``: left None, for ``pipeline/fill.py`` to fill in after the text).

        The misses are embedded in slices of ``embedding.batch_size`` texts, and each
        slice goes into the cache as soon as it is computed: a kill, an OOM or a power
        cut mid-batch loses at most one slice, and the next run reuses the rest.
        ``files_ready(n)`` hears after each slice how many of ``files`` have all their
        vectors.
        """
        model = self.embedder.model_id
        dim = self.embedder.dimension
        keys = {c.embed_text: content_hash(c.embed_text) for f in files for c in f.chunks}
        cached = self.cache.get_many(model, keys.values(), dim)
        seeded = self._from_seed({k for k in keys.values() if k not in cached}, report)
        cached.update(seeded)
        from_seed = sum(1 for f in files for c in f.chunks if keys[c.embed_text] in seeded)
        report.seeded += from_seed
        missing = sorted((t for t, k in keys.items() if k not in cached), key=len)
        waiting = [sum(1 for c in f.chunks if keys[c.embed_text] not in cached) for f in files]
        needed_by: dict[str, list[int]] = {}
        for i, f in enumerate(files):
            for c in f.chunks:
                if keys[c.embed_text] not in cached:
                    needed_by.setdefault(c.embed_text, []).append(i)
        ready_files = waiting.count(0)
        report.reused += sum(len(f.chunks) for f in files) - len(missing) - from_seed
        step = max(1, self.settings.embedding.batch_size)
        if not compute:
            missing = []
        for start in range(0, len(missing), step):
            texts = missing[start : start + step]
            vectors = self.embedder.embed(texts)
            self._check_vectors(vectors, len(texts))
            fresh = {keys[t]: vectors[j] for j, t in enumerate(texts)}
            self.cache.put_many(model, fresh)
            cached.update(fresh)
            report.embedded += len(texts)
            for t in texts:
                for i in needed_by[t]:
                    waiting[i] -= 1
                    ready_files += waiting[i] == 0
            if files_ready is not None:
                files_ready(ready_files)
        window = self.settings.embedding.max_seq_length
        llm_model = self.settings.summaries.model
        llm = (
            self.summaries.get_many(
                llm_model, PROMPT_VERSION, {c.content_hash for f in files for c in f.chunks}
            )
            if self.summaries is not None
            else {}
        )
        out: list[IndexedFile] = []
        for f in files:
            assert f.version.blob is not None
            ready: list[EmbeddedChunk] = []
            for c in f.chunks:
                key = keys[c.embed_text]
                vec: npt.NDArray[np.float32] | None = cached.get(key)
                if c.token_count > window:
                    report.truncated += 1
                ready.append(
                    EmbeddedChunk(
                        chunk=c,
                        vector=vec,
                        embed_hash=key,
                        embedded_tokens=min(c.token_count, window),
                        summary=llm.get(c.content_hash) or extractive_summary(c),
                        summary_source=(
                            llm_source(llm_model) if c.content_hash in llm else EXTRACTIVE
                        ),
                        summary_of=c.content_hash,
                    )
                )
            out.append(
                IndexedFile(
                    path=f.version.path,
                    blob=f.version.blob,
                    language=f.language,
                    dirty=f.version.dirty,
                    chunks=tuple(ready),
                    skip_reason=f.skip_reason,
                )
            )
        return out

    def _check_vectors(self, vectors: npt.NDArray[np.float32], count: int) -> None:
        """Raise ``EmbeddingError`` unless the embedder gave ``count`` usable vectors: a NaN
        would make LanceDB refuse the whole batch, a zero vector is never found."""
        problems = vector_problems(np.asarray(vectors), self.embedder.dimension)
        if len(vectors) != count or problems:
            what = ", ".join(f"{n} {why}" for why, n in sorted(Counter(problems.values()).items()))
            raise EmbeddingError(
                f"the embedding model {self.embedder.model_id} returned unusable vectors "
                f"for {len(problems) or count} of {count} texts ({what or 'wrong count'})"
            )

    def _from_seed(
        self, hashes: set[str], report: SyncReport
    ) -> dict[str, npt.NDArray[np.float32]]:
        """Vectors of ``hashes`` found in the seed, put into the cache (with the seed's LLM
        summaries of the same rows, into the summary cache); {} without a usable seed.

        Only the vectors the cache misses are looked up, in bulk; summaries come with them,
        so a chunk whose vector was cached here but whose summary was not keeps waiting for
        the summarize job.
        """
        seed = self._open_seed(report) if hashes else None
        if seed is None:
            return {}
        llm_model = self.settings.summaries.model
        want_summaries = self.summaries is not None and bool(llm_model)
        try:
            found = seed.lookup(
                self.embedder.model_id,
                hashes,
                summary_source=llm_source(llm_model) if want_summaries else None,
            )
        except SeedUnusable as exc:
            self._seed_unusable(str(exc), report)
            return {}
        if found.refused:  # checked before the cache may keep them: embedded here instead
            report.seed_refused += sum(found.refused.values())
            log.warning("seed_vectors_refused", seed=seed.uri, reasons=dict(found.refused))
        self.cache.put_many(self.embedder.model_id, found.vectors)
        if self.summaries is not None:
            for content, summary in found.summaries.items():
                self.summaries.put(llm_model, PROMPT_VERSION, content, summary, 0)
        return found.vectors

    def _open_seed(self, report: SyncReport) -> Seed | None:
        """The seed ``index.seed`` names, opened on first need; None when none is set or it
        is unusable (reported, and tried again after ``SEED_RETRY_S``)."""
        if not self.settings.index.seed or self._seed is not None:
            return self._seed
        failed = self._seed_failed_at
        if failed is not None and time.monotonic() - failed < SEED_RETRY_S:
            return None
        try:
            seed = Seed.from_settings(self.settings)
            seed.check_model(self.embedder.model_id, self.embedder.dimension)
        except SeedUnusable as exc:
            self._seed_unusable(str(exc), report)
            return None
        log.info("seed_opened", seed=seed.uri, model=seed.model_id)
        self._seed, self._seed_failed_at, self.seed_problem = seed, None, None
        report.seed_skipped = None
        return seed

    def _seed_unusable(self, reason: str, report: SyncReport) -> None:
        """Index without the seed for now, saying why (in the log and the sync report)."""
        log.warning("seed_skipped", seed=self.settings.index.seed, reason=reason)
        self._seed, self._seed_failed_at = None, time.monotonic()
        self.seed_problem = report.seed_skipped = reason
