"""A cold build spread over a Ray cluster (``codechunkd index --engine ray``).

The driver is an ordinary ``Syncer``: the change set, the plan, the pending mark and
the state advanced only after the last batch are ``Syncer.sync``'s own, so a killed
driver leaves the state pending and the next run (local or Ray) repairs it. Only the
middle differs: each batch of ``index.batch_files`` files is a Ray task that opens the
repository with pygit2, reads, chunks and embeds its files (each worker has its own
embedder, looks vectors up in the embedding cache and the seed first) and returns the
rows; the driver writes each batch with ``IndexStore.write_batch`` as it arrives, one
commit per batch, so Lance keeps its single writer. A worker lost mid-task is retried
by Ray (``MAX_RETRIES``).

This module is the only one that imports Ray, and only when a build asks for it: the
single-machine path never loads it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import structlog

from codechunkd.config.settings import Settings
from codechunkd.embedding.embedder import make_embedder
from codechunkd.errors import CodechunkdError
from codechunkd.git.changes import ChangeSet, FileVersion, GitSource, SourceKind
from codechunkd.pipeline.sync import Progress, Syncer, SyncReport, _Meter
from codechunkd.storage.cache import EmbeddingCache
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.store import IndexedFile, IndexStore

log = structlog.get_logger("codechunkd.distributed")

MAX_RETRIES = 3
"""Times Ray reruns a batch whose worker died (a task is pure: rerunning it is safe)."""

IN_FLIGHT_PER_CPU = 2
"""Batches submitted per cluster CPU at a time: workers never wait for the driver, and
the driver holds at most this many batches of rows (memory stays bounded)."""


class RayUnavailable(CodechunkdError):
    """``--engine ray`` without Ray installed, or with a cluster that cannot be reached."""


def import_ray() -> Any:
    """The ``ray`` module, or a one-line error saying how to get it."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable("the ray engine needs Ray: pip install 'codechunkd[ray]'") from exc
    return ray


@contextlib.contextmanager
def ray_session(address: str | None) -> Iterator[None]:
    """Connected to a cluster for the block: ``address`` (or ``$RAY_ADDRESS``), else a
    local one started here and stopped after. A session already open is reused as is."""
    ray = import_ray()
    if ray.is_initialized():
        yield
        return
    try:
        with warnings.catch_warnings():
            # a local cluster's processes are forked and exec at once: Lance is never used there
            warnings.filterwarnings("ignore", "lance is not fork-safe", UserWarning)
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {exc}") from exc
    try:
        yield
    finally:
        ray.shutdown()


@dataclasses.dataclass(frozen=True, slots=True)
class _Job:
    """What every task of one build needs (shipped once, through the object store)."""

    settings: Settings
    path: str
    """Where the worker opens the repository (the same path on every node: shared or
    identical checkouts, as the cluster's nodes see them)."""
    ref: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class _Done:
    rows: list[IndexedFile]
    report: SyncReport
    node: str
    """The Ray node that made the rows (another node's embedding cache is not ours)."""


_WORKER_SYNCERS: dict[tuple[str, str], Syncer] = {}
"""One ``Syncer`` per worker process and index: the model is loaded once per worker."""


def _worker_syncer(settings: Settings) -> Syncer:
    paths = IndexPaths.of(settings)
    key = (paths.uri, repr(settings.embedding))
    syncer = _WORKER_SYNCERS.get(key)
    if syncer is None:
        # no state file: only the driver writes state; the store is never written here
        store = IndexStore(paths.uri, storage_options=paths.storage_options)
        cache = EmbeddingCache(paths.cache, max_entries=settings.embedding.cache_size)
        syncer = Syncer(settings, store, make_embedder(settings.embedding), cache)
        _WORKER_SYNCERS[key] = syncer
    return syncer


def index_slice(job: _Job, versions: Sequence[FileVersion]) -> _Done:
    """One Ray task: read, chunk and embed ``versions``; the rows go back to the driver."""
    import ray

    syncer = _worker_syncer(job.settings)
    report = SyncReport()
    rows = syncer.index_files(GitSource(job.path, ref=job.ref), versions, report)
    return _Done(rows=rows, report=report, node=ray.get_runtime_context().get_node_id())


def _merge(into: SyncReport, part: SyncReport) -> None:
    into.embedded += part.embedded
    into.reused += part.reused
    into.seeded += part.seeded
    into.replaced_utf8 += part.replaced_utf8
    into.truncated += part.truncated
    into.skipped.update(part.skipped)
    if part.seed_skipped and not into.seed_skipped:
        into.seed_skipped = part.seed_skipped


class RaySyncer(Syncer):
    """``Syncer`` whose reading, chunking and embedding run as Ray tasks (see the module)."""

    def _apply(
        self,
        git: GitSource,
        changes: ChangeSet,
        todo: Sequence[FileVersion],
        deletes: Sequence[str],
        known: set[str],
        report: SyncReport,
        progress: Progress | None,
    ) -> None:
        ray = import_ray()
        size = self.settings.index.batch_files
        meter = _Meter(len(todo) + len(deletes), report, progress)
        meter.report(0)
        done = 0
        for i in range(0, len(deletes), size):  # deletes need no worker
            dels = deletes[i : i + size]
            self._write(git, changes, [], dels, new=False)
            done += len(dels)
            meter.report(done)
        source = git.source
        path = source.repo if source.kind is SourceKind.WORKTREE else source.git_dir
        job = ray.put(_Job(settings=self.settings, path=path, ref=source.ref))
        task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(index_slice)
        here = ray.get_runtime_context().get_node_id()
        window = max(2, IN_FLIGHT_PER_CPU * int(ray.cluster_resources().get("CPU", 1)))
        batches = iter([todo[i : i + size] for i in range(0, len(todo), size)])
        running: dict[Any, Sequence[FileVersion]] = {}
        while True:
            for batch in batches:
                running[task.remote(job, batch)] = batch
                if len(running) >= window:
                    break
            if not running:
                break
            (ref,), _ = ray.wait(list(running), num_returns=1)
            batch = running.pop(ref)
            got: _Done = ray.get(ref)
            _merge(report, got.report)
            if got.node != here:  # keep this machine's cache whole for the daemon
                self.cache.put_many(
                    self.embedder.model_id,
                    {c.embed_hash: c.vector for f in got.rows for c in f.chunks},
                )
            new = not any(v.path in known for v in batch)
            report.chunks += self._write(git, changes, got.rows, [], new=new)
            done += len(batch)
            meter.report(done)
            del got
            self.upkeep()

    def _write(
        self,
        git: GitSource,
        changes: ChangeSet,
        rows: Sequence[IndexedFile],
        dels: Sequence[str],
        *,
        new: bool,
    ) -> int:
        self.store.write_batch(
            git.source, changes.head, rows, dels, model_id=self.embedder.model_id, new=new
        )
        written = sum(len(f.chunks) for f in rows)
        log.info(
            "batch_committed",
            repo=git.source.repo,
            files=len(rows),
            deleted=len(dels),
            chunks=written,
            engine="ray",
        )
        return written
