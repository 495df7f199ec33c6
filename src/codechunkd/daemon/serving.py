"""Search serving: the control socket's searches, and how much of a first index is there.

It owns ``search`` (a ``SearchRequest`` answered with the warm model, or at once from
the full text while the model loads or the first index runs, saying why:
``model_note``) and the partial-search bookkeeping (``partial``: the files and chunks
written so far by a first or interrupted index, which marks such answers ``partial``).
It runs on the control thread, on the reader's handle: it must not write, and waits for
the model only as long as ``answer_search`` allows.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from codechunkd.daemon.answer import answer_search
from codechunkd.daemon.runtime import Daemon
from codechunkd.daemon.snapshot import model_loading_s
from codechunkd.storage.coverage import table_counts

if TYPE_CHECKING:
    from codechunkd.pipeline.progress import SyncProgress


def partial(service: Daemon, repo: str | None = None) -> dict[str, Any] | None:
    """How much of a first (or interrupted) index is written, while one is running.

    None when every source (of ``repo``) is whole: synced by this daemon, left complete
    (not pending) by a previous run, or every file written and only vectors filling in
    (the answer's ``coverage`` says how many).
    """
    running = [
        rt
        for rt in list(service.sources.values())
        if not rt.synced
        and rt.indexed is None
        and (repo is None or rt.git.source.repo == repo)
        and not _filling(rt.progress)
    ]
    if not running:
        return None
    total = sum(rt.progress.files_total for rt in running if rt.progress is not None)
    counts = [table_counts(service.reader, rt.git.source.id) or {} for rt in running]
    return {  # what the table holds now, not what the sync has read or embedded
        "files_done": sum(c.get("files", 0) for c in counts),
        "files_total": total,
        "chunks": sum(c.get("chunks", 0) for c in counts),
        "sources": [rt.git.source.repo for rt in running],
    }


def _filling(progress: SyncProgress | None) -> bool:
    """Every file of the sync is written and its vectors are filling in: a search misses no
    file, though it ranks the chunks without a vector by their full text alone."""
    return progress is not None and progress.activity == "filling vectors"


def search(service: Daemon, doc: Mapping[str, Any]) -> dict[str, Any]:
    """Answer a control-socket search (``SearchRequest``'s JSON) with the warm model;
    while the model loads (or when it cannot), at once from the full text, saying so."""
    assert service.embedder is not None and service.reader is not None
    waiting = service.embedder.loading or (
        not service.embedder.loaded and not service.ready.is_set()
    )
    return answer_search(
        doc,
        service.reader,
        service.settings,
        service.embedder,
        text_only=model_note(service) if waiting else None,
        partial=functools.partial(partial, service),
        rerank_failed=functools.partial(rerank_failed, service),
    )


def rerank_failed(service: Daemon, why: str) -> None:
    """Count a search the reranking server failed (``status`` says how many, and why: the
    server's text escaped, so no escape sequence reaches a terminal through it)."""
    from codechunkd.display import printable

    tally = service.reranks
    with tally.lock:
        tally.failed += 1
        tally.last_error = printable(why)
        tally.last_failed_at = service.clock()


def model_note(service: Daemon) -> str:
    """Why a search now goes without its query vector."""
    loading = model_loading_s(service)
    if loading is not None:
        return f"the model is loading ({loading:.0f} s: export, calibration)"
    return "the first index is being written; the model loads after it"
