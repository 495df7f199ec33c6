"""Whole-file meaning for the ranking: each candidate file's mean chunk vector, ranked.

A chunk is judged alone by both retrievers, but a question is usually about a file: the
file whose code as a whole is about the question is likelier the answer than a big file
with one chunk that happens to match (bench/questions.py judges files). The ``file_vector``
rule (opt-in, ``storage/ranking.py``) ranks the candidates' files by the cosine of the
query vector to the file's centroid (the normalized mean of its chunks' vectors) and adds
that ranking, as a reciprocal-rank term, to each file's best chunk: a third ranking, of
files (the file's other chunks keep their own evidence, so a weak chunk is not lifted).

It is opt-in because the two benches disagree: on bench/questions.py's tune split it lifts
NDCG@10 0.814 -> 0.830 (Python, Go, JavaScript and TypeScript, no repository lower), but
on bench/search_quality.py's tune split, whose queries describe one function of a grab-bag
module (``utils.py``), code MRR@10 falls 0.621 -> 0.583: the module's centroid is about
nothing in particular, and focused files overtake the answer (docs/operations.md, Measured).

A centroid is a function of the blob (the file's content) and of the model alone, so it is
cached by blob for as long as the reader lives (a daemon's searches pay once per file
version); chunks without a vector yet (written text first) are left out of it, and a file
none of whose chunks has a vector gets no file term.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from codechunkd.storage.rows import in_list

if TYPE_CHECKING:
    from codechunkd.storage.lance_reader import ChunkReader

FILE_WEIGHT = 0.45
"""What the best-ranked file's best chunk gains (a fused score is at most 1): the file at
rank r gains ``FILE_WEIGHT * (FILE_K + 1) / (FILE_K + r + 1)``."""
FILE_K = 60
"""How slowly the file term falls with the file's rank (the reciprocal-rank constant)."""
CACHED = 8192
"""Centroids a reader keeps (1.5 KiB each at 384 dimensions)."""
_BATCH = 256
"""Blobs asked for in one filtered read."""


class FileVectors:
    """Centroids of files by blob, read from ``chunks`` and cached (thread-safe)."""

    def __init__(self, store: ChunkReader) -> None:
        self.store = store
        self._cache: OrderedDict[str, npt.NDArray[np.float32] | None] = OrderedDict()
        self._lock = threading.Lock()

    def centroids(self, blobs: Iterable[str]) -> dict[str, npt.NDArray[np.float32]]:
        """The unit centroid of each blob that has a chunk with a vector."""
        wanted = list(dict.fromkeys(b for b in blobs if b))
        out: dict[str, npt.NDArray[np.float32]] = {}
        missing: list[str] = []
        with self._lock:
            for b in wanted:
                if b in self._cache:
                    self._cache.move_to_end(b)
                    got = self._cache[b]
                    if got is not None:
                        out[b] = got
                else:
                    missing.append(b)
        for start in range(0, len(missing), _BATCH):
            part = missing[start : start + _BATCH]
            found = self._read(part)
            with self._lock:
                for b in part:
                    self._cache[b] = found.get(b)
                    if b in found:
                        out[b] = found[b]
                while len(self._cache) > CACHED:
                    self._cache.popitem(last=False)
        return out

    def _read(self, blobs: list[str]) -> dict[str, npt.NDArray[np.float32]]:
        where = f"{in_list('blob', blobs)} AND synthetic = false AND embedding_model IS NOT NULL"
        sums: dict[str, npt.NDArray[np.float32]] = {}
        for row in self.store.select(where, ["blob", "vector"]):
            vec = row["vector"]
            if vec is None:
                continue
            v = np.asarray(vec, dtype=np.float32)
            b = row["blob"]
            sums[b] = sums[b] + v if b in sums else v.copy()
        out = {}
        for b, s in sums.items():
            norm = float(np.linalg.norm(s))
            if norm > 0 and np.isfinite(norm):
                out[b] = s / norm
        return out


def file_terms(
    rows: Mapping[str, Mapping[str, Any]],
    scores: Mapping[str, float],
    vector: npt.NDArray[np.float32],
    vectors: FileVectors,
) -> dict[str, float]:
    """Best row id of each file -> its file's term: the files of ``rows`` ranked by their
    centroid's cosine to the query ``vector`` (ties by blob), ``FILE_WEIGHT * (FILE_K + 1)
    / (FILE_K + rank + 1)``; a file's best row is its highest in ``scores`` (ties by id)."""
    blobs = {row["blob"] for row in rows.values()}
    cents = vectors.centroids(sorted(blobs))
    if not cents:
        return {}
    q = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(q))
    if norm == 0 or not np.isfinite(norm):
        return {}
    q = q / norm
    sims = {b: float(c @ q) for b, c in cents.items()}
    ranked = sorted(sims, key=lambda b: (-sims[b], b))
    term = {b: FILE_WEIGHT * (FILE_K + 1) / (FILE_K + rank + 1) for rank, b in enumerate(ranked)}
    best: dict[str, str] = {}
    for rid in sorted(rows, key=lambda r: (-scores.get(r, 0.0), r)):
        best.setdefault(rows[rid]["blob"], rid)
    return {rid: term[b] for b, rid in best.items() if b in term}
