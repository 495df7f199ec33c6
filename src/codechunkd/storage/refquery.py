"""Definitions, references, callers and callees: the questions ``Index`` answers from the
reference graph (storage/refgraph.py), kept in memory per table version.

Each answer names chunks by their ``chunks.id`` (what ``read_chunks`` and ``Index.get``
take) and says how the name was resolved: ``exact``, ``imported`` or ``by-name``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from codechunkd.storage.lance_reader import ChunkReader
from codechunkd.storage.refgraph import _ORDER, COLUMNS, Definition, RefGraph, Use
from codechunkd.storage.repomap import MapEntry, repo_map

__all__ = ["CALL_KINDS", "HIT_CALLERS", "Caller", "ReferenceQueries"]

CALL_KINDS = frozenset({"call"})
"""The use kinds that make a caller (a call, ``new``, a decorator, a macro)."""
HIT_CALLERS = 5
"""Callers a search hit lists with ``--context``."""


@dataclass(frozen=True, slots=True)
class Caller:
    """A chunk that uses a definition, with the lines where it does."""

    chunk_id: str
    symbol: str
    path: str
    lines: tuple[int, ...]
    how: str
    target: Definition

    def as_hit_caller(self) -> dict[str, Any]:
        """What a search hit lists of it (``Hit.callers``)."""
        return {
            "symbol": self.symbol,
            "path": self.path,
            "line": self.lines[0],
            "how": self.how,
            "id": self.chunk_id,
        }


class ReferenceQueries:
    """The reference questions over one index; safe to share between threads."""

    def __init__(self, store: ChunkReader) -> None:
        self.store = store
        self._graph: RefGraph | None = None
        self._lock = threading.Lock()

    def graph(self) -> RefGraph:
        """The graph of the latest table version (rebuilt when a writer has committed)."""
        version = self.store.references_version()
        with self._lock:
            g = self._graph
            if g is None or g.version != version:
                version, table = self.store.scan_references(COLUMNS)
                g = self._graph = RefGraph(
                    version, {c: table.column(c).to_pylist() for c in COLUMNS}
                )
            return g

    def _sources(self, repo: str | None) -> set[str] | None:
        if repo is None:
            return None
        return {s.source.id for s in self.store.states() if s.source.repo == repo}

    def definitions(self, name: str, *, repo: str | None = None) -> list[Definition]:
        return self.graph().definitions(name, self._sources(repo))

    def references(
        self, symbol: str, *, repo: str | None = None, kinds: Sequence[str] | None = None
    ) -> list[Use]:
        """Every use that resolves to a definition of ``symbol``, best resolutions first."""
        g = self.graph()
        targets = g.definitions(symbol, self._sources(repo))
        return g.uses_of(targets, set(kinds) if kinds else None)

    def callers(self, symbol: str, *, repo: str | None = None) -> list[Caller]:
        """The chunks that call ``symbol``, one per chunk and target (lines merged)."""
        grouped: dict[tuple[str, str], list[Use]] = {}
        for u in self.references(symbol, repo=repo, kinds=sorted(CALL_KINDS)):
            assert u.target is not None
            grouped.setdefault((u.chunk_id, u.target.chunk_id), []).append(u)
        out = [
            Caller(
                chunk_id=us[0].chunk_id,
                symbol=us[0].chunk_symbol,
                path=us[0].path,
                lines=tuple(sorted({u.line for u in us})),
                how=min((u.how for u in us), key=_ORDER.__getitem__),
                target=us[0].target,  # type: ignore[arg-type]
            )
            for us in grouped.values()
        ]
        out.sort(key=lambda c: (_ORDER[c.how], c.path, c.lines))
        return out

    def callers_of_hits(self, hits: Sequence[tuple[str, Sequence[str]]]) -> list[list[Caller]]:
        """For each hit, given as (symbol, its chunk ids): the callers of the definition of
        ``symbol`` those chunks make, at most ``HIT_CALLERS``, resolved ones first, each
        chunk once (a recursive call is no caller).  One graph for all of them."""
        if not any(symbol for symbol, _ in hits):
            return [[] for _ in hits]
        g = self.graph()
        out: list[list[Caller]] = []
        for symbol, ids in hits:
            wanted = set(ids)
            targets = [d for d in g.definitions(symbol) if d.chunk_id in wanted] if symbol else []
            seen: dict[str, Caller] = {}
            for u in g.uses_of(targets, set(CALL_KINDS)):
                if u.chunk_id in wanted or u.chunk_id in seen or u.target is None:
                    continue
                seen[u.chunk_id] = Caller(
                    u.chunk_id, u.chunk_symbol, u.path, (u.line,), u.how, u.target
                )
                if len(seen) == HIT_CALLERS:
                    break
            out.append(list(seen.values()))
        return out

    def callees(self, symbol: str, *, repo: str | None = None) -> list[Use]:
        """What the definitions of ``symbol`` call, resolved (unresolved calls included)."""
        g = self.graph()
        return g.uses_in(g.definitions(symbol, self._sources(repo)), set(CALL_KINDS))

    def repo_map(
        self,
        *,
        count_tokens: Callable[[Sequence[str]], list[int]],
        budget: int,
        repo: str | None = None,
        path: str = "",
    ) -> list[MapEntry]:
        """The repository map (storage/repomap.py) of ``repo`` (default: the only source,
        else all), files under ``path``, within ``budget`` tokens."""
        sources = self._sources(repo)
        if sources is None:
            every = {s.source.id for s in self.store.states()}
            sources = every if len(every) == 1 else None
        source = next(iter(sources)) if sources else None
        if repo is not None and source is None:
            return []

        def signatures(ids: Sequence[str]) -> dict[str, str]:
            return {
                r["id"]: r["signature"] for r in self.store.rows_by_id(ids, ["id", "signature"])
            }

        prefix = path.strip("/") + "/" if path.strip("/") else ""
        return repo_map(
            self.graph(),
            source=source,
            signatures=signatures,
            count_tokens=count_tokens,
            budget=budget,
            prefix=prefix,
        )
