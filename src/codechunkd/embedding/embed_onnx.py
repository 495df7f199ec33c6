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

The CPU is used as measured once per machine (``calibrated_layout``): one session with
N intra-op threads, or K sessions sharing each call's batches in Python threads (many
one-thread sessions scale better past ~8 cores); the layout changes no vector.

Loading imports onnxruntime and tokenizers only (well under a second); when
the model is not exported yet, the export runs once in a child process
(``onnx_export.export_in_subprocess``), so this process never imports torch.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from codechunkd import atomicfile, logs
from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding.base import Vectors, normalize
from codechunkd.embedding.batching import CPU_BATCH_TOKENS, length_batches
from codechunkd.embedding.models import model_dimension, model_fingerprint
from codechunkd.embedding.onnx_export import (
    ModelLayout,
    cached_model,
    earlier_export,
    export_in_subprocess,
    model_layout,
)
from codechunkd.errors import EmbeddingError
from codechunkd.platform import usable_cpus
from codechunkd.regularfile import read_regular_file

# sentence-transformers' pooling modes, in the order it concatenates them.
_LEGACY_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


log = logs.get_logger("codechunkd.embedding")


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


#: Bound on the weights all sessions hold together: each onnxruntime session keeps its own
#: copy of the model's weights (91 MB for the bundled model), so at most this many bytes'
#: worth of sessions are opened (22 of the bundled model: enough for 16 one-thread sessions,
#: the fastest layout measured on 16 cores, while a laptop's daemon stays near 2 GB).
SESSIONS_MEMORY = 2 * 1024**3


@dataclass(frozen=True, slots=True)
class SessionLayout:
    """How the CPU is used: ``sessions`` sessions, each with ``threads`` intra-op threads.

    One session of many threads scales worse than many one-thread sessions past ~8 cores
    (126 against 169 texts/s on 16 cores): a batch is split across the sessions instead.
    """

    sessions: int
    threads: int

    @property
    def name(self) -> str:
        return f"{self.sessions}x{self.threads}"


