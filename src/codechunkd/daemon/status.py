"""The status document: states, exit codes and the text rendering.

The daemon takes a ``StatusSnapshot`` of what it knows (``Service.snapshot``)
and ``document`` turns it into the status document; ``codechunkd status`` prints
it, or, with no daemon running, takes a ``stopped`` snapshot from ``state.json``
and goes through the same ``document``.  Both go through ``exit_code`` so
monitors see one contract:

====  ==========================================================
code  meaning
====  ==========================================================
0     the daemon is ready and every source is fresh
10    some source is stale (behind HEAD, pending, or indexing)
11    degraded: a source is not fully watched (inotify limit) and
      falls back to periodic reconcile, or a source keeps failing
12    nothing is indexed
13    stopped: no daemon is running for this index
14    stalled: the daemon is silent, or changes wait too long
====  ==========================================================

When several apply the first in this order wins: stopped, stalled,
degraded, nothing indexed, stale.  Importing this module costs nothing
(stdlib only), so ``status`` stays fast.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

EXIT_FRESH = 0
EXIT_STALE = 10
EXIT_DEGRADED = 11
EXIT_EMPTY = 12
EXIT_STOPPED = 13
EXIT_STALLED = 14

STATES = ("ready", "indexing", "degraded", "stalled", "stopped")


def source_state(s: Mapping[str, Any], *, stall_after: float) -> str:
    """ready | indexing | degraded | stalled, for one source of a running daemon."""
    waiting = s.get("waiting_s") or 0.0
    stuck = s.get("stuck_s") or 0.0
    if max(waiting, stuck) > stall_after:
        return "stalled"
    busy = s.get("busy_s") or 0.0
    watcher = s.get("watcher") or {}
    if watcher.get("degraded") or s.get("failing"):
        return "degraded"
    if busy or s.get("pending_paths") or s.get("pending_level") or not s.get("fresh"):
        return "indexing"
    return "ready"


def daemon_state(source_states: Iterable[str]) -> str:
    states = set(source_states)
    for state in ("stalled", "degraded", "indexing"):
        if state in states:
            return state
    return "ready"


def exit_code(doc: Mapping[str, Any]) -> int:
    state = (doc.get("daemon") or {}).get("state", "stopped")
    sources = doc.get("sources") or []
    if state == "stopped":
        return EXIT_STOPPED
    if state == "stalled":
        return EXIT_STALLED
    if state == "degraded":
        return EXIT_DEGRADED
    if not sources:
        return EXIT_EMPTY
    if state != "ready" or not all(s.get("fresh") for s in sources):
        return EXIT_STALE
    return EXIT_FRESH


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def _when(stamp: object) -> str:
    """``3m ago (2026-12-06 14:57:19 UTC)`` for an ISO time stamp (as written, if not one)."""
    if not stamp:
        return "never"
    try:
        at = datetime.fromisoformat(str(stamp))
    except ValueError:
        return str(stamp)
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    ago = max(0.0, (datetime.now(UTC) - at).total_seconds())
    return f"{_ago(ago)} ({at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC)"


def _heads_text(s: Mapping[str, Any]) -> str:
    """``branch main, HEAD 1a2b3c4d5e, indexed 1a2b3c4d5e on main``; ``HEAD ?`` when the
    repository could not be read (gone), not ``unborn``."""
    head = "?" if s.get("head_branch") == "?" else (s.get("head") or "unborn")[:10]
    return (
        f"branch {s.get('head_branch')}, HEAD {head}, "
        f"indexed {(s.get('commit') or 'unborn')[:10]} on {s.get('branch')}"
    )


def render_text(doc: Mapping[str, Any]) -> str:
    d = doc.get("daemon") or {}
    lines = []
    state = d.get("state", "stopped")
    if state == "stopped":
        why = d.get("reason")
        lines.append("daemon: stopped" + (f" ({why})" if why else ""))
    elif "uptime_s" not in d:  # running, but it did not answer: nothing more is known
        pid = d.get("pid")
        lines.append(f"daemon: {state}" + (f"  pid {pid}" if pid is not None else ""))
        if d.get("reason"):
            lines.append(f"  {state}: {d['reason']}")
    else:
        cache = d.get("cache") or {}
        watch = d.get("watcher") or {}
        lines.append(
            f"daemon: {state}  pid {d.get('pid')}, up {d.get('uptime_s', 0):.0f}s, "
            f"model {_model_state(d)}, "
            f"cache hit rate {cache.get('hit_rate', 0.0):.0%}, "
            f"watches {watch.get('watches', 0)}/{watch.get('limit', '?')}"
        )
        if d.get("reason"):  # why a running daemon is stalled (its index directory deleted)
            lines.append(f"  {state}: {d['reason']}")
        lines.append(_summaries_line(d.get("summaries") or {}))
        if d.get("rerank"):
            lines.append(_rerank_line(d["rerank"]))
    size = doc.get("index_bytes")
    lines.append(f"index: {doc.get('index')}" + (f" ({size / 1e6:.1f} MB)" if size else ""))
    sources = doc.get("sources") or []
    if not sources and "uptime_s" in d:  # a daemon answered: it follows nothing now
        lines.append("  no sources followed: `codechunkd add PATH` adds one")
    elif not sources:
        lines.append("  nothing indexed yet: run `codechunkd run PATH` or `codechunkd index PATH`")
    for s in sources:
        lines.append(f"  {s['repo']}  [{source_label(s)}]")
        lines.append(f"    {_heads_text(s)}")
        lines.append(
            f"    {s.get('files', 0):,} files, {s.get('chunks', 0):,} chunks, "
            f"{len(s.get('dirty') or {})} dirty files, updated {_when(s.get('updated_at'))}"
        )
        if s.get("skipped"):
            lines.append(f"    {skipped_text(s['skipped'])}")
        if "text_chunks" in s:
            lines.append(f"    {coverage_text(s)}")
        progress = s.get("progress")
        if progress:
            lines.append(f"    progress: {progress_text(progress)}")
        if "pending_paths" in s:
            batch = s.get("last_batch") or {}
            what = (
                f"{batch.get('trigger')}: +{batch.get('added', 0)} ~{batch.get('changed', 0)} "
                f"-{batch.get('deleted', 0)}, {batch.get('embedded', 0)} embedded "
                f"in {batch.get('seconds', 0):.2f}s"
                if batch
                else "none"
            )
            if batch.get("seeded"):
                what += f", {batch['seeded']} from the seed"
            if batch.get("fill_paused"):
                what += ", its vector fill paused for other work"
            if batch.get("truncated"):
                what += f"; {truncated_text(batch['truncated'])}"
            lines.append(
                f"    pending {s.get('pending_paths', 0)} paths"
                + (f" ({s['pending_level']})" if s.get("pending_level") else "")
                + f"; last batch {_ago(batch.get('ago_s'))} ({what})"
            )
            if batch.get("seed_skipped"):
                lines.append(f"    seed skipped: {batch['seed_skipped']}")
            watcher = s.get("watcher") or {}
            if watcher.get("degraded"):
                lines.append(f"    watcher degraded: {watcher['degraded']}")
            if s.get("failing"):
                lines.append(f"    failing: {s['failing']} (retried until a sync succeeds)")
            if s.get("errors"):
                lines.append(f"    errors: {s['errors']}, last: {s.get('last_error')}")
    return "\n".join(lines)


def source_label(s: Mapping[str, Any]) -> str:
    """What is true of a source, in a word or two.

    ``indexing``: this daemon is working on it (or has it queued); ``interrupted``: a
    previous run left it half-written and no daemon is repairing it now; ``stale``:
    behind HEAD.  A daemon state other than ready or indexing is appended.
    """
    if s.get("fresh"):
        label = "fresh"
    elif s.get("busy_s") or s.get("progress") or s.get("pending_level"):
        label = "indexing"
    elif s.get("pending"):
        label = "interrupted"
    else:
        label = "stale"
    state = s.get("state")
    if state and state not in ("ready", "indexing", label):
        label = f"{label}, {state}"
    return label


def skipped_text(skipped: Mapping[str, int]) -> str:
    """``not indexed: compiled 212, lockfile 1``: the files' ``skip_reason``, as
    ``codechunkd index`` prints its ``skipped``."""
    return "not indexed: " + ", ".join(f"{k} {v:,}" for k, v in sorted(skipped.items()))


def partial_text(partial: Mapping[str, Any]) -> str:
    """``412/1,765 files indexed so far (a first index is running; results may be missing)``:
    a daemon's ``partial`` answer, as ``search`` and the MCP ``search`` tool say it."""
    done, total = partial.get("files_done", 0), partial.get("files_total", 0)
    counted = f"{done:,}/{total:,} files" if total else "the first files"
    return f"{counted} indexed so far (a first index is running; results may be missing)"


