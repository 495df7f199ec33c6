"""The writer: the one thread that writes the index, one unit of work at a time.

It owns what the writer does with each unit the ``ChangeQueue`` hands out (``step``):
the queued tasks (compaction, the model's warm-up, a reload, the summaries' write) and
each due burst of changes, synced source by source (``sync``), with the bookkeeping of
every ``SourceRuntime`` that status shows (busy, progress, errors, back-off, the last
batch) and readiness (``ready``, once every source has been synced or keeps failing).
It writes ``progress_at``, ``batches``, ``ready`` and the runtimes; it must not start or
stop threads (``service.py``), nor decide when work is due (the queue and the jobs).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import structlog

from codechunkd import logs
from codechunkd.daemon.debounce import Level, Pending, Task, Work
from codechunkd.daemon.runtime import Daemon, SourceRuntime
from codechunkd.daemon.sources import apply_reload, retry_unavailable
from codechunkd.errors import CodechunkdError, SourceMissing, StoreError
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.progress import SyncProgress
from codechunkd.pipeline.report import SyncReport
from codechunkd.storage.lease import writer_problem

log = logs.get_logger("codechunkd.daemon")


def _did_something(report: Mapping[str, Any]) -> bool:
    """A sync report (``SyncReport.as_dict``) that changed rows or files."""
    return any(report[k] for k in ("added", "changed", "deleted", "renamed", "chunks"))


def writer_loop(service: Daemon) -> None:
    """The writer thread: every unit of work the queue hands out, until it closes."""
    while True:
        work = service.queue.get()
        if work is None:
            return
        try:
            step(service, work)
        except Exception:
            log.exception("writer_step_failed")


def step(service: Daemon, work: Work) -> None:
    """Run one unit of work: queued tasks, then every due burst."""
    for task in work.tasks:
        run_task(service, task)
    for source_id, pending in work.changes.items():
        if service.queue.closed:
            log.info("changes_abandoned", sources=len(work.changes))
            return
        rt = service.sources.get(source_id)
        if rt is not None:
            sync(service, rt, pending)
    if not service.ready.is_set() and all(
        rt.synced or rt.consecutive_failures for rt in service.sources.values()
    ):
        service.ready.set()
        service.wake.set()
        service.queue.submit(Task.WARMUP)


def sync(service: Daemon, rt: SourceRuntime, pending: Pending) -> None:
    """One sync of one source; a failure is logged, counted and retried with back-off."""
    assert service.syncer is not None
    level = pending.level
    kwargs: dict[str, Any] = {}
    try:
        present(service, rt)
        head = rt.git.head() if level is Level.HEAD else None
    except Exception as exc:  # noqa: BLE001 - as a failed sync: logged, counted, retried
        _failed(service, rt, pending, exc)
        return
    same_head = head is not None and rt.indexed == (head.commit, head.branch)
    if same_head and not pending.paths:
        return  # another ref moved (a fetch): nothing to do
    if level is Level.PATHS or same_head:
        kwargs["paths"] = sorted(pending.paths)
    elif level is Level.FULL:
        kwargs["full"] = True
    if level >= Level.RESCAN and rt.watch is not None:
        rt.watch.refresh()
    started = service.clock()
    lag_ms = round((started - pending.first_at) * 1000)
    rt.busy_since = started
    service.progress_at = started
    structlog.contextvars.bind_contextvars(
        batch_id=uuid.uuid4().hex[:8], trigger=level.name.lower(), lag_ms=lag_ms
    )
    try:
        problem = writer_problem(service.lock)  # its index directory deleted: write nothing
        if problem:
            raise StoreError(problem)
        report = service.syncer.sync(
            rt.git,
            progress=functools.partial(_progress, service, rt),
            yield_to=service.queue.wanted,  # a first index's fill lets edits through
            **kwargs,
        )
    except Exception as exc:  # noqa: BLE001 - logged, counted, retried with back-off
        _failed(service, rt, pending, exc)
        return
    finally:
        rt.busy_since = None
        rt.progress = None
        structlog.contextvars.unbind_contextvars("batch_id", "trigger", "lag_ms")
    if report.fill_paused:  # its vector fill gave way: taken up again after what waits
        service.queue.put(rt.id, urgent=True)
    _synced(service, rt, pending, lag_ms, report)


def _failed(service: Daemon, rt: SourceRuntime, pending: Pending, exc: Exception) -> None:
    """A sync that failed: counted, its paths kept for the retry, retried with back-off."""
    rt.errors += 1
    rt.consecutive_failures += 1
    rt.last_error = str(exc) or type(exc).__name__
    rt.failing = rt.last_error
    rt.unsaved |= pending.paths
    backoff = min(300.0, 2.0 ** min(rt.consecutive_failures, 9))
    rt.retry_at = service.clock() + backoff
    log.error("sync_failed", repo=rt.git.source.repo, error=rt.last_error, retry_s=backoff)
    service.wake.set()


def present(service: Daemon, rt: SourceRuntime) -> None:
    """``SourceMissing`` when the source's repository is gone (moved away, deleted, an
    unmounted disk): its rows stay, the sync is retried with back-off.  One that is back
    (moved back, cloned again) is opened and watched anew: the repository read before,
    and the watches (which follow a moved folder), may be of another folder now."""
    if rt.git.present() and not rt.missing:
        return
    repo = rt.git.source.repo
    try:
        git = GitSource(rt.spec.path, ref=rt.spec.ref)
    except (CodechunkdError, ValueError):  # ValueError: pygit2 on an odd path
        git = None
    if git is None or git.source.id != rt.id or not git.present():
        rt.missing = True
        raise SourceMissing(repo)
    rt.git = git
    rt.missing = False
    if service.watcher is not None:
        service.watcher.remove(rt.id)
        rt.watch = service.watcher.add(git.source)
    log.info("source_back", repo=repo)


def _synced(
    service: Daemon, rt: SourceRuntime, pending: Pending, lag_ms: int, report: SyncReport
) -> None:
    """After a sync that succeeded: nothing owed any more, the last batch recorded."""
    level = pending.level
    if level >= Level.RECONCILE:  # the whole source was looked at: nothing is owed
        rt.failing = None
        rt.unsaved.clear()
    else:
        rt.unsaved -= pending.paths
    rt.consecutive_failures = 0
    rt.retry_at = None
    rt.synced = True
    rt.indexed = (report.commit, report.branch)
    doc = report.as_dict()
    if rt.last_batch is not None and not _did_something(doc):
        return  # a reconcile that found nothing: the last batch stays the last real one
    rt.last_batch_at = service.clock()
    rt.last_batch = {
        "trigger": level.name.lower(),
        "lag_ms": lag_ms,
        "at": datetime.now(UTC).isoformat(),
        **{
            k: doc[k]
            for k in (
                "added",
                "changed",
                "deleted",
                "renamed",
                "embedded",
                "reused",
                "seeded",
                "seed_skipped",
                "chunks",
                "truncated",
                "fill_paused",
            )
        },
        "seconds": doc["seconds"],
    }
    if report.chunks or report.deleted:
        service.batches += 1


def run_task(service: Daemon, task: Task) -> None:
    """One queued task (compaction, warm-up, reload, the summaries' write)."""
    assert service.store is not None and service.upkeep is not None
    if task is Task.COMPACT:
        error: BaseException | None = None
        try:
            assert service.syncer is not None
            service.syncer.upkeep(force=True)  # compaction, version pruning, index refresh
        except Exception as exc:  # noqa: BLE001 - counted in the job's stats
            error = exc
            log.error("compact_failed", error=str(exc))
        service.upkeep.record("compact", error)
    elif task is Task.WARMUP:
        assert service.embedder is not None
        try:
            service.embedder.embed(["warm up"])
        except CodechunkdError as exc:
            log.error("model_warmup_failed", error=str(exc))
    elif task is Task.RELOAD:
        apply_reload(service)
    elif task is Task.SOURCES:
        retry_unavailable(service)
    elif task is Task.SUMMARIES:
        run, service.summary_run = service.summary_run, None
        if run is not None and service.summarizer is not None:
            try:
                service.summarizer.finish(run)  # writes the summaries: the writer's half
            except CodechunkdError as exc:
                log.error("summaries_write_failed", error=str(exc))


def _progress(service: Daemon, rt: SourceRuntime, progress: SyncProgress) -> None:
    """The running sync's progress callback: what it did, and that it moved."""
    rt.progress = progress
    service.progress_at = service.clock()
