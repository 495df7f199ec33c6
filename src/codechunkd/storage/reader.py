"""The reader API: ``from codechunkd import open_index``.

Read-only, no lock, strong read consistency: a reader sees the writer's latest
commit and never a file half-replaced.  Safe to use while a daemon writes the
same directory, from any number of processes.

    index = open_index("/path/to/index")
    for hit in index.search("parse the config file", k=5, language="python"):
        print(hit.path, hit.start_line, hit.symbol, hit.score)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from codechunkd.config import Settings, load_settings
from codechunkd.embedding.embedder import Embedder, make_embedder
from codechunkd.storage.coverage import Coverage, coverage
from codechunkd.storage.lance_reader import ChunkReader, LanceReader
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.refgraph import Definition, Use
from codechunkd.storage.refquery import Caller, ReferenceQueries
from codechunkd.storage.refviews import within
from codechunkd.storage.repair import refuse_damage
from codechunkd.storage.request import SearchRequest
from codechunkd.storage.rows import quote
from codechunkd.storage.search import Filters, Hit, Mode, Searcher
from codechunkd.storage.stale import mark_stale
from codechunkd.storage.store import SourceState

if TYPE_CHECKING:
    from codechunkd.llm.rerank import Reranker


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One chunk row (every column of ``docs/schema.md`` but the vector and texts for models)."""

    id: str
    source: str
    repo: str
    branch: str
    commit: str | None
    blob: str
    path: str
    language: str
    kind: str
    symbol: str
    parent_id: str | None
    start_line: int
    end_line: int
    start_byte: int
    end_byte: int
    content: str
    content_hash: str
    token_count: int
    embedded_tokens: int
    signature: str
    docstring: str
    summary: str
    summary_source: str
    synthetic: bool
    dirty: bool
    indexed_at: datetime


ROW_COLUMNS = [f.name for f in fields(Row)]
"""The ``chunks`` columns a ``Row`` carries: every one but the vector and model texts."""


def _row(r: dict[str, Any]) -> Row:
    return Row(**{c: r[c] for c in ROW_COLUMNS})


