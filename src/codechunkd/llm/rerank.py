"""A client of reranking servers: the ``/rerank`` API of Cohere and Jina.

A reranker (a cross-encoder) reads a question and one candidate together and says how well
the candidate answers it: what a search's two retrievers, which read each alone, cannot.
vLLM, llama.cpp's server, Infinity and the hosted APIs (Cohere, Jina, Voyage) all take
``POST {url}/rerank`` with ``{"model", "query", "documents", "top_n"}`` and answer
``{"results": [{"index", "relevance_score"}, ...]}`` (``rerank.protocol = "cohere"``);
Hugging Face's text-embeddings-inference takes ``{"query", "texts", "truncate"}`` and
answers a bare list of ``{"index", "score"}`` (``"tei"``). Either answer is read.

``Reranker.scores(query, documents)`` returns one finite score per document, in the
documents' order, or raises :class:`RerankError` with one line saying why: the server
cannot be reached, answers an error or too slowly (one try within ``rerank.timeout``: a
search is not held up by retries), or answers anything but one finite score for each
document. The caller then keeps its own order. Standard library only (``urllib``); the
API key is read from the environment variable ``rerank.api_key_env`` names and never
logged or shown.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from codechunkd.config.settings import RerankSettings
from codechunkd.errors import CodechunkdError, ConfigError
from codechunkd.httpclient import Retryable, api_key, check_url, post_json, safe_url


class RerankError(CodechunkdError):
    """The reranker gave no usable answer (the search keeps its own order)."""


def endpoint(settings: RerankSettings) -> str:
    """Where the requests go: ``rerank.url`` with ``/rerank`` appended."""
    return settings.url.rstrip("/") + "/rerank"


class Reranker:
    """One reranking endpoint (``rerank.*`` settings)."""

    def __init__(
        self,
        settings: RerankSettings,
        *,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not settings.url or not settings.model:
            raise ConfigError("a reranker needs 'rerank.url' and 'rerank.model'", key="rerank.url")
        check_url(settings.url, "rerank.url")
        env = os.environ if environ is None else environ
        self._key = api_key(settings.api_key_env, "rerank.api_key_env", env)
        self._settings = settings
        self._endpoint = endpoint(settings)
        self.shown = safe_url(self._endpoint)
        self._clock = clock

    def __repr__(self) -> str:
        return f"Reranker({self.shown!r}, model={self._settings.model!r})"

    @property
    def depth(self) -> int:
        """Candidates a search sends (``rerank.depth``)."""
        return self._settings.depth

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """The server's relevance of each document to ``query``, in the documents' order."""
        if not documents:
            return []
        if self._settings.protocol == "tei":  # long texts cut by the server, not refused
            asked: dict[str, Any] = {"query": query, "texts": list(documents), "truncate": True}
        else:
            asked = {
                "model": self._settings.model,
                "query": query,
                "documents": list(documents),
                "top_n": len(documents),
                "return_documents": False,
            }
        payload = json.dumps(asked).encode()
        try:
            body = post_json(
                self._endpoint,
                payload,
                key=self._key,
                timeout=self._settings.timeout,
                now=self._clock,
                fail=lambda reason: RerankError(f"reranker {self.shown}: {reason}"),
            )
        except Retryable as exc:
            raise RerankError(f"reranker {self.shown}: {exc.reason}") from None
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            raise RerankError(f"reranker {self.shown}: the answer is not JSON") from None
        return self._read(answer, len(documents))

    def _read(self, answer: Any, count: int) -> list[float]:
        """One finite score per document, each index once: anything else is an error."""
        rows = answer.get("results") if isinstance(answer, dict) else answer
        if not isinstance(rows, list):
            raise RerankError(f"reranker {self.shown}: the answer has no list of results")
        found: dict[int, float] = {}
        for row in rows:
            index = row.get("index") if isinstance(row, dict) else None
            score = row.get("relevance_score", row.get("score")) if isinstance(row, dict) else None
            if (
                type(index) is not int
                or not 0 <= index < count
                or index in found
                or isinstance(score, bool)
                or not isinstance(score, int | float)
                or not math.isfinite(score)
            ):
                raise RerankError(
                    f"reranker {self.shown}: a result is not a new index below {count} "
                    "with a finite score"
                )
            found[index] = float(score)
        if len(found) != count:
            raise RerankError(f"reranker {self.shown}: scored {len(found)} of {count} candidates")
        return [found[i] for i in range(count)]