def truncated_text(count: int) -> str:
    """What ``truncated`` chunks are: longer than the model's window, embedded by their head."""
    chunks = "chunk" if count == 1 else "chunks"
    return f"{count:,} {chunks} longer than the model's window (only the head embedded)"


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h12m``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


def _model_state(d: Mapping[str, Any]) -> str:
    loading = d.get("model_loading_s")
    if loading is not None:
        return f"loading ({duration(loading)}: export, calibration)"
    return "loaded" if d.get("model_loaded") else "unloaded"


def coverage_text(c: Mapping[str, Any]) -> str:
    """``text 2,303/2,303 chunks · vectors 412/2,303``: what answers by full text, and what
    by vector too (``text_chunks``, ``vector_chunks``)."""
    n = f"{c.get('text_chunks', 0):,}"
    return f"text {n}/{n} chunks · vectors {c.get('vector_chunks', 0):,}/{n}"


def progress_text(p: Mapping[str, Any]) -> str:
    """``412/1,765 files, 3,120 chunks (2,900 embedded, 220 reused), 21.3 chunks/s, ETA 4m10s``;
    a text-first write: ``writing text (vectors fill in after): 412/1,765 files written,
    9,800 chunks, 2,100.0 chunks/s, ETA 3s``; its fill: ``vectors 412/2,303 chunks,
    12/1,900 texts embedded, ETA 4m10s``;
    a model load: ``loading the model (1m05s); 166/166 files written``."""
    eta = f"ETA {duration(p['eta_s']) if p.get('eta_s') is not None else '?'}"
    activity = p.get("activity")
    written = f"{p.get('files_done', 0):,}/{p.get('files_total', 0):,} files written"
    pace = f"{p.get('chunks_per_second', 0.0):,.1f} chunks/s"
    if activity == "loading the model":
        return f"loading the model ({duration(p.get('activity_s', 0.0))}); {written}"
    if activity == "writing text":
        chunks = f"{p.get('chunks', 0):,} chunks"
        return f"writing text (vectors fill in after): {written}, {chunks}, {pace}, {eta}"
    if activity == "filling vectors":
        written = f"; {written}" if p.get("files_total") else ""  # none: a fill taken up again
        return (
            f"vectors {p.get('vectors', 0):,}/{p.get('chunks', 0):,} chunks, "
            f"{p.get('fill_embedded', 0):,}/{p.get('fill_texts', 0):,} texts embedded{written}, "
            + eta
        )
    return (
        f"{p.get('files_done', 0):,}/{p.get('files_total', 0):,} files, "
        f"{p.get('embedded', 0) + p.get('reused', 0):,} chunks "
        f"({p.get('embedded', 0):,} embedded, {p.get('reused', 0):,} reused), {pace}, {eta}"
    )


