"""Chunking on worker processes, for a change of several batches.

tree-sitter holds Python's lock while it parses, so the one thread that reads and chunks
the next batch (``BatchReader.prepared``) tops out at ~1-3 MB of source a second: enough for
a CPU embedder (~10-170 texts/s), far too little for a GPU or a remote server (~10k
texts/s, ~6 MB/s).  With ``index.chunk_workers`` > 1 that thread still reads the blobs
(pygit2 stays in the indexing process) and hands the bytes to ``spawn`` worker processes,
which run :func:`codechunkd.pipeline.prepare.prepare_bytes`: the same decisions as the
in-process path (skips, replacement decoding, ``chunking_failed``, the grammar guard of
``chunking/_guard.py``, whose trial parses then run in a child of the worker).

A worker that dies (killed, out of memory) fails the batch with a :class:`ChunkingError`
that says how it ended (nothing of the batch is written, the source's state does not
advance) and the next batch starts new workers.  The workers are a
:class:`codechunkd.procs.WorkerPool`, as for :func:`codechunkd.chunk_many`: each has a pipe
of its own, watched together with its process, so a death at any instant, even halfway
through writing a result, is an error and never a read that waits for ever
(``ProcessPoolExecutor`` shares one result pipe among its workers, and its reader hung on
a result cut short).
"""

from __future__ import annotations

import logging
from typing import Final

from codechunkd.config.settings import Settings
from codechunkd.errors import ChunkingError
from codechunkd.git.changes import FileVersion
from codechunkd.pipeline.prepare import Prepared, prepare_many
from codechunkd.platform import usable_cpus
from codechunkd.procs import WorkerDied, WorkerPool

__all__ = ["ChunkPool", "chunk_workers"]

#: Most automatic workers. The cap dates from when a change's vectors were computed with
#: its text (8 processes then outran any embedder measured); with text first
#: (``pipeline/fill.py``) chunking waits on no model, so more workers would bring a big
#: machine's repository to text-searchable sooner, each with its own parsers in memory. Not
#: measured past 2 cores: ``scripts/device_bench.sh`` runs ``bench/chunking.py`` on 16.
AUTO_MAX: Final = 8
#: A task's size bounds: large enough to amortise pickling, small enough that one batch
#: spreads over every worker.
_TASK_MIN_BYTES: Final = 32 * 1024
_TASK_MAX_BYTES: Final = 256 * 1024


def chunk_workers(settings: Settings) -> int:
    """How many processes chunk: the setting, or for 0 one per usable CPU (at most
    ``AUTO_MAX``; 1, in this process, on one CPU).

    The workers chunk only a change of several batches, and such a change is written text
    first (``pipeline/fill.py``): its vectors are computed after its last file is written,
    so the workers never compete with a CPU embedder for the cores.  While they chunk,
    this process reads the blobs and writes the rows (on an idle 2-core VM, 1,000 stdlib
    files were all text-searchable in 9.2-9.8 s with 2 workers against 11.3-11.9 s with
    none: ``bench/firstrun.py --files 1000``, three runs each).
    """
    n = settings.index.chunk_workers
    if n:
        return n
    return min(usable_cpus(), AUTO_MAX)


def _worker_init(log_level: int) -> None:
    """A worker logs like its parent: on stderr, never stdout."""
    from codechunkd import logs

    logs.configure(level=log_level)


class ChunkPool:
    """``workers`` processes that decode and chunk files read by this one, in input order.

    Started at the first batch of a change of several batches that holds at least
    :attr:`min_bytes` (a ``spawn`` start costs ~1 s, small beside such a change; a change of
    small batches is chunked in the indexing process) and ended with it
    (``BatchReader.prepared``), so a daemon holds no idle workers; replaced after a worker
    died.
    """

    def __init__(self, workers: int, settings: Settings) -> None:
        self.workers = workers
        self.settings = settings
        self._pool: WorkerPool[list[Prepared]] = WorkerPool(
            workers,
            prepare_many,
            (settings,),
            name="codechunkd-chunk",
            initializer=_worker_init,
            initargs=(logging.getLogger().level,),
        )

    @property
    def min_bytes(self) -> int:
        """A batch's bytes below which, while no worker is up, it is chunked in the
        indexing process: less than a smallest task per worker, which the workers would
        not even share (a change of small files in many batches never starts them)."""
        return self.workers * _TASK_MIN_BYTES

    @property
    def running(self) -> bool:
        """Whether the workers are up (from their first batch to the change's end)."""
        return self._pool.running

    @property
    def started(self) -> int:
        """Worker processes started so far (a pool replaced after a death starts more)."""
        return self._pool.started

    @property
    def tasks_done(self) -> int:
        """Tasks the workers have sent back."""
        return self._pool.tasks_done

    def prepare(self, files: list[tuple[FileVersion, bytes]]) -> list[Prepared]:
        """``prepare_bytes`` of each file, in order; raises ChunkingError if a worker died."""
        if not files:
            return []
        tasks = self._tasks(files)
        try:
            return [p for done in self._pool.map(tasks, ahead=len(tasks)) for p in done]
        except WorkerDied as exc:
            raise ChunkingError(
                f"a chunking worker process died (pid {exc.pid}, {exc.how}): nothing of "
                "this batch was written, and the next sync chunks it again on new workers"
            ) from exc

    def _tasks(
        self, files: list[tuple[FileVersion, bytes]]
    ) -> list[list[tuple[FileVersion, bytes]]]:
        """``files`` in consecutive tasks of about a twice-the-workers share of their bytes."""
        total = sum(len(raw) for _, raw in files)
        target = min(_TASK_MAX_BYTES, max(_TASK_MIN_BYTES, total // (2 * self.workers)))
        tasks: list[list[tuple[FileVersion, bytes]]] = [[]]
        size = 0
        for item in files:
            if size >= target:
                tasks.append([])
                size = 0
            tasks[-1].append(item)
            size += len(item[1])
        return tasks

    def close(self, *, now: bool = False) -> None:
        """End the workers: asked to stop, then killed if they do not within 5 s (at once
        with ``now``: a batch that failed has nothing left for them to finish)."""
        self._pool.close(now=now)
