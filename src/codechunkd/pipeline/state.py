"""The source's state records a sync writes: pending before the first write, done after
the last (``SourceState``, ``state.json``'s mirror).

It owns what the records hold: a pending record keeps the old position as the base until
the new one is fully written (``pending_state``), a done record is the new position with
the table's counts (``done_state``), and whether a source's position moved at all
(``state_moved``).  It builds records only: writing them, and the pending mark kept over
the fill of a text-first write, are ``Syncer.sync``'s (``pipeline/sync.py``), at its crash
points.
"""

from __future__ import annotations

from codechunkd.git.changes import ChangeSet, Source
from codechunkd.storage.store import IndexStore, SourceState


def state_moved(state: SourceState, changes: ChangeSet) -> bool:
    """Whether HEAD, the branch or the working-tree differences moved since ``state``."""
    return (
        state.commit != changes.head.commit
        or state.branch != changes.head.branch
        or dict(state.dirty) != dict(changes.dirty)
    )


def pending_state(
    source: Source,
    old: SourceState | None,
    changes: ChangeSet,
    *,
    fingerprint: str,
    model_id: str,
) -> SourceState:
    """The record written before the first write: pending on the new HEAD."""
    # the old position stays the base until the new one is fully written
    files, chunks = (old.files, old.chunks) if old else (0, 0)
    return SourceState(
        source=source,
        branch=old.branch if old else changes.head.branch,
        commit=old.commit if old else None,
        dirty=old.dirty if old else {},
        pending=changes.head.commit or "unborn",
        fingerprint=old.fingerprint if old else fingerprint,
        embedding_model=model_id,
        files=files,
        chunks=chunks,
    )


def done_state(
    store: IndexStore,
    source: Source,
    changes: ChangeSet,
    *,
    fingerprint: str,
    model_id: str,
) -> SourceState:
    """The record written after the last write: the new position, the table's counts."""
    files, chunks = store.count(source.id)
    return SourceState(
        source=source,
        branch=changes.head.branch,
        commit=changes.head.commit,
        dirty=dict(changes.dirty),
        pending=None,
        fingerprint=fingerprint,
        embedding_model=model_id,
        files=files,
        chunks=chunks,
    )
