"""Vectors second: embed the rows a text-first write left without a vector.

A first index (or any change of more than ``FIRST_BATCH_FILES`` files) writes each
file's rows as soon as it is chunked, with the vectors the cache (or the seed) already
holds and NULL for the others (``storage/coverage.py``): the whole repository answers
by full text within seconds, before the model has embedded anything. ``VectorFill``
then embeds the rest, in the order the files were written (``pipeline/order.py``),
puts each slice in the embedding cache as soon as it is computed (a kill loses one
slice) and sets the vectors in the table every ``FILL_COMMIT_S`` seconds. Its ETA counts
the work left in tokens (capped at the model's window) at the measured rate.

The fill reads what is left from the table itself, so the same code finishes the
work of an interrupted run at the next start: a crash at any point loses nothing
the cache holds and leaves no row mistaken for a complete one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from codechunkd import logs
from codechunkd.embedding.base import texts_per_call
from codechunkd.embedding.embedder import Embedder
from codechunkd.storage.cache import EmbeddingCache
from codechunkd.storage.coverage import fill_vectors, vectorless
from codechunkd.storage.crashpoints import crashpoint
from codechunkd.storage.store import IndexStore

log = logs.get_logger("codechunkd.fill")

FILL_COMMIT_S = 5.0
"""Vectors computed are set in the table at most this often (and after the first slice, and
at the end): each commit
rewrites its rows and adds a full-text delta, so one per slice would pile up thousands."""
COMMIT_SHARE = 8
"""A commit that took c seconds is followed by at least ``COMMIT_SHARE * c`` of embedding: the
commits cost at most about an eighth of the fill (on a busy 2-core machine, 1.5 s each)."""
ETA_AFTER_S = 120.0
"""A fill's ETA is given from 5% of its work on, or from this many seconds of embedding
(thousands of texts on a CPU) when 5% takes longer: a first index of a million chunks would
otherwise say ``ETA ?`` for most of an hour."""
YIELD_SHARE = 4
"""A fill asked to stop (``run``'s ``stop``: an edit is due) first embeds for at least
``YIELD_SHARE`` times what its start took (reading the rows left, asking the cache: ~1.7 s
for 96,000 rows): edits that never stop coming cost the fill at most a fifth of its time."""


@dataclass(slots=True)
class FillReport:
    """What one fill did (counts of rows)."""

    rows: int = 0
    """Rows that lacked a vector when the fill began."""
    reused: int = 0
    """Rows whose vector the cache held (a crash's work, or the same text elsewhere)."""
    embedded: int = 0
    """Distinct texts the model embedded."""
    texts: int = 0
    """Distinct texts to embed (the cache held none of them)."""
    work_total: int = 0
    """Their work: tokens, each text's capped at the model's window (what the model runs
    on; a text's tail past the window costs nothing), not files."""
    work_done: int = 0
    set_rows: int = 0
    """Rows whose vectors are set in the table so far."""
    commits: int = 0
    embed_seconds: float = 0.0
    """Since the first slice began (the model loaded)."""
    paused: bool = False
    """Stopped early to let other work through (``run``'s ``stop``): what is left stays
    without vectors, for the next run."""

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the measured rate (tokens per second), once it is stable: from 5%
        of the work (or ``ETA_AFTER_S`` of embedding, on a repository so large that 5% takes
        longer) and two slices on; None before."""
        if self.texts == 0 or self.work_done >= self.work_total:
            return 0.0 if self.texts == 0 or self.embedded >= self.texts else None
        early = self.work_done < 0.05 * self.work_total and self.embed_seconds < ETA_AFTER_S
        if early or self.embedded < 2 or not self.embed_seconds:
            return None
        rate = self.work_done / self.embed_seconds
        return (self.work_total - self.work_done) / rate


Checked = Callable[[npt.NDArray[np.float32], int], None]


class VectorFill:
    """Fills the vectors of one source's vectorless rows (the single writer)."""

    def __init__(
        self,
        store: IndexStore,
        embedder: Embedder,
        cache: EmbeddingCache,
        *,
        batch_size: int,
        window: int = 256,
        check: Checked,
        upkeep: Callable[[], object],
        before_commit: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.cache = cache
        self.step = max(1, batch_size)
        self.window = max(1, window)
        self.check = check
        self.upkeep = upkeep
        self.before_commit = before_commit

    def run(
        self,
        source: str,
        rank: Callable[[str], object],
        *,
        load: Callable[[], object] = lambda: None,
        on_slice: Callable[[FillReport], None] = lambda _r: None,
        stop: Callable[[], bool] | None = None,
    ) -> FillReport:
        """Embed and set every missing vector of ``source``, files in ``rank`` order; or
        stop early (``paused``), what is done committed, once ``stop()`` says other work
        waits (asked after each slice, from ``YIELD_SHARE`` times the start's time on)."""
        started = time.monotonic()
        report = FillReport()
        todo, pending = self._left(source, rank, report)
        if not report.rows:
            return report
        if pending:
            self._commit(pending, report)
        texts = list(dict.fromkeys(str(r["embed_text"]) for r in todo))
        rows_of: dict[str, list[str]] = {}
        for r in todo:
            rows_of.setdefault(str(r["embed_text"]), []).append(str(r["id"]))
        report.texts = len(texts)
        work = {str(r["embed_text"]): min(int(r["token_count"] or 1), self.window) for r in todo}
        report.work_total = sum(work[t] for t in texts)
        on_slice(report)  # the fill has begun: status says so before the model loads
        patience = YIELD_SHARE * (time.monotonic() - started)
        if texts:
            load()
        # a full batch for each of the loaded model's workers (every onnx session busy on a
        # big machine, 1,024 texts on a GPU), never fewer than embedding.batch_size
        step = texts_per_call(self.embedder, self.step)
        hashes = {str(r["embed_text"]): str(r["embed_hash"]) for r in todo}
        model = self.embedder.model_id
        committed_at = began = time.monotonic()
        interval = FILL_COMMIT_S
        for start in range(0, len(texts), step):
            part = texts[start : start + step]
            vectors = self.embedder.embed(part)
            self.check(vectors, len(part))
            self.cache.put_many(model, {hashes[t]: vectors[j] for j, t in enumerate(part)})
            crashpoint("fill.slice_cached")
            report.embedded += len(part)
            report.work_done += sum(work[t] for t in part)
            report.embed_seconds = time.monotonic() - began
            for j, t in enumerate(part):
                for rid in rows_of[t]:
                    pending[rid] = vectors[j]
            # the first slice at once (the first files' vectors join search soonest), then
            # every FILL_COMMIT_S
            if start == 0 or time.monotonic() - committed_at >= interval:
                began_commit = time.monotonic()
                self._commit(pending, report)
                committed_at = time.monotonic()
                # commits (a rewrite and a full-text delta) take at most ~1/COMMIT_SHARE
                interval = max(FILL_COMMIT_S, (committed_at - began_commit) * COMMIT_SHARE)
            on_slice(report)
            if stop is not None and report.embed_seconds >= patience and stop():
                report.paused = start + step < len(texts)
                break
        self._commit(pending, report)
        log.info(
            "fill_paused" if report.paused else "vectors_filled",
            source=source,
            rows=report.rows,
            reused=report.reused,
            embedded=report.embedded,
            left=report.texts - report.embedded,
            commits=report.commits,
        )
        return report

    def _left(
        self, source: str, rank: Callable[[str], object], report: FillReport
    ) -> tuple[list[dict[str, Any]], dict[str, npt.NDArray[np.float32]]]:
        """The rows of ``source`` left without a vector, in ``rank`` order: those to embed,
        and the vectors the cache holds for the others (by row id; ``reused``)."""
        left = vectorless(self.store, source).to_pylist()
        report.rows = len(left)
        left.sort(key=lambda r: (rank(r["path"]), r["path"]))
        model, dim = self.embedder.model_id, self.embedder.dimension
        cached = self.cache.get_many(model, {r["embed_hash"] for r in left}, dim) if left else {}
        pending: dict[str, npt.NDArray[np.float32]] = {}  # row id -> vector, not yet set
        todo: list[dict[str, Any]] = []
        for r in left:
            vec = cached.get(str(r["embed_hash"]))
            if vec is None:
                todo.append(r)
            else:
                pending[str(r["id"])] = vec
        report.reused = len(pending)
        return todo, pending

    def _commit(self, pending: dict[str, npt.NDArray[np.float32]], report: FillReport) -> None:
        if not pending:
            return
        self.before_commit()
        ids: Sequence[str] = list(pending)
        fill_vectors(self.store, ids, [pending[i] for i in ids], self.embedder.model_id)
        crashpoint("fill.committed")
        report.set_rows += len(ids)
        pending.clear()
        report.commits += 1
        self.upkeep()  # the rewritten rows join the full-text index; freed pages returned
