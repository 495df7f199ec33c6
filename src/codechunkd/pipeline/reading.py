"""Reading and chunking a change's files: one batch ahead of the embedder, on another
thread, with the chunk workers when there are any (``index.chunk_workers``).

It owns ``Chunked`` (one file as the pipeline carries it: its chunks, or a skip with its
reason), ``BatchReader`` (batches read and chunked one ahead: ``prepared``; one batch:
``read_batch``; one file: ``index_file``) and the counting and logging of skips and
replacement decoding.  It reads the git source only: it must not embed (that is
``pipeline/vectors.py``) nor write anything (``pipeline/batches.py``).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from codechunkd import logs
from codechunkd.chunking.chunker import Chunk, CountTokens
from codechunkd.config.settings import Settings
from codechunkd.git.changes import FileVersion, GitSource
from codechunkd.git.files import read_raw
from codechunkd.pipeline.prepare import Prepared, prepare_bytes, prepare_file
from codechunkd.pipeline.report import SyncReport
from codechunkd.pipeline.workers import ChunkPool

log = logs.get_logger("codechunkd.sync")

#: One batch: the files to index and the paths to delete with them.
Work: TypeAlias = tuple[Sequence[FileVersion], Sequence[str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Chunked:
    """One file read and chunked, or skipped with a reason."""

    version: FileVersion
    language: str
    chunks: list[Chunk]
    skip_reason: str | None = None


class BatchReader:
    """The files of a change read and chunked, in order (a skip is a file with a reason)."""

    def __init__(
        self, settings: Settings, count_tokens: CountTokens, chunk_pool: ChunkPool | None
    ) -> None:
        self.settings = settings
        self.count_tokens = count_tokens
        self.chunk_pool = chunk_pool
        """Worker processes that chunk a multi-batch change (``index.chunk_workers``)."""

    def close(self) -> None:
        """End the chunking worker processes, if any were started (idempotent)."""
        if self.chunk_pool is not None:
            self.chunk_pool.close()

    def prepared(
        self,
        git: GitSource,
        work: Sequence[Work],
        report: SyncReport,
    ) -> Iterator[tuple[Work, list[Chunked], float]]:
        """Batches read and chunked one ahead, on another thread, while this one embeds.

        The queue holds one prepared batch: memory stays bounded by two batches
        whatever the size of the change, and the embedder (the bottleneck) never
        waits for reading or parsing.
        """
        if len(work) <= 1:  # nothing to overlap with
            for only in work:
                t0 = time.monotonic()
                read = [self.index_file(git, v, report) for v in only[0]]
                yield only, read, time.monotonic() - t0
            return
        out: queue.Queue[tuple[int, list[Chunked], float] | BaseException] = queue.Queue(maxsize=1)
        stop = threading.Event()

        def produce() -> None:
            try:
                for i, (batch, _) in enumerate(work):
                    if stop.is_set():
                        return
                    t0 = time.monotonic()
                    read = self.read_batch(git, batch, report)
                    out.put((i, read, time.monotonic() - t0))
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer, re-raised there
                out.put(exc)

        # daemon: a process that abandons a batch at shutdown must not wait for this thread
        producer = threading.Thread(target=produce, name="sync-prepare", daemon=True)
        producer.start()
        try:
            for _ in work:
                got = out.get()
                if isinstance(got, BaseException):
                    raise got
                i, read, seconds = got
                yield work[i], read, seconds
        finally:
            stop.set()
            while producer.is_alive():  # unblock a producer waiting on a full queue
                with contextlib.suppress(queue.Empty):
                    out.get(timeout=0.05)
            self.close()  # a daemon keeps no idle chunking workers between large changes

    def read_batch(
        self, git: GitSource, batch: Sequence[FileVersion], report: SyncReport
    ) -> list[Chunked]:
        """One batch read and chunked: in this thread, or with chunk workers read here
        (pygit2 stays in this process) and decoded and chunked on the workers, in order."""
        pool = self.chunk_pool
        if pool is None:
            return [self.index_file(git, v, report) for v in batch]
        done: list[Prepared | None] = []  # None: chunked by the workers, in this order
        raws: list[tuple[FileVersion, bytes]] = []
        for v in batch:
            version, raw = read_raw(
                git,
                v,
                max_size=self.settings.files.max_file_size,
                skip_lock_files=self.settings.files.skip_generated,
            )
            if isinstance(raw, str):
                done.append(Prepared(version=version, skip_reason=raw))
            else:
                done.append(None)
                raws.append((version, raw))
        if not pool.running and sum(len(raw) for _, raw in raws) < pool.min_bytes:
            # too little to spread over the workers: starting them (~0.5 CPU-s and ~1 s of
            # wall each) would cost more than chunking it here
            mine = iter(
                [prepare_bytes(v, raw, self.settings, self.count_tokens) for v, raw in raws]
            )
        else:
            mine = iter(pool.prepare(raws))
        return [self._chunked(p if p is not None else next(mine), report) for p in done]

    def index_file(self, git: GitSource, version: FileVersion, report: SyncReport) -> Chunked:
        """Read and chunk one file (a skip is a file with a reason and no chunks)."""
        assert version.blob is not None
        return self._chunked(prepare_file(git, version, self.settings, self.count_tokens), report)

    def _chunked(self, done: Prepared, report: SyncReport) -> Chunked:
        """A prepared file as the pipeline carries it; its skip or decoding counted, logged."""
        version = done.version
        if done.replaced_utf8:
            report.replaced_utf8 += 1
            log.info("decoded_with_replacement", path=version.shown, reason="not valid UTF-8")
        if done.error is not None:
            log.warning("chunking_failed", path=version.shown, error=done.error)
        if done.skip_reason is not None:
            if done.skip_reason == "unreadable":
                log.warning("file_unreadable", path=version.shown)
            return self._skip(done.version, done.skip_reason, report)
        return Chunked(version=done.version, language=done.language, chunks=done.chunks)

    @staticmethod
    def _skip(version: FileVersion, reason: str, report: SyncReport) -> Chunked:
        report.skipped[reason] += 1
        return Chunked(version=version, language="", chunks=[], skip_reason=reason)