def _rerank_line(r: Mapping[str, Any]) -> str:
    """``rerank: URL (model M), 2 searches ranked without it, last 5s ago: HTTP 503``."""
    text = f"rerank: {r.get('url')} (model {r.get('model')})"
    failed = r.get("failed") or 0
    if not failed:
        return text + ", no search ranked without it"
    return (
        f"{text}, {failed} search{'es' if failed != 1 else ''} ranked without it, "
        f"last {_ago(r.get('last_failed_s_ago'))}: {r.get('last_error')}"
    )


def _summaries_line(m: dict[str, Any]) -> str:
    if not m.get("enabled"):
        return f"summaries: off ({m.get('reason') or 'no endpoint configured'})"
    run = m.get("last_run") or {}
    today = m.get("today") or {}
    text = f"summaries: {m.get('backlog')} stale ({m.get('source')})"
    if run:
        text += f"; last run {run.get('written', 0)} written"
    text += f"; today {today.get('chunks', 0)} chunks, {today.get('tokens', 0)} tokens"
    if m.get("retry_in_s"):
        text += f"; backing off {m['retry_in_s']:.0f}s"
    return text


# -- the snapshot: what the daemon (or state.json) knows, as typed values ------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceSnapshot:
    """One source as the index records it, and what a running daemon is doing with it."""

    record: Mapping[str, Any]
    """Its entry in ``state.json`` (commit, branch, dirty, pending, files, chunks, ...)."""
    head: str | None
    """HEAD now (None: unborn, or not read)."""
    head_branch: str
    head_read: bool = True
    """False when HEAD was not read (the systemd line reads no git): freshness is then
    the daemon's own (``synced``)."""
    live: bool = False
    """A running daemon follows this source (the fields below are its view)."""
    synced: bool = False
    """The daemon has synced it since it started."""
    pending_paths: int = 0
    """Paths waiting: queued, plus edits whose sync failed and waits for a retry."""
    pending_level: str | None = None
    waiting_s: float = 0.0
    busy_s: float = 0.0
    stuck_s: float = 0.0
    progress: Mapping[str, Any] | None = None
    """The running sync's ``SyncProgress.as_dict()``."""
    last_batch: Mapping[str, Any] | None = None
    errors: int = 0
    consecutive_failures: int = 0
    last_error: str | None = None
    failing: str | None = None
    """Why the last sync failed, until a reconcile succeeds."""
    watcher: Mapping[str, Any] | None = None
    table: Mapping[str, Any] | None = None
    """What the table holds now (``storage.coverage.table_counts``): its ``files`` and
    ``chunks`` replace the recorded ones, which lag behind a running sync; ``skipped``
    counts the files recorded without chunks by reason."""

    @property
    def fresh(self) -> bool:
        if self.record.get("pending"):
            return False
        if not self.head_read:
            return self.synced
        return (self.synced or not self.live) and self.head == self.record.get("commit")


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonSnapshot:
    """The running daemon's own facts."""

    pid: int
    version: str
    started_at: str
    uptime_s: float
    caught_up: bool
    """Every source has had its first sync (or keeps failing)."""
    writer_healthy: bool
    stall_after_s: float
    model_loaded: bool
    model_loading_s: float | None = None
    """Seconds the model has been loading (export, calibration); None when not loading."""
    cache: Mapping[str, Any] | None = None
    watcher: Mapping[str, Any] | None = None
    jobs: Mapping[str, Any] = field(default_factory=dict)
    summaries: Mapping[str, Any] = field(default_factory=dict)
    rerank: Mapping[str, Any] | None = None
    """The reranking server searches ask and the searches it failed (None: none set)."""
    socket: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusSnapshot:
    """Everything ``status`` says, before it is a document."""

    daemon: DaemonSnapshot | None
    """None: no daemon answers (``stopped_state`` says how it looked)."""
    index: str
    index_bytes: int | None = None
    sources: tuple[SourceSnapshot, ...] = ()
    stopped_state: str = "stopped"
    """``stopped``, or ``stalled`` when a socket exists but nobody answers."""
    stopped_reason: str | None = None
    stopped_pid: int | None = None
    """The pid holding the index's lock, when a daemon runs but does not answer."""


