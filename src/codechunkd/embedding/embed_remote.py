"""The ``remote`` backend: an OpenAI-compatible ``/v1/embeddings`` server.

Works with anything that speaks that protocol (text-embeddings-inference, vLLM,
Ollama, llama.cpp server, hosted APIs).  Texts go out in batches of
``embedding.batch_size`` (smaller when a call has fewer texts than that many per request,
so all are in flight), at most ``embedding.concurrency`` requests at a time.
A 429, a 5xx, a timeout or a refused/reset connection is retried up to
``embedding.retries`` times with exponential back-off (full jitter), waiting at
least what a ``Retry-After`` header asks; any other 4xx fails at once.

The server must answer with the configured model and one vector per text of the
index's dimension (``embedding.remote_dimension``, or the first usable answer's):
an answer that differs raises :class:`EndpointMismatch` instead of writing vectors
of another model into the index.  A vector that is not finite or is all zeros is
never kept: the request is retried as a failed one is, then fails with an
``EmbeddingError`` saying so; so does an answer that is not JSON.  An answer of another
shape (a row that is no object, an index out of place, an embedding that is no list of
numbers) is an ``EmbeddingError`` at once: search falls back to full-text.  Vectors are
L2-normalised here, whatever the server does.  The model id (the embedding cache key)
is ``remote:<model>``.

The API key is read from the environment variable named by
``embedding.api_key_env`` and sent as a bearer token; it is never logged and
never part of an error message.  Only the standard library is used (``urllib``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding.base import Vectors, normalize, vector_problems
from codechunkd.errors import ConfigError, EmbeddingError
from codechunkd.httpclient import (
    Retryable,
    api_key,
    backoff,
    check_url,
    post_json,
    retrying,
    safe_url,
)


class EndpointMismatch(EmbeddingError):
    """The server answered with another model or dimension than the index's."""

    def __init__(self, what: str, expected: object, found: object, url: str) -> None:
        self.what = what
        self.expected = expected
        self.found = found
        self.url = url
        super().__init__(
            f"embedding server {url} returned {what} {found!r}, expected {expected!r}; "
            "configure the server's model (embedding.remote_model, embedding.remote_dimension) "
            "or use another index directory"
        )


def _same_model(expected: str, found: str) -> bool:
    """Servers echo the model name, sometimes with Ollama's implicit ``:latest`` tag."""

    def strip(name: str) -> str:
        return name.removesuffix(":latest")

    return strip(expected) == strip(found)


