"""Chunking on worker processes, for an embedder fast enough to wait for it.

tree-sitter holds Python's lock while it parses, so the one thread that reads and chunks
the next batch (``Syncer._prepared``) tops out at ~1-3 MB of source a second: enough for
a CPU embedder (~10-170 texts/s), far too little for a GPU or a remote server (~10k
texts/s, ~6 MB/s).  With ``index.chunk_workers`` > 1 that thread still reads the blobs
(pygit2 stays in the indexing process) and hands the bytes to ``spawn`` worker processes,
which run :func:`codechunkd.pipeline.prepare.prepare_bytes`: the same decisions as the
in-process path (skips, replacement decoding, ``chunking_failed``, the grammar guard of
``chunking/_guard.py``, whose trial parses then run in a child of the worker).

A worker that dies (killed, out of memory) fails the batch with a :class:`ChunkingError`
(nothing of it is written, the source's state does not advance) and the next batch starts
new workers.  Each worker has a pipe of its own, watched together with its process: a
death at any instant, even halfway through writing a result, is an end of file on that
pipe or its process's sentinel, never a read that waits for ever (``ProcessPoolExecutor``
shares one result pipe among its workers, and its reader hung on a result cut short).
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Final

from codechunkd.config.settings import Settings
from codechunkd.errors import ChunkingError
from codechunkd.git.changes import FileVersion
from codechunkd.pipeline.prepare import Prepared, prepare_many
from codechunkd.platform import usable_cpus

__all__ = ["ChunkPool", "chunk_workers"]

#: Most automatic workers: past 8, chunking outruns any embedder measured (issue #20:
#: ``chunk_many`` did 12.8 MB/s on 4 processes).
AUTO_MAX: Final = 8
#: A task's size bounds: large enough to amortise pickling, small enough that one batch
#: spreads over every worker.
_TASK_MIN_BYTES: Final = 32 * 1024
_TASK_MAX_BYTES: Final = 256 * 1024


def chunk_workers(settings: Settings) -> int:
    """How many processes chunk: the setting, or for 0 what the embedder needs.

    Only an embedder that outruns one chunking thread gets more than 1: the ``remote``
    backend and ``torch`` on a GPU.  ``onnx`` and ``torch`` on the CPU already use the
    cores (their threads or sessions), and ~10-170 texts/s is ~10-100 KB/s of source.
    """
    n = settings.index.chunk_workers
    if n:
        return n
    e = settings.embedding
    fast = e.backend == "remote" or (e.backend == "torch" and e.device.startswith("cuda"))
    return max(1, min(usable_cpus() - 1, AUTO_MAX)) if fast else 1


def _worker_main(conn: Connection, log_level: int, settings: Settings) -> None:
    """A worker: logs like its parent (on stderr, never stdout), leaves Ctrl-C to it (the
    terminal's SIGINT reaches the whole process group, and the parent ends the workers),
    and prepares the tasks its pipe brings until told to stop or the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from codechunkd import logs

    logs.configure(level=log_level)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        task_id, task = message
        conn.send((task_id, prepare_many(task, settings)))


@dataclass(slots=True)
class _Worker:
    process: BaseProcess
    conn: Connection
    task: int | None = None
    """The task it is working on."""


class ChunkPool:
    """``workers`` processes that decode and chunk files read by this one, in input order.

    Started at the first batch of a change of several batches (a ``spawn`` start costs
    ~1 s, small beside such a change) and ended with it (``Syncer._prepared``), so a daemon
    holds no idle workers; replaced after a worker died.
    """

    def __init__(self, workers: int, settings: Settings) -> None:
        self.workers = workers
        self.settings = settings
        self._procs: list[_Worker] = []
        self.started = 0
        """Worker processes started so far (a pool replaced after a death starts more)."""
        self.tasks_done = 0
        """Tasks the workers have sent back."""

    def prepare(self, files: list[tuple[FileVersion, bytes]]) -> list[Prepared]:
        """``prepare_bytes`` of each file, in order; raises ChunkingError if a worker died."""
        if not files:
            return []
        tasks = self._tasks(files)
        try:
            results = self._run(self._start(), tasks)
        except (EOFError, OSError) as exc:  # a pipe whose worker is gone
            self.close(now=True)
            raise self._died() from exc
        return [p for i in range(len(tasks)) for p in results[i]]

    def _run(
        self, workers: list[_Worker], tasks: list[list[tuple[FileVersion, bytes]]]
    ) -> dict[int, list[Prepared]]:
        """Hand ``tasks`` to idle workers until every result is back."""
        todo = deque(enumerate(tasks))
        results: dict[int, list[Prepared]] = {}
        while len(results) < len(tasks):
            for w in workers:
                if w.task is None and todo:
                    w.task, task = todo.popleft()
                    w.conn.send((w.task, task))
            busy = {w.conn: w for w in workers if w.task is not None}
            ready = wait([*busy, *(w.process.sentinel for w in workers)])
            for conn in (r for r in ready if r in busy):
                done, prepared = busy[conn].conn.recv()
                results[done] = prepared
                self.tasks_done += 1
                busy[conn].task = None
            if any(not w.process.is_alive() for w in workers):
                self.close(now=True)
                raise self._died()
        return results

    @staticmethod
    def _died() -> ChunkingError:
        return ChunkingError(
            "a chunking worker process died (killed, or out of memory): nothing of this "
            "batch was written, and the next sync chunks it again on new workers"
        )

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

    def _start(self) -> list[_Worker]:
        if not self._procs:
            import multiprocessing

            ctx = multiprocessing.get_context("spawn")  # fork is unsafe in a threaded program
            level = logging.getLogger().level
            for _ in range(self.workers):
                mine, theirs = ctx.Pipe()
                proc = ctx.Process(
                    target=_worker_main,
                    args=(theirs, level, self.settings),
                    name="codechunkd-chunk",
                    daemon=True,
                )
                proc.start()
                theirs.close()  # the worker's end lives in the worker only: its death is EOF
                self._procs.append(_Worker(proc, mine))
                self.started += 1
        return self._procs

    def close(self, *, now: bool = False) -> None:
        """End the workers: asked to stop, then killed if they do not within 5 s (at once
        with ``now``: a batch that failed has nothing left for them to finish)."""
        procs, self._procs = self._procs, []
        for w in procs:
            with contextlib.suppress(OSError):  # already gone
                w.conn.send(None)
        for w in procs:
            w.process.join(0 if now else 5)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
            w.conn.close()
            w.process.close()
