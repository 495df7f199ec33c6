"""A cold build spread over a Ray cluster (``codechunkd index --engine ray``).

The driver is an ordinary ``Syncer``: the change set, the plan, the pending mark and
the state advanced only after the last batch are ``Syncer.sync``'s own, so a killed
driver leaves the state pending and the next run (local or Ray) repairs it. Only the
middle differs: each batch of ``index.batch_files`` files is a Ray task
(``index_slice``) that opens the repository with pygit2, reads, chunks and embeds its
files (each worker has its own embedder, and looks vectors up in the embedding cache
and the seed first). A worker lost mid-task is retried by Ray (``MAX_RETRIES``).

Where the rows go depends on the batch:

- A batch none of whose paths has rows (a cold build: the point of this engine) is
  written by the worker itself as Lance data files (``IndexStore.write_fragments``)
  that no version of the table references; the worker returns their metadata (a few
  hundred bytes). The driver commits what has come back in one transaction
  (``IndexStore.commit_fragments``) every ``COMMIT_ROWS`` rows or ``COMMIT_EVERY_S``
  seconds and at the end, so there are a few bounded commits, not one per batch, and
  the rows never cross the network twice.
- A batch with a path that has rows (a rebuild, a repair after a crash) must replace
  each file's old rows atomically, which an append cannot do: its worker returns the
  rows and the driver writes them with ``IndexStore.write_batch`` (one ``merge_insert``
  per batch, as the local engine does).

After each commit the driver runs ``Syncer.upkeep`` as the local engine does after each
batch (full-text and vector indexes over the new rows, folds). Data files written but
never committed (the driver killed, or a retried task's first attempt) are deleted by
the next Ray build before it hands out any work, and by whichever engine's next sync
finds the state pending (``Syncer.remove_interrupted_writes``).

The index must be reachable from every worker at the URI the driver uses: a path all
nodes share, or ``s3://`` (the driver's resolved ``storage_options`` travel with the
job, so workers need no credentials of their own).

This module is the only one that imports Ray, and only when a build asks for it: the
single-machine path never loads it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from codechunkd import logs
from codechunkd.config.settings import Settings
from codechunkd.embedding.embedder import make_embedder
from codechunkd.errors import CodechunkdError
from codechunkd.git.changes import ChangeSet, FileVersion, GitSource, Head, Source, SourceKind
from codechunkd.pipeline.order import Rank
from codechunkd.pipeline.progress import Progress, _Meter
from codechunkd.pipeline.report import SyncReport
from codechunkd.pipeline.sync import Syncer
from codechunkd.storage.cache import EmbeddingCache
from codechunkd.storage.fragments import FragmentBatch
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.rows import IndexedFile
from codechunkd.storage.store import IndexStore

log = logs.get_logger("codechunkd.distributed")

MAX_RETRIES = 3
"""Times Ray reruns a batch whose worker died (a task writes only data files no version
references: rerunning it is safe)."""

IN_FLIGHT_PER_CPU = 2
"""Batches submitted per cluster CPU at a time: workers never wait for the driver, and
the driver holds at most this many batches of results (memory stays bounded)."""

COMMIT_ROWS = 65_536
"""The driver commits the data files that have come back once they hold this many rows
(one table version per ~30 default batches: few commits, few fragments to fold)."""

COMMIT_EVERY_S = 60.0
"""... or once the oldest uncommitted one is this old: a killed driver loses at most about
this much work, and a long build becomes searchable as it goes."""

CONNECT_TIMEOUT_S = 5.0
"""How long ``--address`` may take to accept a TCP connection. Ray itself retries an
unreachable address for minutes (and ignores SIGTERM meanwhile)."""


class RayEngineError(CodechunkdError):
    """The Ray engine cannot build: Ray missing, the cluster unreachable, or its workers
    unable to embed as the driver does."""

    exit_code = 9


class RayUnavailable(RayEngineError):
    """``--engine ray`` without Ray installed, or with a cluster that cannot be reached."""


def import_ray() -> Any:
    """The ``ray`` module, or a one-line error saying how to get it."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable("the ray engine needs Ray: pip install 'codechunkd[ray]'") from exc
    return ray


