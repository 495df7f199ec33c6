"""The ``onnx`` backend: the sentence-transformers model run by onnxruntime, without torch.

Texts are tokenized by the model's own ``tokenizer.json`` (``tokenizers``, Rust),
truncated to ``max_seq_length`` tokens with special tokens included, exactly as
sentence-transformers does.  Batches are formed from texts sorted by token count,
so little padding is computed.  The transformer's ``last_hidden_state`` is pooled
as the model's ``1_Pooling/config.json`` says (mean over the attention mask for
all-MiniLM-L6-v2) and L2-normalised.

The fp32 graph gives the same vectors as the torch backend (mean cosine ≥ 0.9999,
enforced by a test), so it has the same ``model_id`` and shares the embedding
cache.  The optional int8 copy (``embedding.quantized``) does not, and has its own.

Loading imports onnxruntime and tokenizers only (well under a second); when
the model is not exported yet, the export runs once in a child process
(``onnx_export.export_in_subprocess``), so this process never imports torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog

from codechunkd import atomicfile
from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding.base import Vectors
from codechunkd.embedding.models import model_dimension, model_fingerprint
from codechunkd.embedding.onnx_export import (
    ModelLayout,
    cached_model,
    export_in_subprocess,
    model_layout,
)
from codechunkd.errors import EmbeddingError

# sentence-transformers' pooling modes, in the order it concatenates them.
_LEGACY_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


log = structlog.get_logger("codechunkd.embedding")


def pooling_modes(config: dict[str, Any]) -> tuple[str, ...]:
    """The pooling modes of a ``1_Pooling/config.json`` (old boolean keys or ``pooling_mode``)."""
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        return (mode,)
    if isinstance(mode, list):
        return tuple(str(m) for m in mode)
    modes = tuple(name for key, name in _LEGACY_MODES.items() if config.get(key))
    return modes or ("mean",)


def pool(
    hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64], modes: Sequence[str]
) -> npt.NDArray[np.float32]:
    """Token vectors (batch, seq, dim) to one vector per text, as sentence-transformers pools."""
    m = mask.astype(np.float32)[:, :, None]
    lengths = np.clip(m.sum(axis=1), 1e-9, None)
    parts: list[npt.NDArray[np.float32]] = []
    for mode in modes:
        if mode == "mean":
            parts.append((hidden * m).sum(axis=1) / lengths)
        elif mode == "mean_sqrt_len_tokens":
            parts.append((hidden * m).sum(axis=1) / np.sqrt(lengths))
        elif mode == "cls":
            parts.append(hidden[:, 0])
        elif mode == "max":
            parts.append(np.where(m > 0, hidden, np.float32(-1e9)).max(axis=1))
        elif mode == "lasttoken":
            last = mask.sum(axis=1).astype(np.int64) - 1
            parts.append(hidden[np.arange(hidden.shape[0]), np.clip(last, 0, None)])
        elif mode == "weightedmean":
            w = m * np.arange(1, hidden.shape[1] + 1, dtype=np.float32)[None, :, None]
            parts.append((hidden * w).sum(axis=1) / np.clip(w.sum(axis=1), 1e-9, None))
        else:
            raise EmbeddingError(f"the onnx backend cannot reproduce pooling mode {mode!r}")
    out = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    return np.asarray(out, dtype=np.float32)


def normalize(vectors: npt.NDArray[np.float32]) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.asarray(vectors / np.clip(norms, 1e-12, None), dtype=np.float32)


class OnnxEmbedder:
    """onnxruntime + tokenizers; exports the model on first use if no export is cached."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        self._settings = settings
        self._fingerprint = model_fingerprint(settings.model)
        base = f"{self._fingerprint}/seq{settings.max_seq_length}"
        # fp32 vectors equal torch's (tested), so the id is torch's and the cache is shared.
        self._id = f"{base}/onnx-int8" if settings.quantized else base
        self._dim = model_dimension(settings.model)
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._layout: ModelLayout | None = None
        self.threads = settings.threads
        """Intra-op threads of the session (chosen by calibration when the setting is 0)."""

    @property
    def model_id(self) -> str:
        return self._id

    @property
    def dimension(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["x"]).shape[1])
        return self._dim

    @property
    def loaded(self) -> bool:
        return self._session is not None

    @property
    def model_file(self) -> Path | None:
        """The cached ``.onnx`` file this embedder runs, if it is exported."""
        return cached_model(self._settings, self._fingerprint)

    def load(self) -> None:
        """Export if needed, then open the session and the tokenizer (idempotent)."""
        with self._lock:
            if self._session is not None:
                return
            path = self.model_file or export_in_subprocess(self._settings)
            layout = model_layout(self._settings.model)
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                def open_session(threads: int) -> Any:
                    options = ort.SessionOptions()
                    options.intra_op_num_threads = threads
                    options.inter_op_num_threads = 1
                    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                    options.log_severity_level = 3
                    return ort.InferenceSession(
                        str(path), sess_options=options, providers=["CPUExecutionProvider"]
                    )

                tokenizer = Tokenizer.from_file(str(layout.tokenizer_json))
                tokenizer.no_padding()
                tokenizer.enable_truncation(max_length=self._settings.max_seq_length)
                self._tokenizer = tokenizer
                self._layout = layout
                threads = self._settings.threads
                if threads <= 0:
                    threads = calibrated_threads(path.parent, open_session, self._run_texts)
                session = open_session(threads)
            except EmbeddingError:
                raise
            except Exception as exc:
                raise EmbeddingError(f"cannot load ONNX model {path}: {exc}") from exc
            self.threads = threads
            self._session = session

    def unload(self) -> None:
        with self._lock:
            self._session = None
            self._tokenizer = None

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        self.load()
        with self._lock:  # one run at a time: the session already uses its threads
            return self._run_texts(self._session, texts)

    def _run_texts(self, session: Any, texts: Sequence[str]) -> Vectors:
        """Embed with one session (the caller holds the lock, or owns the session)."""
        tokenizer, layout = self._tokenizer, self._layout
        assert layout is not None
        unique = list(dict.fromkeys(texts))
        prepared = [t.lower() for t in unique] if layout.do_lower_case else unique
        try:
            encodings = tokenizer.encode_batch(prepared)
        except Exception as exc:
            raise EmbeddingError(f"tokenizing failed: {exc}") from exc
        modes = pooling_modes(layout.pooling)
        inputs = [i.name for i in session.get_inputs()]
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        rows: dict[int, Vectors] = {}
        size = self._settings.batch_size
        for start in range(0, len(order), size):
            batch = order[start : start + size]
            width = max(len(encodings[i].ids) for i in batch)
            feed = {name: np.zeros((len(batch), width), dtype=np.int64) for name in inputs}
            for row, i in enumerate(batch):
                enc = encodings[i]
                n = len(enc.ids)
                feed["input_ids"][row, :n] = enc.ids
                feed["attention_mask"][row, :n] = 1
                if "token_type_ids" in feed:
                    feed["token_type_ids"][row, :n] = enc.type_ids
            try:
                (hidden,) = session.run(["last_hidden_state"], feed)
            except Exception as exc:
                raise EmbeddingError(f"ONNX inference failed: {exc}") from exc
            pooled = normalize(pool(hidden, feed["attention_mask"], modes))
            for row, i in enumerate(batch):
                rows[i] = pooled[row]
        index = {text: i for i, text in enumerate(unique)}
        out = np.stack([rows[index[t]] for t in texts]).astype(np.float32, copy=False)
        if self._dim is None:
            self._dim = int(out.shape[1])
        return out


