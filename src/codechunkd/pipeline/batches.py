"""The local engine's batches: a change sliced, each slice read and chunked one ahead
(``pipeline/reading.py``), embedded (``pipeline/vectors.py``) and written in one commit.

It owns the slicing (``FIRST_BATCH_FILES`` then doubling up to ``index.batch_files``:
``_slices``), the deletes carried with the batches, the ``batch_committed`` log line and
the upkeep and memory release after each commit (``BatchWriter.write``).  It writes rows
only: the state and its pending mark, the crash points around the whole, the choice of
text first and the fill after it are ``Syncer``'s (``pipeline/sync.py``); the Ray
engine replaces this module's part (``pipeline/distributed.py``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from itertools import zip_longest
from typing import Any

from codechunkd import logs
from codechunkd.config.settings import Settings
from codechunkd.git.changes import ChangeSet, FileVersion, GitSource
from codechunkd.pipeline.progress import _Meter
from codechunkd.pipeline.reading import BatchReader
from codechunkd.pipeline.report import SyncReport
from codechunkd.pipeline.upkeep import upkeep
from codechunkd.pipeline.vectors import Vectors
from codechunkd.storage.store import IndexStore

log = logs.get_logger("codechunkd.sync")


#: A big change's first batch: later ones double up to ``index.batch_files``.  A batch is
#: searchable once committed, so a first index answers with hits after a few files'
#: embedding, not after a whole batch's (256 files: minutes on 2 cores).
FIRST_BATCH_FILES = 8


def _slices(items: Sequence[FileVersion], size: int, *, first: int) -> list[Sequence[FileVersion]]:
    """``items`` in order, in slices of ``first``, twice that, … up to ``size`` files."""
    out: list[Sequence[FileVersion]] = []
    step, i = min(first, size), 0
    while i < len(items):
        out.append(items[i : i + step])
        i += step
        step = min(step * 2, size)
    return out


class BatchWriter:
    """A change's files and deletes written batch by batch, each batch one commit."""

    def __init__(
        self,
        settings: Settings,
        store: IndexStore,
        reader: BatchReader,
        vectors: Vectors,
        *,
        still_writer: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.store = store
        self.reader = reader
        self.vectors = vectors
        self.still_writer = still_writer
        """Raises when this process may no longer write the index (``Syncer.check_writer``);
        called before each commit."""

    def write(
        self,
        git: GitSource,
        changes: ChangeSet,
        todo: Sequence[FileVersion],
        deletes: Sequence[str],
        known: set[str],
        report: SyncReport,
        meter: _Meter,
        *,
        compute: bool,
    ) -> None:
        """Write ``todo`` and ``deletes`` (``known``: paths that may have rows), with their
        vectors (``compute=False``: without the ones to compute, text first)."""
        size = self.settings.index.batch_files
        done = 0
        batches = _slices(todo, size, first=FIRST_BATCH_FILES)
        removals = [deletes[i : i + size] for i in range(0, len(deletes), size)]
        empty: Sequence[Any] = ()
        work = list(zip_longest(batches, removals, fillvalue=empty))
        for (batch, dels), read, prepare_s in self.reader.prepared(git, work, report):
            t0 = time.monotonic()
            embedded_before, reused_before = report.embedded, report.reused
            ready = self.vectors.embed(
                read,
                report,
                functools.partial(meter.report_within, done),
                compute=compute,
            )
            t1 = time.monotonic()
            new = not any(v.path in known for v in batch)
            self.still_writer()
            self.store.write_batch(
                git.source,
                changes.head,
                ready,
                dels,
                model_id=self.vectors.embedder.model_id,
                new=new,
            )
            written = sum(len(f.chunks) for f in ready)
            done += len(batch) + len(dels)
            report.chunks += written
            report.vectorless += sum(1 for f in ready for c in f.chunks if c.vector is None)
            log.info(
                "batch_committed",
                repo=git.source.repo,
                files=len(batch),
                deleted=len(dels),
                chunks=written,
                embedded=report.embedded - embedded_before,
                reused=report.reused - reused_before,
                prepare_ms=round(prepare_s * 1000),
                embed_ms=round((t1 - t0) * 1000),
                write_ms=round((time.monotonic() - t1) * 1000),
            )
            meter.report(done)
            del ready, read
            upkeep(self.store, self.settings)  # and return the batch's freed pages