def max_sessions(model_file: Path, budget: int = SESSIONS_MEMORY) -> int:
    """Sessions whose weights fit in ``budget`` bytes (at least one): the graph's file and
    the weights beside it (``model.onnx.data``), when it keeps them apart."""
    try:
        size = model_file.stat().st_size
    except OSError:
        return 1
    weights = model_file.with_name(f"{model_file.name}.data")
    if weights.is_file():
        size += weights.stat().st_size
    return max(1, budget // max(1, size))


def layout_candidates(
    cpus: int, most_sessions: int, sessions: int = 0, threads: int = 0
) -> list[SessionLayout]:
    """The layouts worth timing on ``cpus`` cores; a setting that is not 0 is kept as set.

    One session with 1, 2, 4, … up to all cores (on a busy machine fewer threads win), and
    the layouts that use all cores with several sessions: cores×1, (cores/2)×2, (cores/4)×4, …
    """
    powers = sorted({min(cpus, 2**k) for k in range(cpus.bit_length() + 1)} | {cpus})
    pairs = {(1, t) for t in powers} | {(cpus // t, t) for t in powers}
    if threads > 0:
        pairs = {(1, threads), (max(1, cpus // threads), threads)}
    if sessions > 0:
        per = [t for t in powers if sessions * t <= cpus] or [1]
        pairs = {(sessions, threads)} if threads > 0 else {(sessions, t) for t in per}
    capped = {(min(k, most_sessions), t) for k, t in pairs}
    return [SessionLayout(k, t) for k, t in sorted(capped, key=lambda p: (p[0] * p[1], p[0]))]


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
        self._sessions: list[Any] = []
        self._tokenizer: Any = None
        self._layout: ModelLayout | None = None
        self.sessions = settings.sessions
        """Sessions that share a batch (chosen by calibration when the setting is 0)."""
        self.threads = settings.threads
        """Intra-op threads of each session (chosen by calibration when the setting is 0)."""
        self.session_batches: list[int] = []
        """Batches each open session has run (observable proof that a call used them all)."""

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
        return bool(self._sessions)

    @property
    def parallelism(self) -> int:
        """Batches run at once (the sessions): a call needs this many to use the CPU."""
        return max(1, len(self._sessions) or self.sessions)

    @property
    def batch_size(self) -> int:
        return self._settings.batch_size

    @property
    def model_file(self) -> Path | None:
        """The cached ``.onnx`` file this embedder runs, if it is exported (an export of the
        earlier layout, its weights inside the graph, included: ``load`` converts it)."""
        found = cached_model(self._settings, self._fingerprint)
        return found or earlier_export(self._settings, self._fingerprint)

    def load(self, layout: SessionLayout | None = None) -> None:
        """Export if needed, then open the sessions and the tokenizer (idempotent).

        ``layout`` overrides the settings and calibration (benchmarks time each layout).
        """
        with self._lock:
            if self._sessions:
                return
            path = cached_model(self._settings, self._fingerprint) or self._export()
            model = model_layout(self._settings.model)
            try:
                tokenizer = load_tokenizer(model, self._settings.max_seq_length)
                self._tokenizer = tokenizer
                self._layout = model
                if layout is None:
                    layout = self._choose_layout(path)
                sessions = [open_session(path, layout.threads) for _ in range(layout.sessions)]
            except EmbeddingError:
                raise
            except Exception as exc:
                raise EmbeddingError(f"cannot load ONNX model {path}: {exc}") from exc
            self.sessions, self.threads = layout.sessions, layout.threads
            self.session_batches = [0] * len(sessions)
            self._sessions = sessions

    def _export(self) -> Path:
        """Export the model (in a child process), or convert an export of the earlier layout;
        where that fails but such an export is there (a cache this process cannot write), it
        is run as it is: its weights inside the graph load slower, the vectors are the same."""
        try:
            return export_in_subprocess(self._settings)
        except EmbeddingError as exc:
            kept = earlier_export(self._settings, self._fingerprint)
            if kept is None:
                raise
            log.warning("model_export_kept", model=str(kept), reason=str(exc)[:300])
            return kept

    def _choose_layout(self, path: Path) -> SessionLayout:
        """The settings' layout, measured (once per machine) where a setting is 0."""
        sessions, threads = self._settings.sessions, self._settings.threads
        if sessions > 0 and threads > 0:
            return SessionLayout(sessions, threads)
        cpus = usable_cpus()
        candidates = layout_candidates(cpus, max_sessions(path), sessions, threads)
        if len(candidates) == 1:
            return candidates[0]
        cache = path.parent / f"layout-{cpus}cpu-{sessions}x{threads}.json"
        return calibrated_layout(cache, candidates, functools.partial(self.time_layout, path))

    def time_layout(self, path: Path, layout: SessionLayout, texts: Sequence[str]) -> float:
        """Texts per second of ``layout`` on ``texts`` after a warm-up (tokenizer loaded)."""
        sessions = [open_session(path, layout.threads) for _ in range(layout.sessions)]
        self._run_texts(sessions, texts[: 2 * layout.sessions])  # warm up every session
        started = time.perf_counter()
        self._run_texts(sessions, texts)
        return len(texts) / (time.perf_counter() - started)

    def unload(self) -> None:
        with self._lock:
            self._sessions = []
            self._tokenizer = None

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        self.load()
        with self._lock:  # one call at a time: its batches already use every session
            return self._run_texts(self._sessions, texts)

    def _run_texts(self, sessions: Sequence[Any], texts: Sequence[str]) -> Vectors:
        """Embed with ``sessions`` (the caller holds the lock, or owns them).

        Texts are tokenized once, sorted by token count and cut into batches
        (``length_batches``): of ``batch_size``, or, when there are fewer texts than the
        sessions' full batches, one batch of equal counts per session.  With several
        sessions, each runs in its own Python thread (onnxruntime releases the GIL): session
        j first takes the j-th longest batch (so every session has work, whatever the thread
        start order), then the next batch left, longest first, so the last to finish are
        short.  A layout changes no vector beyond float rounding.
        """
        tokenizer, layout = self._tokenizer, self._layout
        assert layout is not None
        unique = list(dict.fromkeys(texts))
        prepared = [t.lower() for t in unique] if layout.do_lower_case else unique
        try:
            encodings = tokenizer.encode_batch(prepared)
        except Exception as exc:
            raise EmbeddingError(f"tokenizing failed: {exc}") from exc
        modes = pooling_modes(layout.pooling)
        lengths = [len(e.ids) for e in encodings]
        batches = length_batches(
            lengths, self._settings.batch_size, workers=len(sessions), max_tokens=CPU_BATCH_TOKENS
        )
        rows: dict[int, Vectors] = {}
        counts = self.session_batches if sessions is self._sessions else [0] * len(sessions)

        def run(slot: int, batch: list[int]) -> None:
            pooled = run_batch(sessions[slot], [encodings[i] for i in batch], modes)
            for row, i in enumerate(batch):
                rows[i] = pooled[row]
            counts[slot] += 1  # each slot is counted by its own thread only

        if len(sessions) == 1 or len(batches) == 1:
            for batch in batches:
                run(0, batch)
        else:
            busy = min(len(sessions), len(batches))
            firsts = batches[::-1][:busy]  # the longest, one per session
            pending = batches[: len(batches) - busy]  # popped from the end: longest first

            def worker(slot: int) -> None:
                run(slot, firsts[slot])
                while True:
                    try:
                        batch = pending.pop()  # atomic under the GIL
                    except IndexError:
                        return
                    run(slot, batch)

            with ThreadPoolExecutor(busy, thread_name_prefix="onnx") as pool:
                for future in [pool.submit(worker, slot) for slot in range(busy)]:
                    future.result()
        index = {text: i for i, text in enumerate(unique)}
        out = np.stack([rows[index[t]] for t in texts]).astype(np.float32, copy=False)
        if self._dim is None:
            self._dim = int(out.shape[1])
        return out


def open_session(path: Path, threads: int) -> Any:
    """An onnxruntime CPU session of ``path`` with ``threads`` intra-op threads."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def load_tokenizer(model: ModelLayout, max_seq_length: int) -> Any:
    """The model's ``tokenizer.json``, unpadded, truncated as sentence-transformers does."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model.tokenizer_json))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_seq_length)
    return tokenizer


def padded_feed(session: Any, encodings: Sequence[Any]) -> dict[str, npt.NDArray[np.int64]]:
    """The session's inputs for one batch, padded to its longest text."""
    inputs = [i.name for i in session.get_inputs()]
    width = max(len(enc.ids) for enc in encodings)
    feed = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in inputs}
    for row, enc in enumerate(encodings):
        n = len(enc.ids)
        feed["input_ids"][row, :n] = enc.ids
        feed["attention_mask"][row, :n] = 1
        if "token_type_ids" in feed:
            feed["token_type_ids"][row, :n] = enc.type_ids
    return feed


def run_batch(session: Any, encodings: Sequence[Any], modes: Sequence[str]) -> Vectors:
    """One batch through the model: pooled, normalised vectors in the batch's order."""
    feed = padded_feed(session, encodings)
    try:
        (hidden,) = session.run(["last_hidden_state"], feed)
    except Exception as exc:
        raise EmbeddingError(f"ONNX inference failed: {exc}") from exc
    return normalize(pool(hidden, feed["attention_mask"], modes))


def sample_code_texts(count: int) -> list[str]:
    """Sample texts (calibration, the fp16 check): real code that ships with Python, offline."""
    import json.decoder
    import shlex
    import string
    import textwrap

    lines: list[str] = []
    for module in (json.decoder, textwrap, shlex, string):
        lines += Path(module.__file__ or "").read_text(encoding="utf-8").splitlines()
    blocks = ["\n".join(lines[i : i + 18]) for i in range(0, len(lines), 18)]
    return [b for b in blocks if b.strip()][:count]


def calibrated_layout(
    cache: Path,
    candidates: Sequence[SessionLayout],
    measure: Callable[[SessionLayout, Sequence[str]], float],
) -> SessionLayout:
    """The fastest layout on this machine, measured once and cached in ``cache``.

    Times each candidate on real code and keeps the one with the fewest threads in all
    (then the fewest sessions: less memory) within 5 % of the best; the choice is stored
    next to the exported model (per CPU count and settings), so the measurement (a few
    seconds per layout) happens once.  A cached choice that is not among ``candidates``
    (a damaged file, or one from other settings) is measured again.
    """
    try:
        chosen = json.loads(read_regular_file(cache, 1 << 16, limit_says="64 KiB"))
        cached = SessionLayout(int(chosen["sessions"]), int(chosen["threads"]))
        if cached in candidates:  # a damaged or edited file (0 sessions) is measured again
            return cached
    except (OSError, ValueError, KeyError, TypeError):  # OSError: none, a FIFO, /dev/zero
        pass
    most = max(c.sessions * c.threads for c in candidates)
    texts = sample_code_texts(max(48, 4 * most))
    speeds = {layout: measure(layout, texts) for layout in candidates}
    best = max(speeds.values())
    choice = min(
        (layout for layout, v in speeds.items() if v >= 0.95 * best),
        key=lambda c: (c.sessions * c.threads, c.sessions),
    )
    figures = {k.name: round(v, 1) for k, v in speeds.items()}
    log.info(
        "layout_calibrated",
        texts_per_s=figures,
        sessions=choice.sessions,
        threads=choice.threads,
    )
    record = {"sessions": choice.sessions, "threads": choice.threads, "texts_per_s": figures}
    with contextlib.suppress(OSError):
        atomicfile.write_text(cache, json.dumps(record))
    return choice
