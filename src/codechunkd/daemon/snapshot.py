"""The status snapshot: what the daemon knows now, as values, and its health.

It owns ``snapshot`` (the daemon, each source, the jobs, the watcher, the caches: read by
``status`` and, from memory only, by the systemd status line), the writer's health (a
sync that makes no progress for ``daemon.stall_after_s`` is stalled) and the cached
size of the index.  It runs on the control thread and the main thread: it reads, and
writes nothing but ``index_size``; it must not wait on the writer or the model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from codechunkd.daemon.control import SourceSpec
from codechunkd.daemon.runtime import Daemon, SourceRuntime
from codechunkd.daemon.status import (
    DaemonSnapshot,
    SourceSnapshot,
    StatusSnapshot,
    document,
)
from codechunkd.daemon.status import status_line as render_line
from codechunkd.errors import CodechunkdError
from codechunkd.git.changes import GitSource
from codechunkd.httpclient import safe_url
from codechunkd.llm.rerank import endpoint
from codechunkd.storage.coverage import table_counts
from codechunkd.storage.lease import writer_problem
from codechunkd.storage.store import read_state_file


def stuck_s(service: Daemon, rt: SourceRuntime, now: float) -> float:
    """Seconds the running sync of ``rt`` has made no progress (a table commit or an
    embedded slice); 0 when idle.  A long cold index is busy, not stalled."""
    if rt.busy_since is None:
        return 0.0
    last = max(service.progress_at, service.embedder.last_used if service.embedder else 0.0)
    return max(0.0, now - max(last, rt.busy_since))


def model_loading_s(service: Daemon) -> float | None:
    """Seconds the model has been loading (export, calibration), or None."""
    since = service.embedder.loading_since if service.embedder is not None else None
    return None if since is None else max(0.0, service.clock() - since)


def writer_healthy(service: Daemon) -> bool:
    """The writer thread lives, and no running sync has stalled (``daemon.stall_after_s``)."""
    if service.writer is None or not service.writer.is_alive():
        return False
    stall = service.settings.daemon.stall_after_s
    now = service.clock()
    return all(stuck_s(service, rt, now) < stall for rt in service.sources.values())


def index_bytes(service: Daemon) -> int | None:
    """The index's size on disk, read again at most once a minute (None: unreadable)."""
    at, size = service.index_size
    now = service.clock()
    if now - at > 60 and service.store is not None:
        try:
            size = service.store.size_bytes()
        except OSError:
            size = None
        service.index_size = (now, size)
    return size


def snapshot(service: Daemon, *, read_git: bool = True) -> StatusSnapshot:
    """What the daemon knows now, as values (``status`` renders it).

    ``read_git=False`` (the systemd line, every few seconds) reads neither git nor
    ``state.json`` nor the summaries' backlog: memory only.
    """
    now = service.clock()
    stored = {}
    if read_git:
        doc = read_state_file(service.paths.state_file) or {}
        stored = {s.get("source"): s for s in doc.get("sources", [])}
    served = list(service.sources.values())
    sources = tuple(
        _source_snapshot(service, rt, stored.get(rt.id), now, read_git=read_git) for rt in served
    ) + tuple(  # then those not opened (one just opened is in both for an instant)
        _unavailable_snapshot(spec, why, stored.values())
        for spec, why in list(service.unavailable.items())
        if spec not in {rt.spec for rt in served}
    )
    summaries: dict[str, Any] = {"enabled": False, "backlog": None}
    if service.summarizer is not None and read_git:
        # counted now (one filtered count_rows: cheap, see operations.md): an edit shows
        summaries = service.summarizer.status(refresh=True)
    elif service.summarizer is None:
        summaries["reason"] = service.summaries_error or "not started"
    cache = service.cache.stats() if service.cache is not None else None
    from codechunkd import __version__

    return StatusSnapshot(
        daemon=DaemonSnapshot(
            pid=os.getpid(),
            version=__version__,
            started_at=service.started_wall.isoformat(),
            uptime_s=now - service.started_at,
            caught_up=service.ready.is_set(),
            writer_healthy=writer_healthy(service),
            stall_after_s=service.settings.daemon.stall_after_s,
            model_loaded=bool(service.embedder and service.embedder.loaded),
            model_loading_s=model_loading_s(service),
            cache={
                "hits": cache.hits,
                "misses": cache.misses,
                "entries": cache.entries,
                "hit_rate": round(cache.hit_rate, 4),
            }
            if cache is not None and read_git
            else None,
            watcher=service.watcher.health() if service.watcher else None,
            jobs=service.upkeep.as_dict() if service.upkeep else {},
            summaries=summaries,
            rerank=rerank(service, now),
            socket=str(service.paths.socket),
        ),
        index=service.paths.uri,
        index_bytes=index_bytes(service) if read_git else None,
        sources=sources,
    )


