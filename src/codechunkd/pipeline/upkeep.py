"""The table kept in shape by its writer: indexes, folds, and data files left by an
interrupted write.

It owns the policy of when (``upkeep``: after each batch and sync, and the daemon's
scheduled upkeep; ``build_vector_index_if_due``; ``remove_interrupted_writes``); the
work itself is ``IndexStore``'s.  Only the one writer of an index calls these, between
its writes (a compaction beside another writer fails): they must not be called from a
reader, and they write no rows and no state.
"""

from __future__ import annotations

import time
from datetime import timedelta

from codechunkd import logs
from codechunkd.config.settings import Settings
from codechunkd.heap import release_freed_memory
from codechunkd.storage.coverage import coverage
from codechunkd.storage.store import IndexStore

log = logs.get_logger("codechunkd.sync")


def remove_interrupted_writes(store: IndexStore, settings: Settings) -> int:
    """Delete data files that no version of the table references: those an interrupted
    build wrote and never committed (a Ray driver killed before its commit).  The writer
    calls it before it writes, when a run was interrupted (one writer per index: no write
    of anyone else can be in progress).  Returns the bytes freed."""
    keep = timedelta(hours=settings.index.keep_versions_hours)
    freed = store.remove_unreferenced_files(keep)
    if freed:
        log.info("unreferenced_files_removed", bytes=freed)
    return freed


def upkeep(store: IndexStore, settings: Settings, *, force: bool = False) -> bool:
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

    Every write comes here after it commits (a batch of files, a fill's vectors, the
    daemon's compaction): the heap's freed pages are returned at the end, or glibc keeps
    what the write and the upkeep freed and the writer's RSS ratchets up (docs/operations.md,
    Measured).
    """
    try:
        return _upkeep(store, settings, force=force)
    finally:
        release_freed_memory()


def _upkeep(store: IndexStore, settings: Settings, *, force: bool) -> bool:
    store.ensure_fts()
    store.ensure_reference_indexes()
    build_vector_index_if_due(store, settings)
    idx = settings.index
    rows, fragments = store.unfolded(idx.fold_rows)
    if not (fragments and (force or fragments >= idx.compact_fragments or rows >= idx.fold_rows)):
        t0 = time.monotonic()
        if added := store.index_text():
            log.debug("text_indexed", rows=added, ms=round((time.monotonic() - t0) * 1000))
        return False
    t0 = time.monotonic()
    store.fold(
        timedelta(hours=idx.keep_versions_hours),
        fragment_rows=idx.fold_rows,
        merge=rows < idx.fold_rows // 4,  # a trickle: into the latest delta, not a new one
    )
    log.info("folded", rows=rows, fragments=fragments, ms=round((time.monotonic() - t0) * 1000))
    return True


def build_vector_index_if_due(store: IndexStore, settings: Settings) -> bool:
    """Train the IVF-PQ index once the table has ``index.vector_index_rows`` rows."""
    if store.has_vector_index():
        return False
    rows = store.rows()
    if rows < settings.index.vector_index_rows:
        return False
    # trained on vectors only: rows written text first have none yet (storage/coverage.py)
    rows = coverage(store).vectors
    if rows < settings.index.vector_index_rows:
        return False
    t0 = time.monotonic()
    store.build_vector_index()
    log.info("vector_index_built", rows=rows, ms=round((time.monotonic() - t0) * 1000))
    return True
