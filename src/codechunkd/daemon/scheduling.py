"""The daemon's scheduled jobs: what runs on APScheduler's thread, and when.

It owns the jobs ``Upkeep`` runs (``schedule``): the periodic and the degraded
reconciles, compaction, the idle unload of the model, and the summaries; and the
scheduler's half of a summary run (``fetch_summaries``: requests into the cache, then a
``SUMMARIES`` task for the writer, which writes them).  A job only posts work to the
queue, but the idle unload, which takes the model's turn; none writes the index (the
writer does), and none may wait on the writer.
"""

from __future__ import annotations

import functools

from codechunkd import logs
from codechunkd.daemon.debounce import Level, Task
from codechunkd.daemon.jobs import Upkeep
from codechunkd.daemon.runtime import Daemon
from codechunkd.daemon.sources import reconcile_all
from codechunkd.errors import ConfigError
from codechunkd.pipeline.summarize import Summarizer, open_summarizer

log = logs.get_logger("codechunkd.daemon")


def schedule(service: Daemon, upkeep: Upkeep) -> None:
    """Add the daemon's jobs to ``upkeep`` (each only posts work, but the idle unload)."""
    d = service.settings.daemon
    upkeep.add("reconcile", d.reconcile_interval_s, functools.partial(reconcile_all, service))
    upkeep.add(
        "degraded_reconcile",
        d.degraded_reconcile_s,
        functools.partial(reconcile_degraded, service),
        recorded=True,
    )
    upkeep.add(
        "compact", d.compact_interval_s, lambda: service.queue.submit(Task.COMPACT), recorded=True
    )
    if d.idle_unload_s > 0:
        upkeep.add(
            "idle_unload", max(5.0, d.idle_unload_s / 4), functools.partial(unload_if_idle, service)
        )
    if service.summarizer is not None and service.summarizer.enabled:
        every = service.settings.summaries.interval_s
        upkeep.add("summaries", every, functools.partial(fetch_summaries, service))


def open_summaries(service: Daemon) -> Summarizer | None:
    """The summarizer, or None with the reason kept for ``status`` (bad settings)."""
    assert service.store is not None
    try:
        return open_summarizer(
            service.settings, service.store, reader=service.reader, stop=service.stop_flag
        )
    except ConfigError as exc:
        log.error("summaries_unavailable", error=str(exc))
        service.summaries_error = str(exc)
        return None


def fetch_summaries(service: Daemon) -> None:
    """The scheduler's half of a summary run: requests into the cache, no table write."""
    if service.summarizer is None or service.summary_run is not None:
        return
    run = service.summarizer.fetch()
    if run.stopped_by != "disabled":
        service.summary_run = run
        service.queue.submit(Task.SUMMARIES)


def reconcile_degraded(service: Daemon) -> None:
    """Reconcile the degraded sources; a run is counted only when there was one."""
    degraded = [rt for rt in service.sources.values() if rt.watch and rt.watch.degraded]
    for rt in degraded:
        service.queue.put(rt.id, level=Level.RECONCILE, urgent=True)
    if degraded and service.upkeep is not None:
        service.upkeep.record("degraded_reconcile", None)


def unload_if_idle(service: Daemon, idle: float | None = None) -> bool:
    """Unload the model if unused for ``idle`` s (default ``daemon.idle_unload_s``)."""
    if service.embedder is None:
        return False
    return service.embedder.unload_if_idle(
        service.settings.daemon.idle_unload_s if idle is None else idle
    )
