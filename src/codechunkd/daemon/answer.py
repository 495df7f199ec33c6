"""The daemon's answer to a search: hits, and how much of the index they come from.

While the model loads (a first run exports it and calibrates threads: a minute on two
cores) or when it cannot be used, a search is answered at once from the full text and
says so (``note``); query vectors join as soon as the model is there. Every answer says
the coverage: how many chunks answer by full text and how many by vector too (a first
index writes the text first, ``storage/coverage.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from codechunkd import logs
from codechunkd.config.settings import Settings
from codechunkd.embedding.embedder import Vectors
from codechunkd.errors import ConfigError, EmbeddingError
from codechunkd.storage.store import IndexStore

log = logs.get_logger("codechunkd.daemon")

QUERY_WAIT_S = 2.0
"""How long a search waits for the model (shared with the writer, one slice at a time:
a slice takes about ``LockedEmbedder.slice_seconds``) before it answers from the full text."""


class ModelBusy(EmbeddingError):
    """The model was not free for a query within its wait (loading, or a held slice)."""

    def __init__(self, waited_s: float) -> None:
        super().__init__(
            f"the model is busy (loading, or embedding for the index) past {waited_s:g} s"
        )
        self.waited_s = waited_s


class Within(Protocol):
    """An embedder that can give up waiting for its turn (``LockedEmbedder``)."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed_within(self, texts: Sequence[str], wait_s: float) -> Vectors: ...


class _QueryEmbedder:
    """The query's view of the shared model: it waits ``QUERY_WAIT_S`` at most."""

    def __init__(self, inner: Within) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_within(texts, QUERY_WAIT_S)


def answer_search(
    doc: Mapping[str, Any],
    reader: IndexStore,
    settings: Settings,
    embedder: Within,
    *,
    text_only: str | None,
    partial: Callable[[str | None], dict[str, Any] | None],
    rerank_failed: Callable[[str], None] = lambda why: None,
) -> dict[str, Any]:
    """``{"hits", "mode", "partial", "coverage", "note"?}``; ``text_only``: the reason to
    answer without a query vector now (None: use the model); ``rerank_failed`` hears why
    the reranking server failed a search."""
    from codechunkd.storage.reader import Index
    from codechunkd.storage.request import SearchRequest

    try:
        req = SearchRequest.from_json(doc)
    except ConfigError as exc:  # the client's mistake: an error answer, not a failure here
        return {"error": str(exc)}
    note: str | None = None
    if text_only is not None and req.mode != "text":
        req = dataclasses.replace(req, mode="text")
        note = f"answered from the full text only: {text_only}"
    index = Index(reader, settings, embedder=_QueryEmbedder(embedder))
    try:
        hits, notes = index.answer(req)
    except EmbeddingError as exc:
        if req.mode == "text":
            raise
        log.warning("query_vector_failed", error=str(exc))
        req = dataclasses.replace(req, mode="text")
        note = f"answered from the full text only: the model cannot be used ({exc})"
        hits, notes = index.answer(req)
    cov = index.coverage(repo=req.repo)
    if note is None and req.mode != "text" and not cov.complete:
        note = (
            f"vectors for {cov.vectors:,} of {cov.chunks:,} chunks so far: "
            "the others are ranked by their full text"
        )
    if notes:  # a reranker that failed
        log.warning("rerank_failed", error=notes[0])
        rerank_failed(notes[0])
        note = "; ".join([*([note] if note else []), *notes])
    out: dict[str, Any] = {
        "hits": [h.as_dict() for h in hits],
        "mode": req.mode,
        "partial": partial(req.repo),
        "coverage": {**cov.as_dict(), "text": cov.text()},
    }
    if note is not None:
        out["note"] = note
    return out