def _calibration_texts(count: int = 48) -> list[str]:
    """Sample texts for calibration: real code that ships with Python, always offline."""
    import json.decoder
    import textwrap

    lines: list[str] = []
    for module in (json.decoder, textwrap):
        lines += Path(module.__file__ or "").read_text(encoding="utf-8").splitlines()
    blocks = ["\n".join(lines[i : i + 18]) for i in range(0, len(lines), 18)]
    return [b for b in blocks if b.strip()][:count]


def calibrated_threads(
    folder: Path,
    open_session: Callable[[int], Any],
    run: Callable[[Any, Sequence[str]], Vectors],
) -> int:
    """The fastest intra-op thread count on this machine, measured once and cached.

    Tries 1, 2, 4, … up to the CPU count on real code and keeps the fewest
    threads within 5 % of the best; the choice is stored next to the exported
    model (per CPU count), so the measurement (a few seconds) happens once.
    """
    cpus = os.cpu_count() or 1
    cache = folder / f"threads-{cpus}cpu.json"
    try:
        return int(json.loads(cache.read_text())["threads"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    texts = _calibration_texts()
    candidates = sorted({min(cpus, 2**k) for k in range(4)})
    speeds: dict[int, float] = {}
    for threads in candidates:
        session = open_session(threads)
        run(session, texts[:8])  # warm up
        started = time.perf_counter()
        run(session, texts)
        speeds[threads] = len(texts) / (time.perf_counter() - started)
    best = max(speeds.values())
    choice = min(t for t, v in speeds.items() if v >= 0.95 * best)
    log.info(
        "threads_calibrated",
        cpus=cpus,
        texts_per_s={str(k): round(v, 1) for k, v in speeds.items()},
        threads=choice,
    )
    with contextlib.suppress(OSError):
        atomicfile.write_text(cache, json.dumps({"threads": choice, "texts_per_s": speeds}))
    return choice
