"""Embedders: texts in, L2-normalised float32 vectors out.

An ``Embedder`` has a ``model_id`` (the embedding cache key and the value of the
``embedding_model`` column: two embedders with the same id must give the same
vectors), a ``dimension`` and ``embed(texts)``.  ``make_embedder(settings)`` picks
the backend once, at the edge; nothing else branches on it.

Backends: ``onnx`` (``embed_onnx.py``: onnxruntime, the default, no torch),
``torch`` (``embed_torch.py``: sentence-transformers, the ``torch`` extra) and
``remote`` (``embed_remote.py``: an OpenAI-compatible ``/v1/embeddings`` server).
The protocol is in ``base.py``; this module is only the factory.
"""

from __future__ import annotations

from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding.base import Embedder, Vectors
from codechunkd.errors import EmbeddingError

__all__ = ["Embedder", "Vectors", "make_embedder"]


def make_embedder(settings: EmbeddingSettings) -> Embedder:
    """The configured backend (chosen here and nowhere else)."""
    if settings.backend == "torch":
        from codechunkd.embedding.embed_torch import TorchEmbedder

        return TorchEmbedder(settings)
    if settings.backend == "onnx":
        from codechunkd.embedding.embed_onnx import OnnxEmbedder

        return OnnxEmbedder(settings)
    if settings.backend == "remote":
        from codechunkd.embedding.embed_remote import RemoteEmbedder

        return RemoteEmbedder(settings)
    raise EmbeddingError(f"unknown embedding backend {settings.backend!r}")
