"""The torch backend: sentence-transformers, loaded lazily and unloadable when idle.

It imports sentence-transformers (slow) only when the first text is embedded, so
commands that never embed stay fast.  It needs the ``torch`` extra
(``pip install 'codechunkd[torch]'``).

The model's modules run as sentence-transformers runs them, but the loop around
them is ours, built for a GPU: a producer thread tokenizes (the model's fast Rust
tokenizer, on several threads when the device is a GPU) and pads length-bucketed
batches (``batching.length_batches``: large on a GPU, bounded in padded tokens)
while the caller's thread runs the model, so the GPU never waits for the
tokenizer.  On CUDA the weights are fp16 when, on a fixed sample of real code,
every vector stays within cosine ``FP16_MIN_COSINE`` of fp32's (then the vectors
keep the fp32 model id and share its cache); when one does not, the model id
says ``fp16`` so the two never mix.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding.base import Vectors, normalize
from codechunkd.embedding.batching import CPU_BATCH_TOKENS, length_batches
from codechunkd.embedding.models import model_dimension, model_fingerprint, model_path
from codechunkd.errors import EmbeddingError
from codechunkd.platform import usable_cpus

#: fp16 vectors within this cosine of fp32's count as the same vectors (same model id).
FP16_MIN_COSINE = 0.999
#: On a GPU: texts per batch, and padded tokens per batch (long texts make smaller batches).
GPU_BATCH = 1024
GPU_BATCH_TOKENS = 1024 * 128
#: Texts tokenized together: sorted within, so batches pad little; the next chunk is
#: tokenized while the device runs this one.
TOKENIZE_CHUNK = 4096

Batch = tuple[list[int], dict[str, npt.NDArray[np.int64]]]


def fp16_model_id(base: str, min_cosine: float) -> str:
    """The model id of fp16 vectors: fp32's when they agree within the bound, else marked."""
    return base if min_cosine >= FP16_MIN_COSINE else f"{base}/fp16"


def min_cosine(a: Vectors, b: Vectors) -> float:
    """The smallest cosine between rows of ``a`` and ``b`` (any norms)."""
    return float((normalize(a) * normalize(b)).sum(axis=1).min())


def padded(encoded: dict[str, list[list[int]]], batch: Sequence[int]) -> dict[str, Any]:
    """The tokenizer's columns (input_ids, attention_mask, …) for ``batch``, zero-padded."""
    width = max(len(encoded["input_ids"][i]) for i in batch)
    out: dict[str, Any] = {}
    for key, rows in encoded.items():
        array = np.zeros((len(batch), width), dtype=np.int64)
        for row, i in enumerate(batch):
            array[row, : len(rows[i])] = rows[i]
        out[key] = array
    return out


