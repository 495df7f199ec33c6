"""What every embedder is: texts in, L2-normalised float32 vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


def normalize(vectors: npt.NDArray[np.floating]) -> Vectors:
    """Rows scaled to unit length (a zero row stays zero), as float32: every backend's output."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.asarray(vectors / np.clip(norms, 1e-12, None), dtype=np.float32)


NOT_FINITE = "not finite"
ZERO_LENGTH = "zero length"


def vector_problems(vectors: npt.NDArray[np.floating], dimension: int) -> dict[int, str]:
    """Rows of ``vectors`` that are no embedding, by row: ``NOT_FINITE`` (a NaN or an
    infinity), ``ZERO_LENGTH`` (all zeros, or too small to have a direction), or every row
    when the matrix is not ``(n, dimension)``.  {} when every row is usable.

    Every vector that comes from outside this process (a seed, an embedding server, the
    cache file) is checked with it before it is kept: one NaN makes LanceDB refuse the
    whole batch it is written in, and a zero vector is a row vector search never finds.
    """
    rows = vectors.shape[0] if vectors.ndim >= 1 else 0
    if vectors.ndim != 2 or vectors.shape[1] != dimension:
        width = vectors.shape[1] if vectors.ndim == 2 else "no"
        return dict.fromkeys(range(rows), f"{width} dimensions, not {dimension}")
    problems: dict[int, str] = {}
    finite = np.isfinite(vectors).all(axis=1)
    for i in np.flatnonzero(~finite):
        problems[int(i)] = NOT_FINITE
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.linalg.norm(vectors.astype(np.float64, copy=False), axis=1)
    for i in np.flatnonzero(finite & ~(norms > 1e-6)):
        problems[int(i)] = ZERO_LENGTH
    return problems


def texts_per_call(embedder: object, least: int = 1) -> int:
    """Texts one call should hand ``embedder`` so that none of its workers idles: a full
    batch for each (``parallelism``: onnx sessions, requests in flight; ``batch_size``:
    1,024 on a GPU), and at least ``least``."""
    workers = max(1, int(getattr(embedder, "parallelism", 1)))
    batch = max(1, int(getattr(embedder, "batch_size", least)))
    return max(least, workers * batch)


@runtime_checkable
class Embedder(Protocol):
    @property
    def model_id(self) -> str:
        """Identity of the vectors: the model and everything that changes its output."""
        ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One normalised row per text, shape (len(texts), dimension)."""
        ...
