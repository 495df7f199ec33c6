"""The status document: states, exit codes and the text rendering.

The daemon builds the document (``Service.status``); ``codechunkd status``
prints it, or, with no daemon running, builds a ``stopped`` one from
``state.json``.  Both go through ``exit_code`` so monitors see one contract:

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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codechunkd.daemon.service import Service

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
    if watcher.get("degraded") or (s.get("consecutive_failures") or 0) >= 3:
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


def render_text(doc: Mapping[str, Any]) -> str:
    d = doc.get("daemon") or {}
    lines = []
    state = d.get("state", "stopped")
    if state == "stopped":
        why = d.get("reason")
        lines.append("daemon: stopped" + (f" ({why})" if why else ""))
    else:
        cache = d.get("cache") or {}
        watch = d.get("watcher") or {}
        lines.append(
            f"daemon: {state}  pid {d.get('pid')}, up {d.get('uptime_s', 0):.0f}s, "
            f"model {'loaded' if d.get('model_loaded') else 'unloaded'}, "
            f"cache hit rate {cache.get('hit_rate', 0.0):.0%}, "
            f"watches {watch.get('watches', 0)}/{watch.get('limit', '?')}"
        )
        lines.append(_summaries_line(d.get("summaries") or {}))
    size = doc.get("index_bytes")
    lines.append(f"index: {doc.get('index')}" + (f" ({size / 1e6:.1f} MB)" if size else ""))
    sources = doc.get("sources") or []
    if not sources:
        lines.append("  nothing indexed yet: run `codechunkd run PATH` or `codechunkd index PATH`")
    for s in sources:
        if s.get("fresh"):
            label = "fresh"
        else:
            label = "interrupted" if s.get("pending") else "stale"
        if s.get("state") and s["state"] != "ready":
            label = f"{label}, {s['state']}"
        lines.append(f"  {s['repo']}  [{label}]")
        lines.append(
            f"    branch {s.get('head_branch')}, HEAD {(s.get('head') or 'unborn')[:10]}, "
            f"indexed {(s.get('commit') or 'unborn')[:10]} on {s.get('branch')}"
        )
        lines.append(
            f"    {s.get('files', 0)} files, {s.get('chunks', 0)} chunks, "
            f"{len(s.get('dirty') or {})} dirty files, updated {s.get('updated_at')}"
        )
        if "pending_paths" in s:
            batch = s.get("last_batch") or {}
            what = (
                f"{batch.get('trigger')}: +{batch.get('added', 0)} ~{batch.get('changed', 0)} "
                f"-{batch.get('deleted', 0)}, {batch.get('embedded', 0)} embedded "
                f"in {batch.get('seconds', 0):.2f}s"
                if batch
                else "none"
            )
            lines.append(
                f"    pending {s.get('pending_paths', 0)} paths"
                + (f" ({s['pending_level']})" if s.get("pending_level") else "")
                + f"; last batch {_ago(batch.get('ago_s'))} ({what})"
            )
            watcher = s.get("watcher") or {}
            if watcher.get("degraded"):
                lines.append(f"    watcher degraded: {watcher['degraded']}")
            if s.get("errors"):
                lines.append(f"    errors: {s['errors']}, last: {s.get('last_error')}")
    return "\n".join(lines)


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


# -- built by the daemon (imports stay inside: the CLI imports this module) -----------


def build_status(service: Service) -> dict[str, Any]:
    """The daemon's status document (the control socket's ``status``)."""
    # counted now (one filtered count_rows, 0.03-0.1 s at 100k rows): an edit shows at once
    summaries: dict[str, Any] = (
        service.summarizer.status(refresh=True)
        if service.summarizer
        else {"enabled": False, "reason": service.summaries_error or "not started", "backlog": None}
    )
    from codechunkd import __version__
    from codechunkd.errors import CodechunkdError
    from codechunkd.git.changes import GitSource
    from codechunkd.storage.store import read_state_file

    now = service.clock()
    stall = service.settings.daemon.stall_after_s
    doc = read_state_file(service.paths.state_file) or {}
    stored = {s.get("source"): s for s in doc.get("sources", [])}
    sources: list[dict[str, Any]] = []
    for rt in list(service.sources.values()):
        src = rt.git.source
        s: dict[str, Any] = dict(
            stored.get(src.id)
            or {
                "source": src.id,
                "kind": str(src.kind),
                "repo": src.repo,
                "git_dir": src.git_dir,
                "ref": src.ref,
                "branch": None,
                "commit": None,
                "dirty": {},
                "pending": None,
                "files": 0,
                "chunks": 0,
                "updated_at": None,
            }
        )
        try:
            head = GitSource(rt.spec.path, ref=rt.spec.ref).head()
            s["head"], s["head_branch"] = head.commit, head.branch
        except CodechunkdError:
            s["head"], s["head_branch"] = None, "?"
        npaths, level, first = service.queue.pending(rt.id)
        s["fresh"] = bool(rt.synced and s["head"] == s["commit"] and not s["pending"])
        s["pending_paths"] = npaths
        s["pending_level"] = level.name.lower() if level is not None else None
        s["waiting_s"] = round(now - first, 3) if first is not None else 0.0
        s["busy_s"] = round(now - rt.busy_since, 3) if rt.busy_since is not None else 0.0
        s["stuck_s"] = round(service.stuck_s(rt, now), 3)
        s["last_batch"] = (
            dict(rt.last_batch, ago_s=round(now - (rt.last_batch_at or now), 3))
            if rt.last_batch
            else None
        )
        s["errors"] = rt.errors
        s["consecutive_failures"] = rt.consecutive_failures
        s["last_error"] = rt.last_error
        s["watcher"] = rt.watch.health() if rt.watch is not None else None
        s["state"] = source_state(s, stall_after=stall)
        sources.append(s)
    state = daemon_state(s["state"] for s in sources)
    if not service.ready.is_set() and state == "ready":
        state = "indexing"
    if not service.writer_healthy():
        state = "stalled"
    cache = service.cache.stats() if service.cache is not None else None
    return {
        "daemon": {
            "state": state,
            "pid": os.getpid(),
            "version": __version__,
            "started_at": service.started_wall.isoformat(),
            "uptime_s": round(now - service.started_at, 1),
            "model_loaded": bool(service.embedder and service.embedder.loaded),
            "cache": {
                "hits": cache.hits,
                "misses": cache.misses,
                "entries": cache.entries,
                "hit_rate": round(cache.hit_rate, 4),
            }
            if cache
            else None,
            "watcher": service.watcher.health() if service.watcher else None,
            "jobs": service.upkeep.as_dict() if service.upkeep else {},
            "summary_backlog": summaries.get("backlog"),
            "summaries": summaries,
            "socket": str(service.paths.socket),
        },
        "index": service.paths.uri,
        "index_bytes": service.index_bytes(),
        "sources": sources,
    }


def status_line(service: Service) -> str:
    """The one-line state for systemd, from memory only (no git, no index reads)."""
    now = service.clock()
    stall = service.settings.daemon.stall_after_s
    states, pending = [], 0
    for rt in list(service.sources.values()):
        npaths, level, first = service.queue.pending(rt.id)
        pending += npaths
        doc = {
            "fresh": rt.synced,
            "pending_paths": npaths,
            "pending_level": level,
            "waiting_s": now - first if first is not None else 0.0,
            "busy_s": now - rt.busy_since if rt.busy_since is not None else 0.0,
            "stuck_s": service.stuck_s(rt, now),
            "consecutive_failures": rt.consecutive_failures,
            "watcher": rt.watch.health() if rt.watch is not None else None,
        }
        states.append(source_state(doc, stall_after=stall))
    state = daemon_state(states) if service.writer_healthy() else "stalled"
    return f"{state}: {len(states)} source(s), {pending} path(s) pending"
