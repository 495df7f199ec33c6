"""Where a running sync is: ``SyncProgress`` values for the caller (status, the terminal
of ``codechunkd index``) and a ``progress`` log line at most every ``PROGRESS_LOG_S``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from codechunkd import logs
from codechunkd.pipeline.fill import FillReport


class Counts(Protocol):
    """What the meter reads of a sync's report (``pipeline.sync.SyncReport``)."""

    repo: str
    chunks: int
    vectorless: int
    embedded: int
    reused: int
    seeded: int


log = logs.get_logger("codechunkd.sync")


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncProgress:
    """Where a running sync is: reported after each embedded slice and each committed batch."""

    files_done: int
    """Files written (committed, or waiting in the batch being embedded); a text-first write
    commits them without their vectors, which the fill then sets (``fill_*``)."""
    files_total: int
    """Files to index plus paths to delete in this sync."""
    chunks: int
    """Chunks written to the table so far; during a fill, every row of the source."""
    vectors: int = 0
    """Of them, chunks whose vector is in the table."""
    embedded: int
    """Chunks whose vectors were computed so far."""
    reused: int
    """Chunks whose vectors came from the cache so far."""
    seconds: float
    """Since the sync started."""
    activity: str = "indexing"
    """``indexing`` (embedding each batch before its commit), ``writing text`` (a text-first
    write: every file committed without vectors), ``loading the model`` (a first run exports
    it and calibrates threads), or ``filling vectors`` (``pipeline/fill.py``)."""
    activity_s: float = 0.0
    """Seconds the activity has lasted (a model load shows its elapsed time)."""
    fill_texts: int = 0
    """Texts the fill has to embed; ``fill_embedded`` of them are done."""
    fill_embedded: int = 0
    fill_eta: float | None = None
    """The fill's ETA from the bytes of text left (``FillReport.eta_s``)."""

    @property
    def rate(self) -> float:
        """Chunks with vectors (embedded or reused) per second; while writing text, chunks
        written per second."""
        if self.seconds <= 0:
            return 0.0
        if self.activity == WRITING_TEXT:
            return self.chunks / self.seconds
        return (self.embedded + self.reused) / self.seconds

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the pace so far (by files; a fill: by bytes of text left, once
        stable); None before it is known."""
        if self.activity == "filling vectors" or self.fill_texts:
            return self.fill_eta
        if not self.files_done or self.seconds <= 0:
            return None
        return self.seconds / self.files_done * max(0, self.files_total - self.files_done)

    def as_dict(self) -> dict[str, object]:
        eta = self.eta_s
        return {
            "files_done": self.files_done,
            "files_total": self.files_total,
            "chunks": self.chunks,
            "vectors": self.vectors,
            "embedded": self.embedded,
            "reused": self.reused,
            "seconds": round(self.seconds, 1),
            "chunks_per_second": round(self.rate, 1),
            "eta_s": round(eta) if eta is not None else None,
            "activity": self.activity,
            "activity_s": round(self.activity_s, 1),
            "fill_texts": self.fill_texts,
            "fill_embedded": self.fill_embedded,
        }


Progress = Callable[[SyncProgress], None]
"""Called with each new ``SyncProgress`` (on the syncing thread: keep it quick)."""

WRITING_TEXT = "writing text"
"""The activity of a text-first write (``SyncProgress.activity``)."""

PROGRESS_LOG_S = 5.0
"""At most one ``progress`` log line this often (a cold index logs its pace, not each file)."""


class _Meter:
    """Turns a sync's counts into ``SyncProgress`` for the caller, and a log line every
    ``PROGRESS_LOG_S`` at most."""

    def __init__(self, total: int, report: Counts, progress: Progress | None) -> None:
        self.total = total
        self.report_ = report
        self.progress = progress
        self.started = time.monotonic()
        self.logged_at = self.started
        self.done = 0
        self.activity = ("indexing", self.started)
        self.writing = "indexing"
        """What the batches' reports are: ``indexing``, or ``writing text`` (text first)."""
        self.fill: FillReport | None = None
        self.rows: int | None = None
        """The source's rows, counted when a fill begins: a fill that takes up rows an
        earlier sync wrote (a paused fill, an interrupted run) counts against them."""

    def report_within(self, before: int, files_ready: int) -> None:
        """Progress inside a batch: ``before`` files committed, ``files_ready`` more embedded."""
        self.report(before + files_ready)

    def report_fill(self, fill: FillReport) -> None:
        """Progress of the fill that follows a text-first write (every file is written)."""
        self.fill = fill
        self.report(self.total, "filling vectors")

    def report(self, files_done: int | None, activity: str | None = None) -> None:
        """``files_done`` None: as last reported (a model load between two phases);
        ``activity`` None: the batches' own (``writing``)."""
        activity = activity or self.writing
        now = time.monotonic()
        r = self.report_
        self.done = self.done if files_done is None else min(files_done, self.total)
        if activity != self.activity[0]:
            self.activity = (activity, now)
        fill = self.fill
        chunks, vectors = r.chunks, r.chunks - r.vectorless
        if fill is not None and self.rows is not None:  # a fill: of the source's rows
            chunks, vectors = self.rows, self.rows - fill.rows + fill.set_rows
        p = SyncProgress(
            files_done=self.done,
            files_total=self.total,
            chunks=chunks,
            vectors=vectors,
            embedded=r.embedded,
            reused=r.reused + r.seeded,
            seconds=now - self.started,
            activity=activity,
            activity_s=now - self.activity[1],
            fill_texts=fill.texts if fill else 0,
            fill_embedded=fill.embedded if fill else 0,
            fill_eta=fill.eta_s if fill else None,
        )
        if self.progress is not None:
            self.progress(p)
        if now - self.logged_at >= PROGRESS_LOG_S:
            self.logged_at = now
            log.info("progress", repo=r.repo, **p.as_dict())
