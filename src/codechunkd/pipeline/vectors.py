"""The vectors of a batch's chunks: from the embedding cache, else from the seed, else
computed, in slices; and the rows ``IndexStore.write_batch`` takes.

It owns ``Vectors``: the lookups (cache, then seed: ``index.seed``, opened on first need
and tried again after ``SEED_RETRY_S`` when unusable), the embedding of the misses in
slices of ``embedding.batch_size`` (each cached at once), the check of what the model
returned (``check``), and the rows with their summaries (``IndexedFile``).  It writes
the embedding and summary caches only: it must not write the table or the state (that is
``pipeline/batches.py`` and ``pipeline/sync.py``) nor read the git source.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from codechunkd import logs
from codechunkd.chunking.chunker import content_hash
from codechunkd.config.settings import Settings
from codechunkd.embedding.base import texts_per_call, vector_problems
from codechunkd.embedding.embedder import Embedder
from codechunkd.errors import EmbeddingError
from codechunkd.llm.summaries import EXTRACTIVE, PROMPT_VERSION, extractive_summary, llm_source
from codechunkd.pipeline.reading import Chunked
from codechunkd.pipeline.report import SyncReport
from codechunkd.storage.cache import EmbeddingCache, SummaryCache
from codechunkd.storage.rows import EmbeddedChunk, IndexedFile
from codechunkd.storage.seed import Seed, SeedUnusable

log = logs.get_logger("codechunkd.sync")

SEED_RETRY_S = 300.0
"""A seed that could not be used is tried again after this long (a daemon outlives outages)."""

#: Vectors by ``embed_hash``.
Found: TypeAlias = dict[str, npt.NDArray[np.float32]]


class Vectors:
    """Vectors for a batch's chunks, looked up or computed once per distinct text."""

    def __init__(
        self,
        settings: Settings,
        embedder: Embedder,
        cache: EmbeddingCache,
        summaries: SummaryCache | None,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.cache = cache
        self.summaries = summaries
        self._seed: Seed | None = None
        self._seed_failed_at: float | None = None
        self.seed_problem: str | None = None
        """Why the seed is not used now (None: it is, or none is set)."""

    def embed(
        self,
        files: Sequence[Chunked],
        report: SyncReport,
        files_ready: Callable[[int], None] | None = None,
        *,
        compute: bool = True,
    ) -> list[IndexedFile]:
        """Vectors for every chunk: from the cache, else computed once per distinct text
        (``compute=False``: left None, for ``pipeline/fill.py`` to fill in after the text).

        The misses are embedded in slices of a full batch for each of the model's workers
        (``texts_per_call``), and each slice goes into the cache as soon as it is computed:
        a kill, an OOM or a power cut mid-batch loses at most one slice, and the next run
        reuses the rest.
        ``files_ready(n)`` hears after each slice how many of ``files`` have all their
        vectors.
        """
        keys = {c.embed_text: content_hash(c.embed_text) for f in files for c in f.chunks}
        cached, from_seed = self._looked_up(files, keys, report)
        missing = sorted((t for t, k in keys.items() if k not in cached), key=len)
        report.reused += sum(len(f.chunks) for f in files) - len(missing) - from_seed
        if compute:
            self._compute(files, keys, cached, missing, report, files_ready)
        return self._rows(files, keys, cached, report)

    def _looked_up(
        self, files: Sequence[Chunked], keys: dict[str, str], report: SyncReport
    ) -> tuple[Found, int]:
        """The vectors the cache has, then those the seed has of the rest; and how many of
        ``files``' chunks the seed gave (counted in the report)."""
        model = self.embedder.model_id
        dim = self.embedder.dimension
        cached = self.cache.get_many(model, keys.values(), dim)
        seeded = self._from_seed({k for k in keys.values() if k not in cached}, report)
        cached.update(seeded)
        from_seed = sum(1 for f in files for c in f.chunks if keys[c.embed_text] in seeded)
        report.seeded += from_seed
        return cached, from_seed

    def _compute(
        self,
        files: Sequence[Chunked],
        keys: dict[str, str],
        cached: Found,
        missing: list[str],
        report: SyncReport,
        files_ready: Callable[[int], None] | None,
    ) -> None:
        """Embed ``missing`` in slices, each into the cache (and ``cached``) at once."""
        model = self.embedder.model_id
        waiting = [sum(1 for c in f.chunks if keys[c.embed_text] not in cached) for f in files]
        needed_by: dict[str, list[int]] = {}
        for i, f in enumerate(files):
            for c in f.chunks:
                if keys[c.embed_text] not in cached:
                    needed_by.setdefault(c.embed_text, []).append(i)
        ready_files = waiting.count(0)
        step = texts_per_call(self.embedder, self.settings.embedding.batch_size)
        for start in range(0, len(missing), step):
            texts = missing[start : start + step]
            vectors = self.embedder.embed(texts)
            self.check(vectors, len(texts))
            fresh = {keys[t]: vectors[j] for j, t in enumerate(texts)}
            self.cache.put_many(model, fresh)
            cached.update(fresh)
            report.embedded += len(texts)
            for t in texts:
                for i in needed_by[t]:
                    waiting[i] -= 1
                    ready_files += waiting[i] == 0
            if files_ready is not None:
                files_ready(ready_files)

    def _rows(
        self, files: Sequence[Chunked], keys: dict[str, str], cached: Found, report: SyncReport
    ) -> list[IndexedFile]:
        """The rows of ``files``: each chunk with its vector (None: not computed), its
        summary (the LLM's when cached, else the extractive one)."""
        window = self.settings.embedding.max_seq_length
        llm_model = self.settings.summaries.model
        llm = (
            self.summaries.get_many(
                llm_model, PROMPT_VERSION, {c.content_hash for f in files for c in f.chunks}
            )
            if self.summaries is not None
            else {}
        )
        out: list[IndexedFile] = []
        for f in files:
            assert f.version.blob is not None
            ready: list[EmbeddedChunk] = []
            for c in f.chunks:
                key = keys[c.embed_text]
                vec: npt.NDArray[np.float32] | None = cached.get(key)
                if c.token_count > window:
                    report.truncated += 1
                ready.append(
                    EmbeddedChunk(
                        chunk=c,
                        vector=vec,
                        embed_hash=key,
                        embedded_tokens=min(c.token_count, window),
                        summary=llm.get(c.content_hash) or extractive_summary(c),
                        summary_source=(
                            llm_source(llm_model) if c.content_hash in llm else EXTRACTIVE
                        ),
                        summary_of=c.content_hash,
                    )
                )
            out.append(
                IndexedFile(
                    path=f.version.path,
                    blob=f.version.blob,
                    language=f.language,
                    dirty=f.version.dirty,
                    chunks=tuple(ready),
                    skip_reason=f.skip_reason,
                )
            )
        return out

    def check(self, vectors: npt.NDArray[np.float32], count: int) -> None:
        """Raise ``EmbeddingError`` unless the embedder gave ``count`` usable vectors: a NaN
        would make LanceDB refuse the whole batch, a zero vector is never found."""
        problems = vector_problems(np.asarray(vectors), self.embedder.dimension)
        if len(vectors) != count or problems:
            what = ", ".join(f"{n} {why}" for why, n in sorted(Counter(problems.values()).items()))
            raise EmbeddingError(
                f"the embedding model {self.embedder.model_id} returned unusable vectors "
                f"for {len(problems) or count} of {count} texts ({what or 'wrong count'})"
            )

    def _from_seed(
        self, hashes: set[str], report: SyncReport
    ) -> dict[str, npt.NDArray[np.float32]]:
        """Vectors of ``hashes`` found in the seed, put into the cache (with the seed's LLM
        summaries of the same rows, into the summary cache); {} without a usable seed.

        Only the vectors the cache misses are looked up, in bulk; summaries come with them,
        so a chunk whose vector was cached here but whose summary was not keeps waiting for
        the summarize job.
        """
        seed = self._open_seed(report) if hashes else None
        if seed is None:
            return {}
        llm_model = self.settings.summaries.model
        want_summaries = self.summaries is not None and bool(llm_model)
        try:
            found = seed.lookup(
                self.embedder.model_id,
                hashes,
                summary_source=llm_source(llm_model) if want_summaries else None,
            )
        except SeedUnusable as exc:
            self._seed_unusable(str(exc), report)
            return {}
        if found.refused:  # checked before the cache may keep them: embedded here instead
            report.seed_refused += sum(found.refused.values())
            log.warning("seed_vectors_refused", seed=seed.uri, reasons=dict(found.refused))
        self.cache.put_many(self.embedder.model_id, found.vectors)
        if self.summaries is not None:
            for content, summary in found.summaries.items():
                self.summaries.put(llm_model, PROMPT_VERSION, content, summary, 0)
        return found.vectors

    def _open_seed(self, report: SyncReport) -> Seed | None:
        """The seed ``index.seed`` names, opened on first need; None when none is set or it
        is unusable (reported, and tried again after ``SEED_RETRY_S``)."""
        if not self.settings.index.seed or self._seed is not None:
            return self._seed
        failed = self._seed_failed_at
        if failed is not None and time.monotonic() - failed < SEED_RETRY_S:
            return None
        try:
            seed = Seed.from_settings(self.settings)
            seed.check_model(self.embedder.model_id, self.embedder.dimension)
        except SeedUnusable as exc:
            self._seed_unusable(str(exc), report)
            return None
        log.info("seed_opened", seed=seed.uri, model=seed.model_id)
        self._seed, self._seed_failed_at, self.seed_problem = seed, None, None
        report.seed_skipped = None
        return seed

    def _seed_unusable(self, reason: str, report: SyncReport) -> None:
        """Index without the seed for now, saying why (in the log and the sync report)."""
        log.warning("seed_skipped", seed=self.settings.index.seed, reason=reason)
        self._seed, self._seed_failed_at = None, time.monotonic()
        self.seed_problem = report.seed_skipped = reason
