"""The daemon's sources: which to serve, adding and removing them, and reloads.

It owns the list of sources (``specs``: the command line, the settings, ``sources.json``),
each one's ``SourceRuntime`` coming and going (``add_source`` watches it and queues its
first reconcile; ``remove_source``), and the two halves of a reload: ``reload`` re-reads
the settings on the main thread, ``apply_reload`` applies them on the writer, between
syncs (a new syncer, the queue's and jobs' timings, the sources added and removed).  It
must not sync anything itself (``writer.py``) nor touch threads (``service.py``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from codechunkd import logs
from codechunkd.daemon.control import SourceSpec, merge_sources, read_sources
from codechunkd.daemon.debounce import Level, Task
from codechunkd.daemon.runtime import Daemon, SourceRuntime
from codechunkd.errors import CodechunkdError, ConfigError, SourceMissing
from codechunkd.git.changes import GitSource

log = logs.get_logger("codechunkd.daemon")


def specs(service: Daemon) -> list[SourceSpec]:
    """The sources to serve: the command line's, the settings', ``sources.json``'s."""
    configured = [SourceSpec.parse(s) for s in service.settings.daemon.sources]
    listed = read_sources(service.paths.meta / "sources.json")
    service.listed = listed
    return merge_sources(service.cli_specs, configured, listed)


def add_source(service: Daemon, spec: SourceSpec, *, strict: bool = False) -> None:
    """Watch ``spec`` and queue its first reconcile; ``strict``: a bad path raises.  One
    that cannot be opened (not there: a disk not mounted yet, a folder moved) is kept in
    ``service.unavailable``, shown by ``status`` and tried again (``retry_unavailable``)."""
    try:
        git = GitSource(spec.path, ref=spec.ref)
    except (CodechunkdError, ValueError) as exc:  # ValueError: a NUL, a lone surrogate
        if strict:
            raise
        why = str(SourceMissing(spec.path)) if not os.path.lexists(spec.path) else str(exc)
        if service.unavailable.get(spec) != why:
            log.error("source_unavailable", source=str(spec), error=why)
        service.unavailable[spec] = why
        return
    if git.source.id in service.sources:
        service.unavailable.pop(spec, None)
        return
    rt = SourceRuntime(spec=spec, git=git)
    state = service.store.state(git.source.id) if service.store else None
    if state is not None and state.pending is None:
        rt.indexed = (state.commit, state.branch)
    assert service.watcher is not None
    rt.watch = service.watcher.add(git.source)
    service.sources[rt.id] = rt
    if service.unavailable.pop(spec, None) is not None:  # after: status always lists it
        log.info("source_back", repo=git.source.repo)
    service.queue.put(rt.id, level=Level.RECONCILE, urgent=True)


def retry_unavailable(service: Daemon) -> None:
    """Try again to open the sources that could not be (the writer's ``Task.SOURCES``, which
    the main loop queues with back-off while any is left)."""
    for spec in list(service.unavailable):
        add_source(service, spec)


def remove_source(service: Daemon, source_id: str) -> None:
    """Stop watching a source and drop its queued work (its rows stay)."""
    rt = service.sources.pop(source_id, None)
    if rt is None:
        return
    service.queue.drop(source_id)
    if service.watcher is not None:
        service.watcher.remove(source_id)
    log.info("source_removed", repo=rt.git.source.repo)


def request_reload(service: Daemon, _req: Mapping[str, Any]) -> dict[str, bool]:
    """The control socket's ``reload``: the main loop reloads at its next turn."""
    service.reload_requested = True
    service.wake.set()
    return {"ok": True}


def reload(service: Daemon) -> None:
    """Re-read settings and the sources list (main thread); the writer applies them."""
    try:
        new = service.load_settings() if service.load_settings else service.settings
    except ConfigError as exc:
        log.error("reload_failed", error=str(exc))
        return
    old = service.settings
    if new.embedding != old.embedding or new.index != old.index:
        log.warning("reload_needs_restart", sections=["embedding", "index"])
        new = dataclasses.replace(new, embedding=old.embedding, index=old.index)
    service.next_settings = new
    service.queue.submit(Task.RELOAD)


def apply_reload(service: Daemon) -> None:
    """The writer's half of a reload (a task between syncs): settings, syncer, sources."""
    new = service.next_settings or service.settings
    service.next_settings = None
    assert service.store is not None and service.embedder is not None and service.cache is not None
    service.settings = new
    before = service.syncer.fingerprint if service.syncer is not None else None
    if service.syncer is not None:
        service.syncer.close()  # between syncs (this is the writer's task): no batch in flight
    service.syncer = service.make_syncer(new)
    if before is not None and service.syncer.fingerprint != before:
        # what is indexed changed (files.exclude, the size limit, chunking): apply it now,
        # not at the next periodic reconcile (newly excluded files must not stay searchable)
        reconcile_all(service)
    d = new.daemon
    service.queue.configure(
        quiet=d.debounce_ms / 1000, max_delay=d.max_delay_ms / 1000, max_paths=d.max_paths
    )
    if service.upkeep is not None:
        service.upkeep.reschedule("reconcile", d.reconcile_interval_s)
        service.upkeep.reschedule("degraded_reconcile", d.degraded_reconcile_s)
        service.upkeep.reschedule("compact", d.compact_interval_s)
    try:
        wanted = specs(service)
    except ConfigError as exc:  # sources.json damaged by hand: keep serving what is served
        log.error("sources_list_damaged", error=str(exc))
        return
    have = {rt.spec: sid for sid, rt in service.sources.items()}
    for spec, sid in have.items():
        if spec not in wanted:
            remove_source(service, sid)
    for spec in list(service.unavailable):
        if spec not in wanted:
            del service.unavailable[spec]
    for spec in wanted:
        if spec not in have:
            add_source(service, spec)
    log.info("reloaded", sources=[str(rt.spec) for rt in service.sources.values()])


def reconcile_all(service: Daemon) -> None:
    """Queue a reconcile of every source (the periodic job; a reload that changed what is
    indexed)."""
    for rt in list(service.sources.values()):
        service.queue.put(rt.id, level=Level.RECONCILE, urgent=True)