class Index:
    """A read-only view of one index directory."""

    def __init__(self, store: ChunkReader, settings: Settings, embedder: Embedder | None = None):
        self.store = store
        self.settings = settings
        self._embedder = embedder
        self._reranker: Reranker | None = None
        self.searcher = Searcher(store)
        self.refs = ReferenceQueries(store)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = query_embedder(self.settings)
            self.store.check_model(self._embedder.model_id, self._embedder.dimension)
        return self._embedder

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        mode: Mode | str = Mode.HYBRID,
        repo: str | None = None,
        branch: str | None = None,
        commit: str | None = None,
        path: str | None = None,
        language: str | None = None,
        kind: str | None = None,
        context: bool = False,
        stale: bool = False,
        disable: Sequence[str] = (),
        enable: Sequence[str] = (),
    ) -> list[Hit]:
        """Hybrid (default), vector or full-text search with filters (see ``SearchRequest``);
        ``disable`` names ranking rules to switch off, ``enable`` opt-in ones to switch on
        (``ranking.RULES``, ``ranking.OPT_IN``)."""
        return self.run(
            SearchRequest(
                query=query,
                k=k,
                mode=str(mode),
                repo=repo,
                branch=branch,
                commit=commit,
                path=path,
                language=language,
                kind=kind,
                context=context,
                stale=stale,
                disable=tuple(disable),
                enable=tuple(enable),
            )
        )

    @property
    def reranker(self) -> Reranker | None:
        """The reranking server ``rerank.url`` names, or None (the default: none)."""
        if self._reranker is None and self.settings.rerank.url:
            from codechunkd.llm.rerank import Reranker

            self._reranker = Reranker(self.settings.rerank)
        return self._reranker

    def run(self, request: SearchRequest) -> list[Hit]:
        """The hits of one search request (``answer`` without its notes)."""
        return self.answer(request)[0]

    def answer(self, request: SearchRequest) -> tuple[list[Hit], list[str]]:
        """Answer one search request: what the CLI, the daemon and the MCP server all call.
        With the hits come notes on how they were ranked (a reranker that failed)."""
        notes: list[str] = []
        mode = Mode(request.mode)
        vector = self.embedder.embed([request.query])[0] if mode is not Mode.TEXT else None
        hits = self.searcher.search(
            request.query,
            vector,
            k=request.k,
            filters=self._reach(request.filters()),
            mode=mode,
            disable=frozenset(request.disable),
            enable=frozenset(request.enable),
            reranker=self.reranker,
            notes=notes,
            prefer=request.prefer,
        )
        if request.context:
            hits = self._with_callers(self.searcher.with_context(hits))
        if request.stale:
            hits = mark_stale(hits)
        return hits, notes

    def _reach(self, filters: Filters) -> Filters:
        """The filters with their repository widened to the indexed checkouts inside it
        (``refviews.within``: a superproject's submodules)."""
        if not isinstance(filters.repo, str):
            return filters
        roots = {s.source.repo for s in self.store.states()}
        return replace(filters, repo=within(filters.repo, roots))

    def _with_callers(self, hits: list[Hit]) -> list[Hit]:
        """Each hit with the chunks that call what it defines (``--context``)."""
        found = self.refs.callers_of_hits([(h.symbol, h.ids or (h.id,)) for h in hits])
        return [
            replace(h, callers=tuple(c.as_hit_caller() for c in callers)) if callers else h
            for h, callers in zip(hits, found, strict=True)
        ]

    def get(self, id: str) -> Row | None:
        rows = self.store.rows_by_id([id], ROW_COLUMNS)
        return _row(rows[0]) if rows else None

    def children(self, id: str) -> list[Row]:
        rows = self.store.select(f"parent_id = {quote(id)}", ROW_COLUMNS)
        return sorted((_row(r) for r in rows), key=lambda r: (r.start_byte, r.end_byte))

    def file(self, path: str, *, repo: str | None = None) -> list[Row]:
        """Every chunk of one file, in file order (synthetic chunks first at equal spans)."""
        where = f"path = {quote(path)}" + (f" AND repo = {quote(repo)}" if repo else "")
        rows = [_row(r) for r in self.store.select(where, ROW_COLUMNS)]
        return sorted(rows, key=lambda r: (r.repo, r.start_byte, not r.synthetic, r.end_byte))

    def rows(self, *, repo: str | None = None, path: str | None = None) -> Iterator[Row]:
        """All rows, optionally of one repository and/or path glob, ordered by path."""
        where = Filters(repo=repo, path=path).where()
        rows = [_row(r) for r in self.store.select(where, ROW_COLUMNS)]
        yield from sorted(rows, key=lambda r: (r.repo, r.path, r.start_byte, r.end_byte))

    def sources(self) -> list[SourceState]:
        return self.store.states()

    def coverage(self, *, repo: str | None = None) -> Coverage:
        """Chunks that answer by full text, and how many have their vector too: a first index
        writes the text first (``storage/coverage.py``); complete when the two are equal."""
        if repo is None:
            return coverage(self.store)
        states = self.store.states()
        reach = within(repo, {s.source.repo for s in states})
        found = [coverage(self.store, s.source.id) for s in states if s.source.repo in reach]
        return Coverage(sum(c.chunks for c in found), sum(c.vectors for c in found))

    # -- the reference graph (storage/refquery.py) -----------------------------

    def definitions(
        self, name: str, *, repo: str | None = None, prefer: str | None = None
    ) -> list[Definition]:
        """Definitions of ``name`` (bare, or qualified: ``Session.request``); of one indexed
        in several checkouts, the copy in the repository ``prefer`` when it has one."""
        return self.refs.definitions(name, repo=repo, prefer=prefer)

    def references(
        self, symbol: str, *, repo: str | None = None, prefer: str | None = None
    ) -> list[Use]:
        """Uses of ``symbol``, each with the definition it resolved to and how (``prefer``
        as ``definitions``'s)."""
        return self.refs.references(symbol, repo=repo, prefer=prefer)

    def callers(self, symbol: str, *, repo: str | None = None) -> list[Caller]:
        """The chunks that call ``symbol``."""
        return self.refs.callers(symbol, repo=repo)

    def callees(self, symbol: str, *, repo: str | None = None) -> list[Use]:
        """What ``symbol`` calls, resolved where the index holds the definition."""
        return self.refs.callees(symbol, repo=repo)


def query_embedder(settings: Settings) -> Embedder:
    """The configured embedder; for ``torch``, its ONNX twin when already exported.

    The twin has the same model id (same vectors, cosine 1.0000) and starts without
    importing torch, many times sooner: a query needs one vector.  An ONNX embedder here
    opens one session of one thread: a reading process embeds a query or two, and a second
    session costs its creation again, a second thread spins on the other core while the
    search runs (``codechunkd search`` without a daemon: 0.95 against 1.09 CPU-s, #33).
    """
    one = replace(settings.embedding, sessions=1, threads=1)
    if settings.embedding.backend == "torch":
        from codechunkd.embedding.embed_onnx import OnnxEmbedder

        twin = OnnxEmbedder(replace(one, backend="onnx"))
        if twin.model_file is not None:
            return twin
    return make_embedder(one if settings.embedding.backend == "onnx" else settings.embedding)


def open_index(
    path: str | None = None,
    *,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
) -> Index:
    """Open an index for reading (default: the configured ``index.dir``), through Lance
    alone: no LanceDB import (``storage/lance_reader.py``).  A table Lance would fail on,
    or wait on for ever (a FIFO for a data file), is ``IndexDamaged`` here, before Lance
    opens it (``refuse_damage``, milliseconds)."""
    settings = settings or load_settings(overrides={"index.dir": path})
    paths = IndexPaths.of(settings)
    refuse_damage(paths, tables_only=True)
    return Index(LanceReader(paths.uri, storage_options=paths.storage_options), settings, embedder)
