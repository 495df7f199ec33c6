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

from collections.abc import Iterable, Mapping
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
