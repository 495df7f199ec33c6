"""The torch backend: sentence-transformers, loaded lazily and unloadable when idle.

It imports sentence-transformers (slow) only when the first text is embedded, so
commands that never embed stay fast.  It needs the ``torch`` extra
(``pip install 'codechunkd[torch]'``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding.base import Vectors
from codechunkd.embedding.models import model_dimension, model_fingerprint, model_path
from codechunkd.errors import EmbeddingError


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
                except ImportError as exc:
                    raise EmbeddingError(
                        f"the torch backend needs the torch extra ({exc}): "
                        "pip install 'codechunkd[torch]', or use backend \"onnx\""
                    ) from exc
                try:
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