class RemoteEmbedder:
    """Embeds through an OpenAI-compatible ``POST {remote_url}/embeddings``."""

    def __init__(
        self,
        settings: EmbeddingSettings,
        *,
        environ: Mapping[str, str] | None = None,
        backoff: float = 0.5,
        max_delay: float = 60.0,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``backoff`` is the first retry's delay (doubling after); ``stop`` cuts waits short."""
        if not settings.remote_url:
            raise ConfigError(
                "the remote embedding backend needs 'embedding.remote_url'",
                key="embedding.remote_url",
            )
        if not settings.remote_model:
            raise ConfigError(
                "the remote embedding backend needs 'embedding.remote_model'",
                key="embedding.remote_model",
            )
        for key, value in {
            "embedding.timeout": settings.timeout,
            "embedding.concurrency": settings.concurrency,
        }.items():
            if value <= 0:
                raise ConfigError(f"setting {key!r} must be positive, got {value}", key=key)
        if settings.retries < 0 or settings.remote_dimension < 0:
            raise ConfigError("'embedding.retries' and 'embedding.remote_dimension' must be >= 0")
        check_url(settings.remote_url, "embedding.remote_url")
        env = os.environ if environ is None else environ
        self._key = api_key(settings.api_key_env, "embedding.api_key_env", env)
        self._settings = settings
        self._endpoint = settings.remote_url.rstrip("/") + "/embeddings"
        self._shown = safe_url(self._endpoint)
        self._dim: int | None = settings.remote_dimension or None
        self._dim_lock = threading.Lock()
        self._backoff = backoff
        self._max_delay = max_delay
        self._stop = stop or threading.Event()
        self._clock = clock

    def __repr__(self) -> str:
        return f"RemoteEmbedder({self._shown!r}, model={self._settings.remote_model!r})"

    @property
    def model_id(self) -> str:
        return f"remote:{self._settings.remote_model}"

    @property
    def parallelism(self) -> int:
        """Requests in flight at once: a call needs this many batches to keep them all."""
        return self._settings.concurrency

    @property
    def batch_size(self) -> int:
        return self._settings.batch_size

    @property
    def dimension(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        # Fewer texts than full requests for every worker: split them evenly, all in flight.
        size = min(self._settings.batch_size, -(-len(unique) // self._settings.concurrency))
        batches = [unique[i : i + size] for i in range(0, len(unique), size)]
        workers = min(self._settings.concurrency, len(batches))
        if workers == 1:
            parts = [self._embed_batch(b) for b in batches]
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="codechunkd-embed") as pool:
                futures = [pool.submit(self._embed_batch, b) for b in batches]
                done, _ = wait(futures, return_when=FIRST_EXCEPTION)
                failed = [f for f in futures if f in done and f.exception() is not None]
                if failed:
                    for f in futures:
                        f.cancel()
                    raise _first_error(failed)
                parts = [f.result() for f in futures]
        vectors = np.concatenate(parts)
        index = {text: i for i, text in enumerate(unique)}
        return vectors[[index[t] for t in texts]]

    def _embed_batch(self, batch: list[str]) -> Vectors:
        payload = json.dumps(
            {"model": self._settings.remote_model, "input": batch, "encoding_format": "float"}
        ).encode()
        return retrying(
            lambda: self._vectors(self._post(payload), len(batch)),
            retries=self._settings.retries,
            delay=self._delay,
            stop=self._stop,
            gave_up=lambda tries, exc: EmbeddingError(
                f"embedding server {self._shown} failed {tries} times, last: {exc.reason}"
            ),
            cancelled=lambda: EmbeddingError("embedding cancelled: shutting down"),
            event="embedding_retry",
            url=self._shown,
        )

    def _delay(self, attempt: int, asked: float | None) -> float:
        return backoff(attempt, asked, base=self._backoff, limit=self._max_delay)

    def _post(self, payload: bytes) -> dict[str, Any]:
        body = post_json(
            self._endpoint,
            payload,
            key=self._key,
            timeout=self._settings.timeout,
            now=self._clock,
            fail=lambda reason: EmbeddingError(f"embedding server {self._shown}: {reason}"),
        )
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            raise Retryable("the answer is not JSON") from None
        if not isinstance(answer, dict):
            raise EmbeddingError(f"embedding server {self._shown} answered {type(answer).__name__}")
        return answer

    def _vectors(self, answer: dict[str, Any], count: int) -> Vectors:
        """The answer's vectors in input order, every row checked first: anything but one
        list of numbers per text, each at its own ``index``, is an ``EmbeddingError``."""
        found_model = answer.get("model")
        if (
            isinstance(found_model, str)
            and found_model
            and not _same_model(self._settings.remote_model, found_model)
        ):
            raise EndpointMismatch("model", self._settings.remote_model, found_model, self._shown)
        data = answer.get("data")
        if not isinstance(data, list) or len(data) != count:
            got = len(data) if isinstance(data, list) else "no"
            raise EmbeddingError(
                f"embedding server {self._shown} returned {got} vectors for {count} texts"
            )
        if not all(isinstance(d, dict) and isinstance(d.get("embedding"), list) for d in data):
            raise EmbeddingError(f"embedding server {self._shown} returned malformed vectors")
        order = [d.get("index", i) for i, d in enumerate(data)]
        if any(type(i) is not int for i in order) or sorted(order) != list(range(count)):
            raise EmbeddingError(
                f"embedding server {self._shown} returned vectors whose indices are not "
                f"0 to {count - 1}"
            )
        rows = [data[i]["embedding"] for i in np.argsort(order, kind="stable")]
        widths = sorted({len(r) for r in rows})
        if len(widths) != 1:
            raise EndpointMismatch("vectors of dimensions", self._dim, widths, self._shown)
        try:
            with np.errstate(over="ignore"):  # a value past float32's range: inf, refused below
                vectors = np.array(rows, dtype=np.float32)
        except (TypeError, ValueError, OverflowError):
            raise EmbeddingError(
                f"embedding server {self._shown} returned malformed vectors"
            ) from None
        if vectors.ndim != 2:
            raise EmbeddingError(f"embedding server {self._shown} returned malformed vectors")
        width = int(vectors.shape[1])
        if self._dim is not None and width != self._dim:
            raise EndpointMismatch("dimension", self._dim, width, self._shown)
        problems = (
            vector_problems(vectors, width) if width else dict.fromkeys(range(count), "empty")
        )
        if problems:  # asked again (a glitch may pass); persisting, an EmbeddingError
            counts = Counter(problems.values())
            what = ", ".join(f"{n} {why}" for why, n in sorted(counts.items()))
            raise Retryable(
                f"returned unusable vectors for {len(problems)} of {count} texts ({what})"
            )
        with self._dim_lock:  # learned from a usable answer only: a glitch fixes nothing
            if self._dim is None:
                self._dim = width
        if width != self._dim:  # another request learned it first, from another width
            raise EndpointMismatch("dimension", self._dim, width, self._shown)
        return normalize(vectors)


def _first_error(failed: list[Future[Vectors]]) -> BaseException:
    errors = [f.exception() for f in failed]
    return next((e for e in errors if e is not None), EmbeddingError("embedding failed"))
