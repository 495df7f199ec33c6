"""Embedders: texts in, L2-normalised float32 vectors out.

An ``Embedder`` has a ``model_id`` (the embedding cache key and the value of the
``embedding_model`` column: two embedders with the same id must give the same
vectors), a ``dimension`` and ``embed(texts)``.  ``make_embedder(settings)`` picks
the backend once, at the edge; nothing else branches on it.

Backends: ``torch`` (here; imports sentence-transformers, ~9 s, only when the
first text is embedded, so commands that never embed stay fast), ``onnx``
(``embed_onnx.py``: onnxruntime, no torch once the model is exported) and
``remote`` (``embed_remote.py``: an OpenAI-compatible ``/v1/embeddings`` server).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from codechunkd.config.settings import BUNDLED_MODEL, EmbeddingSettings
from codechunkd.errors import EmbeddingError
from codechunkd.indexer.tokens import model_path

Vectors = npt.NDArray[np.float32]


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


def model_fingerprint(model: str) -> str:
    """A model id that changes when the weights do: name + short hash of its config files."""
    path = model_path(model)
    if path is None:
        return model
    h = hashlib.sha256()
    for name in (
        "config.json",
        "modules.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
    ):
        f = path / name
        if f.is_file():
            h.update(name.encode())
            h.update(f.read_bytes())
    weights = path / "model.safetensors"
    if weights.is_file():
        h.update(str(weights.stat().st_size).encode())
    label = "all-MiniLM-L6-v2" if model == BUNDLED_MODEL else Path(model).name
    return f"{label}@{h.hexdigest()[:12]}"


def model_dimension(model: str) -> int | None:
    """The output dimension read from the model's files, without loading it."""
    path = model_path(model)
    if path is None:
        return None
    pooling = path / "1_Pooling" / "config.json"
    try:
        if pooling.is_file():
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        return int(json.loads((path / "config.json").read_text())["hidden_size"])
    except (OSError, KeyError, ValueError):
        return None


class TorchEmbedder:
    """sentence-transformers on torch, loaded lazily and unloadable when idle."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        self._settings = settings
        self._model: Any = None
        self._lock = threading.Lock()
        self._id = f"{model_fingerprint(settings.model)}/seq{settings.max_seq_length}"
        self._dim = model_dimension(settings.model)

    @property
    def model_id(self) -> str:
        return self._id

    @property
    def dimension(self) -> int:
        if self._dim is None:
            self._dim = int(self._load().get_embedding_dimension())
        return self._dim

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                try:
                    import torch
                    from sentence_transformers import SentenceTransformer

                    if self._settings.threads > 0:
                        torch.set_num_threads(self._settings.threads)
                    path = model_path(self._settings.model)
                    name = str(path) if path is not None else self._settings.model
                    model = SentenceTransformer(name, device=self._settings.device)
                except Exception as exc:
                    raise EmbeddingError(
                        f"cannot load embedding model {self._settings.model!r}: {exc}"
                    ) from exc
                model.max_seq_length = self._settings.max_seq_length
                self._model = model
            return self._model

    def unload(self) -> None:
        with self._lock:
            self._model = None

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        try:
            out = model.encode(
                list(texts),
                batch_size=self._settings.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except Exception as exc:
            raise EmbeddingError(f"embedding failed: {exc}") from exc
        return np.asarray(out, dtype=np.float32)


def make_embedder(settings: EmbeddingSettings) -> Embedder:
    """The configured backend (chosen here and nowhere else)."""
    if settings.backend == "torch":
        return TorchEmbedder(settings)
    if settings.backend == "onnx":
        from codechunkd.indexer.embed_onnx import OnnxEmbedder

        return OnnxEmbedder(settings)
    if settings.backend == "remote":
        from codechunkd.indexer.embed_remote import RemoteEmbedder

        return RemoteEmbedder(settings)
    raise EmbeddingError(f"unknown embedding backend {settings.backend!r}")