def _probe(address: str) -> None:
    """Refuse at once an ``host:port`` address nothing listens on (``auto`` and other
    forms are left to Ray)."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {reason}") from None


@contextlib.contextmanager
def ray_session(address: str | None) -> Iterator[None]:
    """Connected to a cluster for the block: ``address`` (or ``$RAY_ADDRESS``), else a
    local one started here and stopped after. A session already open is reused as is."""
    ray = import_ray()
    if ray.is_initialized():
        yield
        return
    if address:
        _probe(address)
    try:
        with warnings.catch_warnings():
            # a local cluster's processes are forked and exec at once: Lance is never used there
            warnings.filterwarnings("ignore", "lance is not fork-safe", UserWarning)
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
        # e.g. AuthenticationError: the cluster wants a token ($RAY_AUTH_TOKEN) not given here
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RayUnavailable(f"cannot join the Ray cluster at {address}: {reason}") from exc
    try:
        yield
    finally:
        ray.shutdown()


def placement(cluster: Mapping[str, float], settings: Settings) -> dict[str, float]:
    """The Ray resources one batch task asks for.

    A GPU per ``index.ray_gpus_per_task`` when the cluster has GPUs and the embedder is
    configured for CUDA (``embedding.device``, ``torch`` backend); one CPU otherwise. The
    embedding settings travel unchanged with the job, so every worker computes the model
    id the driver does (the table's and the cache's key). A CUDA embedder on a cluster
    without GPUs is an error here rather than a failure in every task.
    """
    emb = settings.embedding
    gpus = float(cluster.get("GPU", 0.0))
    cuda = emb.backend == "torch" and emb.device.startswith("cuda")
    if cuda and gpus > 0:
        return {"num_cpus": 1, "num_gpus": settings.index.ray_gpus_per_task}
    if cuda:
        raise RayEngineError(
            f"embedding.device is {emb.device!r} but the Ray cluster has no GPU: "
            "set embedding.device = 'cpu' or add GPU nodes"
        )
    return {"num_cpus": 1}


@dataclasses.dataclass(frozen=True, slots=True)
class _Job:
    """What every task of one build needs (shipped once, through the object store)."""

    settings: Settings
    path: str
    """Where the worker opens the repository (the same path on every node: shared or
    identical checkouts, as the cluster's nodes see them)."""
    ref: str | None
    source: Source
    head: Head
    uri: str
    """The index, as the driver opened it."""
    storage_options: dict[str, str]
    """The driver's resolved object-store options (credentials included): a worker's
    environment need not hold them."""
    model_id: str
    """The driver's embedder's: a worker whose own differs refuses to embed."""
    driver_node: str
    """The driver's Ray node: vectors made elsewhere travel back for the driver's cache."""
    cache: str
    """The driver's embedding cache, which the workers on its node use: they need not share
    its environment (an ``s3://`` index's cache is under the driver's state directory)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Done:
    report: SyncReport
    rows: list[IndexedFile]
    """The rows, for the driver to write (a batch with paths that have rows); else empty."""
    written: FragmentBatch | None
    """The data files the worker wrote (a batch of new paths); else None."""
    vectors: dict[str, npt.NDArray[np.float32]]
    """Vectors embedded on another node than the driver's, for the driver's cache (the
    daemon that keeps this index fresh runs there); empty on the driver's node, whose
    workers share its cache."""


_WORKER_SYNCERS: dict[tuple[str, str, str], Syncer] = {}
"""One ``Syncer`` per worker process and index: the model is loaded once per worker."""


def _worker_syncer(job: _Job, node: str) -> Syncer:
    settings = job.settings
    key = (job.uri, repr(settings.embedding), job.cache)
    syncer = _WORKER_SYNCERS.get(key)
    if syncer is None:
        # no state file: only the driver writes state and commits to the table
        store = IndexStore(job.uri, storage_options=job.storage_options)
        # the driver's cache on its node, whatever this worker's environment; else this node's
        path = Path(job.cache) if node == job.driver_node else IndexPaths.of(settings).cache
        cache = EmbeddingCache(path, max_entries=settings.embedding.cache_size)
        syncer = Syncer(settings, store, make_embedder(settings.embedding), cache)
        _WORKER_SYNCERS[key] = syncer
    if syncer.embedder.model_id != job.model_id:
        raise RayEngineError(
            f"a Ray worker embeds as {syncer.embedder.model_id}, the driver as {job.model_id}"
        )
    return syncer


def index_slice(job: _Job, versions: Sequence[FileVersion], write: bool) -> _Done:
    """One Ray task: read, chunk and embed ``versions``; ``write``: store the rows as data
    files (none of the paths has rows), else hand them back to the driver."""
    import ray

    here = ray.get_runtime_context().get_node_id()
    syncer = _worker_syncer(job, here)
    report = SyncReport()
    rows = syncer.index_files(GitSource(job.path, ref=job.ref), versions, report)
    vectors = (
        {c.embed_hash: c.vector for f in rows for c in f.chunks if c.vector is not None}
        if here != job.driver_node
        else {}
    )
    if not write:
        return _Done(report=report, rows=rows, written=None, vectors=vectors)
    written = syncer.store.write_fragments(job.source, job.head, rows, model_id=job.model_id)
    return _Done(report=report, rows=[], written=written, vectors=vectors)


def _merge(into: SyncReport, part: SyncReport) -> None:
    into.embedded += part.embedded
    into.reused += part.reused
    into.seeded += part.seeded
    into.seed_refused += part.seed_refused
    into.replaced_utf8 += part.replaced_utf8
    into.truncated += part.truncated
    into.skipped.update(part.skipped)
    if part.seed_skipped and not into.seed_skipped:
        into.seed_skipped = part.seed_skipped


class RaySyncer(Syncer):
    """``Syncer`` whose reading, chunking and embedding run as Ray tasks, and whose new
    files' rows are written by the workers (see the module)."""

    def _apply(
        self,
        git: GitSource,
        changes: ChangeSet,
        todo: Sequence[FileVersion],
        deletes: Sequence[str],
        known: set[str],
        report: SyncReport,
        progress: Progress | None,
        rank: Rank,
    ) -> None:
        ray = import_ray()
        size = self.settings.index.batch_files
        meter = _Meter(len(todo) + len(deletes), report, progress)
        meter.report(0)
        # before any task runs: the data files of a killed build are nobody's write now
        self.remove_interrupted_writes()  # also a retried task's first attempt, state or not
        done = self._delete(git, changes, deletes, meter)
        if not todo:
            return
        resources = placement(ray.cluster_resources(), self.settings)
        job = self._job(ray, git, changes)
        task = ray.remote(max_retries=MAX_RETRIES, **resources)(index_slice)
        window = max(2, IN_FLIGHT_PER_CPU * int(ray.cluster_resources().get("CPU", 1)))
        batches = iter([todo[i : i + size] for i in range(0, len(todo), size)])
        running: dict[Any, Sequence[FileVersion]] = {}
        waiting: list[FragmentBatch] = []
        waiting_since = 0.0
        while True:
            for batch in batches:
                write = not any(v.path in known for v in batch)
                running[task.remote(job, batch, write)] = batch
                if len(running) >= window:
                    break
            if not running:
                break
            (ref,), _ = ray.wait(list(running), num_returns=1)
            batch = running.pop(ref)
            got: _Done = self._result(ray, ref)
            _merge(report, got.report)
            if got.vectors:  # keep this machine's cache whole for the daemon
                self.cache.put_many(self.embedder.model_id, got.vectors)
            if got.written is not None:
                if not waiting:
                    waiting_since = time.monotonic()
                waiting.append(got.written)
            else:
                report.chunks += self._write(git, changes, got.rows, [])
                self.upkeep()
            done += len(batch)
            del got
            rows = sum(w.chunks for w in waiting)
            if waiting and (
                not running
                or rows >= COMMIT_ROWS
                or time.monotonic() - waiting_since >= COMMIT_EVERY_S
            ):
                report.chunks += self._commit(git, waiting)
                waiting = []
                self.upkeep()
            meter.report(done)

    def _delete(
        self, git: GitSource, changes: ChangeSet, deletes: Sequence[str], meter: _Meter
    ) -> int:
        """The deletes, written by the driver in batches (they need no worker): how many."""
        size = self.settings.index.batch_files
        done = 0
        for i in range(0, len(deletes), size):
            dels = deletes[i : i + size]
            self._write(git, changes, [], dels)
            done += len(dels)
            meter.report(done)
        return done

    def _job(self, ray: Any, git: GitSource, changes: ChangeSet) -> Any:
        """What every task of this build needs, put once into Ray's object store."""
        source = git.source
        path = source.repo if source.kind is SourceKind.WORKTREE else source.git_dir
        paths = IndexPaths.of(self.settings)
        here = ray.get_runtime_context().get_node_id()
        return ray.put(
            _Job(
                settings=self.settings,
                path=path,
                ref=source.ref,
                source=source,
                head=changes.head,
                uri=self.store.uri,
                storage_options=paths.storage_options,
                model_id=self.embedder.model_id,
                driver_node=here,
                cache=str(self.cache.path),
            )
        )

    @staticmethod
    def _result(ray: Any, ref: Any) -> _Done:
        """A task's result; a codechunkd error raised in the task is raised here as itself
        (one line), not as Ray's wrapper with the worker's traceback."""
        try:
            got: _Done = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, CodechunkdError):
                raise exc.cause from None
            raise
        return got

    def _commit(self, git: GitSource, waiting: Sequence[FragmentBatch]) -> int:
        self._still_writer()  # a driver whose lease was taken over commits nothing more
        written = self.store.commit_fragments(waiting)
        log.info(
            "batch_committed",
            repo=git.source.repo,
            files=sum(w.files.num_rows for w in waiting),
            deleted=0,
            chunks=written,
            fragments=sum(len(w.fragments) for w in waiting),
            engine="ray",
        )
        return written

    def _write(
        self,
        git: GitSource,
        changes: ChangeSet,
        rows: Sequence[IndexedFile],
        dels: Sequence[str],
    ) -> int:
        self._still_writer()
        self.store.write_batch(
            git.source, changes.head, rows, dels, model_id=self.embedder.model_id, new=False
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