class TorchEmbedder:
    """sentence-transformers on torch, loaded lazily and unloadable when idle."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        self._settings = settings
        self._model: Any = None
        self._lock = threading.Lock()
        self._base_id = f"{model_fingerprint(settings.model)}/seq{settings.max_seq_length}"
        self._id = self._base_id
        self._dim = model_dimension(settings.model)
        self._gpu = settings.device.startswith("cuda")
        self.fp16_min_cosine: float | None = None
        """On CUDA: the smallest cosine of fp16 to fp32 vectors on the sample (None: fp32)."""

    @property
    def model_id(self) -> str:
        """fp32's id, or, on CUDA when fp16 strays past the bound, one marked ``fp16``.

        Known once loaded: on CUDA the id is settled at load, before the first vector.
        """
        if self._gpu:
            self._load()
        return self._id

    @property
    def dimension(self) -> int:
        if self._dim is None:
            self._dim = int(self._load().get_embedding_dimension())
        return self._dim

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def parallelism(self) -> int:
        return 1

    @property
    def batch_size(self) -> int:
        """Texts per batch: large on a GPU, which needs them to be busy."""
        return max(self._settings.batch_size, GPU_BATCH) if self._gpu else self._settings.batch_size

    def load(self) -> None:
        self._load()

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
                    model.eval()
                except Exception as exc:
                    raise EmbeddingError(
                        f"cannot load embedding model {self._settings.model!r}: {exc}"
                    ) from exc
                model.max_seq_length = self._settings.max_seq_length
                if self._gpu:
                    from codechunkd.embedding.embed_onnx import sample_code_texts

                    self.fp16_min_cosine = to_fp16(model, self, sample_code_texts(64))
                    self._id = fp16_model_id(self._base_id, self.fp16_min_cosine)
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
            return self.run(model, texts)
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"embedding failed: {exc}") from exc

    def run(self, model: Any, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` with ``model``: batches from the producer thread, the model here."""
        import torch

        unique = list(dict.fromkeys(texts))
        device = torch.device(self._settings.device)
        rows: dict[int, Vectors] = {}
        with torch.inference_mode():
            for batch, feed in self._produced(model, unique):
                features = {}
                for key, array in feed.items():
                    tensor = torch.from_numpy(array)
                    if device.type == "cuda":
                        tensor = tensor.pin_memory().to(device, non_blocking=True)
                    features[key] = tensor
                out = model(features)["sentence_embedding"].float().cpu().numpy()
                vectors = normalize(out)
                for row, i in enumerate(batch):
                    rows[i] = vectors[row]
        index = {text: i for i, text in enumerate(unique)}
        return np.stack([rows[index[t]] for t in texts]).astype(np.float32, copy=False)

    def _produced(self, model: Any, texts: list[str]) -> Iterator[Batch]:
        """Padded batches of ``texts``, tokenized and bucketed on a producer thread."""
        size = self.batch_size
        tokens = GPU_BATCH_TOKENS if self._gpu else CPU_BATCH_TOKENS
        workers = min(8, usable_cpus()) if self._gpu else 1
        msl = self._settings.max_seq_length
        out: queue.Queue[Batch | BaseException | None] = queue.Queue(maxsize=4)
        stop = threading.Event()

        def put(item: Batch | BaseException | None) -> bool:
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            try:
                for start in range(0, len(texts), TOKENIZE_CHUNK):
                    part = texts[start : start + TOKENIZE_CHUNK]
                    encoded = tokenize(model.tokenizer, part, msl, workers)
                    lengths = [len(ids) for ids in encoded["input_ids"]]
                    for batch in reversed(length_batches(lengths, size, max_tokens=tokens)):
                        if not put(([start + i for i in batch], padded(encoded, batch))):
                            return
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
                put(exc)
                return
            put(None)

        producer = threading.Thread(target=produce, name="codechunkd-tokenize", daemon=True)
        producer.start()
        try:
            while (item := out.get()) is not None:
                if isinstance(item, BaseException):
                    raise EmbeddingError(f"tokenizing failed: {item}") from item
                yield item
        finally:
            stop.set()
            producer.join()


def tokenize(tokenizer: Any, texts: list[str], max_length: int, workers: int) -> dict[str, Any]:
    """Token ids of ``texts`` as sentence-transformers makes them (truncated, unpadded).

    The fast tokenizer's batch encoding runs in Rust without the GIL, so ``workers``
    threads each encode a share of the texts at once (the GPU needs more texts per second
    than one thread tokenizes).
    """

    def one(part: list[str]) -> dict[str, Any]:
        return dict(tokenizer(part, padding=False, truncation=True, max_length=max_length))

    if workers <= 1 or len(texts) < 2 * workers:
        return one(texts)
    step = -(-len(texts) // workers)
    with ThreadPoolExecutor(workers, thread_name_prefix="codechunkd-tokenize") as pool:
        parts = list(pool.map(one, [texts[i : i + step] for i in range(0, len(texts), step)]))
    return {key: [row for part in parts for row in part[key]] for key in parts[0]}


def to_fp16(model: Any, embedder: TorchEmbedder, texts: Sequence[str]) -> float:
    """Turn ``model`` to fp16; the smallest cosine of its vectors to fp32's on ``texts``.

    Runs on whatever device the model is on (tested on CPU; used on CUDA at load).
    """
    fp32 = embedder.run(model, texts)
    model.half()
    return min_cosine(embedder.run(model, texts), fp32)