def source_document(s: SourceSnapshot, *, stall_after: float) -> dict[str, Any]:
    doc = dict(s.record, head=s.head, head_branch=s.head_branch, fresh=s.fresh)
    if s.table is not None:
        doc.update(s.table)
    if not s.live:
        return doc
    doc.update(
        pending_paths=s.pending_paths,
        pending_level=s.pending_level,
        waiting_s=round(s.waiting_s, 3),
        busy_s=round(s.busy_s, 3),
        stuck_s=round(s.stuck_s, 3),
        progress=dict(s.progress) if s.progress else None,
        last_batch=dict(s.last_batch) if s.last_batch else None,
        errors=s.errors,
        consecutive_failures=s.consecutive_failures,
        last_error=s.last_error,
        failing=s.failing,
        watcher=dict(s.watcher) if s.watcher else None,
    )
    doc["state"] = source_state(doc, stall_after=stall_after)
    return doc


def document(snap: StatusSnapshot) -> dict[str, Any]:
    """The status document (``status --json``, the control socket's ``status``)."""
    d = snap.daemon
    if d is None:
        daemon: dict[str, Any] = {"state": snap.stopped_state, "reason": snap.stopped_reason}
        if snap.stopped_pid is not None:
            daemon["pid"] = snap.stopped_pid
        sources = [source_document(s, stall_after=0.0) for s in snap.sources]
    else:
        sources = [source_document(s, stall_after=d.stall_after_s) for s in snap.sources]
        state = daemon_state(s["state"] for s in sources)
        if not d.caught_up and state == "ready":
            state = "indexing"
        if not d.writer_healthy:
            state = "stalled"
        daemon = {
            "state": state,
            "pid": d.pid,
            "version": d.version,
            "started_at": d.started_at,
            "uptime_s": round(d.uptime_s, 1),
            "model_loaded": d.model_loaded,
            "model_loading_s": (
                round(d.model_loading_s, 1) if d.model_loading_s is not None else None
            ),
            "cache": dict(d.cache) if d.cache is not None else None,
            "watcher": dict(d.watcher) if d.watcher is not None else None,
            "jobs": dict(d.jobs),
            "summary_backlog": d.summaries.get("backlog"),
            "summaries": dict(d.summaries),
            "rerank": dict(d.rerank) if d.rerank is not None else None,
            "socket": d.socket,
        }
    return {
        "daemon": daemon,
        "index": snap.index,
        "index_bytes": snap.index_bytes,
        "sources": sources,
    }


def _progress_coverage(p: Mapping[str, Any]) -> dict[str, int]:
    """The coverage a running sync has reached (the systemd line reads no table)."""
    return {"text_chunks": p.get("chunks", 0), "vector_chunks": p.get("vectors", 0)}


def status_line(snap: StatusSnapshot) -> str:
    """The one-line state for systemd's ``STATUS=``: the state, and a running sync's pace."""
    doc = document(snap)
    state = doc["daemon"]["state"]
    pending = sum(s.get("pending_paths") or 0 for s in doc["sources"])
    line = f"{state}: {len(doc['sources'])} source(s), {pending} path(s) pending"
    for s in doc["sources"]:
        if s.get("progress"):
            p = s["progress"]
            line += f"; {os.path.basename(s['repo'])}: {progress_text(p)}"
            if p.get("chunks"):
                line += f" ({coverage_text(_progress_coverage(p))})"
        elif s.get("failing"):
            line += f"; {os.path.basename(s['repo'])}: failing: {s['failing']}"
    return line
