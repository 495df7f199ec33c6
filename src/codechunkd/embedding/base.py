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