def rerank(service: Daemon, now: float) -> dict[str, Any] | None:
    """The reranking server the searches ask, and the searches it failed; None: none set."""
    r = service.settings.rerank
    if not r.url:
        return None
    tally = service.reranks
    with tally.lock:
        failed, why, at = tally.failed, tally.last_error, tally.last_failed_at
    return {
        "url": safe_url(endpoint(r)),
        "model": r.model,
        "failed": failed,
        "last_error": why,
        "last_failed_s_ago": round(now - at, 1) if at is not None else None,
    }


def _unavailable_snapshot(
    spec: SourceSpec, why: str, stored: Iterable[Mapping[str, Any]]
) -> SourceSnapshot:
    """A source the daemon could not open (gone, not a repository): what the index holds
    of it (its ``state.json`` entry, found by path), and why (``failing``)."""
    record = next((r for r in stored if r.get("repo") == spec.path and _same_ref(r, spec)), None)
    return SourceSnapshot(
        record=record or {"repo": spec.path, "ref": spec.ref, "files": 0, "chunks": 0},
        head=None,
        head_branch="?",
        live=True,
        failing=why,
        last_error=why,
    )


def _same_ref(record: Mapping[str, Any], spec: SourceSpec) -> bool:
    """A recorded source follows the ref ``spec`` names (``main`` is ``refs/heads/main``),
    or both follow the working tree."""
    ref = record.get("ref")
    if spec.ref is None or ref is None:
        return spec.ref is None and ref is None
    return bool(ref == spec.ref or str(ref).endswith("/" + spec.ref))


def _source_snapshot(
    service: Daemon,
    rt: SourceRuntime,
    record: Mapping[str, Any] | None,
    now: float,
    *,
    read_git: bool,
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
    table = table_counts(service.reader, src.id, skipped=True) if read_git else None
    head: str | None = None
    head_branch = "?"
    if read_git:
        try:
            now_head = GitSource(rt.spec.path, ref=rt.spec.ref).head()
            head, head_branch = now_head.commit, now_head.branch
        except CodechunkdError:
            pass
    queued, level, first = service.queue.pending(rt.id)
    paths = service.queue.paths(rt.id) | rt.unsaved
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
        stuck_s=stuck_s(service, rt, now),
        progress=rt.progress.as_dict() if rt.progress is not None else None,
        last_batch=last,
        errors=rt.errors,
        consecutive_failures=rt.consecutive_failures,
        last_error=rt.last_error,
        failing=rt.failing,
        watcher=rt.watch.health() if rt.watch is not None else None,
        table=table,
    )


def status(service: Daemon) -> dict[str, Any]:
    """The control socket's ``status``: the snapshot as a document, and a known problem."""
    doc = document(snapshot(service))
    problem = writer_problem(service.lock)  # e.g. the index directory deleted under us
    if problem:
        doc["daemon"].update(state="stalled", reason=problem)
    return doc


def status_line(service: Daemon) -> str:
    """The one line systemd shows (``STATUS=``), from memory only."""
    return render_line(snapshot(service, read_git=False))
