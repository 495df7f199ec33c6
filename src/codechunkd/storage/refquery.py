"""Definitions, references, callers and callees: the questions ``Index`` answers from the
reference graph (storage/refgraph.py), kept in memory per table version.

Each answer names chunks by their ``chunks.id`` (what ``read_chunks`` and ``Index.get``
take) and says how the name was resolved: ``exact``, ``imported`` or ``by-name``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa

from codechunkd.storage.lance_reader import ChunkReader
from codechunkd.storage.references import DEFINITION, VALUE
from codechunkd.storage.refgraph import _ORDER, COLUMNS, SKELETON, Definition, RefGraph, Use
from codechunkd.storage.refnames import short_name, used_name
from codechunkd.storage.refscan import RefSnapshot, pylists
from codechunkd.storage.reftyped import callee
from codechunkd.storage.refviews import within
from codechunkd.storage.repomap import MapEntry, repo_map
from codechunkd.storage.rows import in_list, once, quote

_RETURNS = "(kind = 'binds' AND qualifier LIKE '%()')"
"""What functions return (``def make() -> T``: a ``make()`` row): read with the skeleton,
as a call's result may be typed by a function of any file."""

__all__ = ["CALL_KINDS", "HIT_CALLERS", "MAX_IMPACT", "Caller", "ReferenceQueries"]

CALL_KINDS = frozenset({"call"})
"""The use kinds that make a caller (a call, ``new``, a decorator, a macro)."""
MAX_IMPACT = 2000
"""The most calls ``impact`` gathers: a name every file calls, ``depth`` levels up, would
be the whole repository."""
HIT_CALLERS = 5
"""Callers a search hit lists with ``--context``."""

_A = TypeVar("_A")


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


def _empty() -> RefGraph:
    """The graph of an index without a ``references`` table (nothing written yet)."""
    return RefGraph(0, {c: [] for c in COLUMNS})


class ReferenceQueries:
    """The reference questions over one index; safe to share between threads.

    A question about names (definitions, references, callers, callees) reads, at one
    table version, every definition, import and base (the skeleton, kept per version)
    and only the uses of those names, or the rows of the files that define them: on Go
    1.19's sources (1.5M rows, 114k of them the skeleton) a second where the whole graph
    took six, and a fraction of its memory.  The repository map ranks every file by every
    use: it builds the whole graph (``graph``), which questions use too while it is of the
    latest version.
    """

    def __init__(self, store: ChunkReader) -> None:
        self.store = store
        self._graph: RefGraph | None = None
        self._skeleton: RefGraph | None = None
        self._lock = threading.Lock()

    def graph(self) -> RefGraph:
        """The whole graph of the latest table version (rebuilt when a writer has committed):
        what the repository map ranks."""
        snap = self.store.references_snapshot()
        if snap is None:
            return _empty()
        with self._lock:
            if self._graph is None or self._graph.version != snap.version:
                rows = pylists(snap.scan(COLUMNS))
                self._graph = RefGraph(snap.version, rows, files=snap.indexed())
            return self._graph

    def _kept(self, snap: RefSnapshot) -> tuple[RefGraph, bool]:
        """The whole graph when it is kept at ``snap``'s version (True), else the skeleton
        of that version, read once (False)."""
        with self._lock:
            if self._graph is not None and self._graph.version == snap.version:
                return self._graph, True
            if self._skeleton is None or self._skeleton.version != snap.version:
                rows = pylists(snap.scan(COLUMNS, f"{in_list('kind', SKELETON)} OR {_RETURNS}"))
                self._skeleton = RefGraph(snap.version, rows, files=snap.files())
            return self._skeleton, False

    def _about(self, symbols: Iterable[str] = (), paths: Iterable[str] = ()) -> RefGraph:
        """A graph that answers questions about the uses of the definitions of ``symbols``
        and what the definitions in ``paths`` use: the skeleton and those rows, read at
        one version."""
        snap = self.store.references_snapshot()
        if snap is None:
            return _empty()
        skeleton, whole = self._kept(snap)
        if whole:
            return skeleton
        symbols = list(symbols)
        names = {short_name(s) for s in symbols}
        defs = [d for s in symbols for d in skeleton.definitions(s)]
        names |= {used_name(d.symbol, d.language) for d in defs}  # CMake's in lower case
        names |= {alias for n in names for alias in skeleton.aliases(n)}  # import x as y
        paths = set(paths)
        asked = [in_list(c, v) for c, v in (("name", names), ("path", paths)) if v]
        if not asked:
            return skeleton
        skeletal = f"{in_list('kind', SKELETON)} OR {_RETURNS}"  # read already
        read = " OR ".join(asked)
        uses = snap.scan(COLUMNS, f"NOT ({skeletal}) AND ({read})")
        files = set(uses.column("path").to_pylist()) - paths
        if files:  # what types the names' qualifiers (``_typed``), in the files that use them
            quals = uses.column("qualifier").to_pylist()
            called = {c.rpartition(".")[2] for q in quals if q[-1:] == ")" and (c := callee(q))}
            wanted = f"kind = 'binds' AND NOT {_RETURNS}"
            if called:  # ``Engine(cfg).run``: the call of ``Engine``
                wanted = f"({wanted} OR (kind = 'call' AND {in_list('name', called)}))"
            typing = f"{in_list('path', files)} AND {wanted} AND NOT ({read})"
            uses = pa.concat_tables([uses, _typing(snap.scan(COLUMNS, typing), quals, names)])
        return skeleton.with_uses(pylists(uses))

    def _sources(self, repo: str | None, *, nested: bool = True) -> set[str] | None:
        """The sources of the checkout ``repo`` and, ``nested``, of the indexed checkouts
        inside it (``refviews.within``: a superproject's submodules); None for every one."""
        if repo is None:
            return None
        states = self.store.states()
        reach = within(repo, {s.source.repo for s in states}) if nested else (repo,)
        return {s.source.id for s in states if s.source.repo in reach}

    def _once(
        self,
        items: Sequence[_A],
        key: Callable[[_A], Hashable],
        prefer: str | None,
        source: Callable[[_A], str] = lambda x: x.source,  # type: ignore[attr-defined]
    ) -> list[_A]:
        """``items`` in order, each ``key`` once: of an answer's copies in several checkouts,
        the one in ``prefer`` (a repository root: the checkout the asker works in, whose
        chunk ids ``read_chunks`` should be given) if it has one, else the first."""
        mine = self._sources(prefer, nested=False)
        if not mine:
            return once(items, key)
        first = sorted(range(len(items)), key=lambda i: source(items[i]) not in mine)
        kept = once(first, lambda i: key(items[i]))
        return [items[i] for i in sorted(kept)]

    def definitions(
        self, name: str, *, repo: str | None = None, prefer: str | None = None
    ) -> list[Definition]:
        """By file and line, but of a symbol a file defines more than once its last
        definition first: Python's and TypeScript's overload stubs come before the
        implementation, which an agent asking where ``Field`` is defined wants to read.
        A definition indexed in several checkouts is one answer, ``prefer``'s copy (see
        ``_once``)."""
        found = self._named(name).definitions(name, self._sources(repo))
        if not found and name != short_name(name):
            # ``Child.fetch`` that ``Child`` inherits: the skeleton has every class and base
            snap = self.store.references_snapshot()
            if snap is not None:
                found = self._kept(snap)[0].definitions(name, self._sources(repo))
        last = {(d.path, d.symbol): d.line for d in found}
        found = self._once(found, _definition_key, prefer)  # a worktree's copy: once
        return sorted(found, key=lambda d: (d.path, d.line != last[d.path, d.symbol], d.line))

    def _named(self, name: str) -> RefGraph:
        """A graph that holds the definitions of ``name``: one kept, while of the latest
        version; else a graph of those definitions alone (``codechunkd defs``, once)."""
        snap = self.store.references_snapshot()
        if snap is None:
            return _empty()
        with self._lock:
            for g in (self._graph, self._skeleton):
                if g is not None and g.version == snap.version:
                    return g
        short = short_name(name)  # and CMake's, in lower case
        where = f"kind = {quote(DEFINITION)} AND {in_list('name', {short, short.lower()})}"
        return RefGraph(snap.version, pylists(snap.scan(COLUMNS, where)))

    def references(
        self,
        symbol: str,
        *,
        repo: str | None = None,
        kinds: Sequence[str] | None = None,
        prefer: str | None = None,
    ) -> list[Use]:
        """Every use that resolves to a definition of ``symbol``, best resolutions first;
        the same use in several sources (a repository and its worktree, two clones) once,
        ``prefer``'s copy (see ``_once``)."""
        return self._once(self._uses(symbol, repo, kinds), _use_key, prefer)

    def _uses(self, symbol: str, repo: str | None, kinds: Sequence[str] | None) -> list[Use]:
        g = self._about([symbol])
        targets = g.definitions(symbol, self._sources(repo))
        return g.uses_of(targets, set(kinds) if kinds else None)

    def callers(self, symbol: str, *, repo: str | None = None) -> list[Caller]:
        """The chunks that call ``symbol``, one per chunk and target (lines merged); the same
        caller in several sources once."""
        grouped: dict[tuple[str, str], list[Use]] = {}
        for u in self._uses(symbol, repo, sorted(CALL_KINDS)):
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
        return once(out, lambda c: (c.path, c.symbol, c.lines, c.how, _definition_key(c.target)))

    def callers_of_hits(self, hits: Sequence[tuple[str, Sequence[str]]]) -> list[list[Caller]]:
        """For each hit, given as (symbol, its chunk ids): the callers of the definition of
        ``symbol`` those chunks make, at most ``HIT_CALLERS``, resolved ones first, each
        chunk once (a recursive call is no caller).  One graph for all of them."""
        if not any(symbol for symbol, _ in hits):
            return [[] for _ in hits]
        g = self._about([symbol for symbol, _ in hits if symbol])
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

    def impact(
        self,
        symbol: str,
        *,
        depth: int,
        repo: str | None = None,
        limit: int = MAX_IMPACT,
        prefer: str | None = None,
    ) -> list[tuple[int, Use]]:
        """The calls of ``symbol`` (level 1), the calls of the definitions that make them
        (level 2), and so on ``depth`` levels up: what a change to ``symbol`` can reach.
        Each calling definition is followed once (a cycle ends there; code at module level
        is called by nothing); nearest levels first, at most ``limit`` calls; a call in
        several checkouts once, ``prefer``'s copy (see ``_once``)."""
        sources = self._sources(repo)
        g = self._about([symbol])
        frontier = g.definitions(symbol, sources)
        followed = {(d.path, d.symbol) for d in frontier}
        out: list[tuple[int, Use]] = []
        for level in range(1, depth + 1):
            if not frontier or len(out) >= limit:
                break
            if level > 1:  # the uses of the callers' names
                g = self._about(sorted({d.symbol for d in frontier}))
            nxt: list[Definition] = []
            for u in g.uses_of(frontier, set(CALL_KINDS)):
                if len(out) >= limit:
                    break
                out.append((level, u))
                caller = (u.path, u.chunk_symbol)
                if u.chunk_symbol and caller not in followed:
                    followed.add(caller)
                    defs = g.definitions(u.chunk_symbol, sources)
                    nxt += [d for d in defs if d.path == u.path]  # (a split one: any part)
            frontier = nxt
        return self._once(out, lambda lu: (lu[0], _use_key(lu[1])), prefer, lambda lu: lu[1].source)

    def values_in(self, path: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        """The constants, variables and fields each of ``chunk_ids`` (chunks of ``path``)
        binds, in file order, by chunk id: the ``references`` table's definitions of values
        (read through its BTree on ``path``)."""
        snap = self.store.references_snapshot()
        if snap is None or not chunk_ids:
            return {}
        found = snap.scan(
            ["chunk_id", "qualifier", "line"],
            f"path = {quote(path)} AND kind = {quote(DEFINITION)} AND module = {quote(VALUE)}",
        )
        wanted = set(chunk_ids)
        rows = sorted(
            zip(
                *(found.column(c).to_pylist() for c in ("line", "qualifier", "chunk_id")),
                strict=True,
            )
        )
        out: dict[str, list[str]] = {}
        for _, qualifier, cid in rows:
            if cid in wanted:
                out.setdefault(cid, []).append(qualifier)
        return out

    def callees(self, symbol: str, *, repo: str | None = None) -> list[Use]:
        """What the definitions of ``symbol`` call, resolved (unresolved calls included)."""
        defs = self._named(symbol).definitions(symbol, self._sources(repo))
        if not defs:
            return []
        g = self._about(paths={d.path for d in defs})
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
        sources = self._sources(repo, nested=False)
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

        def texts(ids: Sequence[str]) -> dict[str, tuple[str, int]]:
            rows = self.store.rows_by_id(ids, ["id", "content", "start_line"])
            return {r["id"]: (r["content"], r["start_line"]) for r in rows}

        prefix = path.strip("/") + "/" if path.strip("/") else ""
        return repo_map(
            self.graph(),
            source=source,
            signatures=signatures,
            count_tokens=count_tokens,
            budget=budget,
            prefix=prefix,
            texts=texts,
        )


def _typing(rows: pa.Table, quals: list[str], names: set[str]) -> pa.Table:
    """Of ``rows`` (the ``binds`` rows and the calls of the called functions of the files a
    question's names are used in), the ones that type a qualifier in ``quals`` (the names'
    uses'), or a variable they hide (``names``): the calls, and a variable's ``binds`` rows,
    with those of the variable its value was called on, in turn (``u, err := t.Parse(s)``:
    ``t``'s). The rest would only slow the question down."""
    kinds, variables = rows.column("kind").to_pylist(), rows.column("qualifier").to_pylist()
    modules = rows.column("module").to_pylist()
    by_variable: dict[str, list[int]] = {}
    heads = set(names)
    for k, (kind, var) in enumerate(zip(kinds, variables, strict=True)):
        if kind == "binds":
            by_variable.setdefault(var, []).append(k)
        elif var and var[-1:] != ")":  # a call's qualifier, typed in turn (``_call_rows``)
            heads.add(var)
    for q in quals:
        if q and q[-1:] != ")":
            heads |= {q, q[5:]} if q.startswith("this.") else {q}
    keep = [kind != "binds" for kind in kinds]
    while heads:  # a variable, the variable its value was called on, …
        for k in by_variable.pop(heads.pop(), ()):
            keep[k] = True
            heads |= {modules[k]} & by_variable.keys()
    return rows.filter(pa.array(keep, type=pa.bool_()))


def _definition_key(d: Definition | None) -> Hashable:
    """What a definition is wherever it is indexed: a file's line defining a symbol."""
    return None if d is None else (d.path, d.line, d.symbol)


def _use_key(u: Use) -> Hashable:
    """What a use is wherever it is indexed: a line's use of a name, and what it means."""
    return (u.path, u.line, u.kind, u.name, u.qualifier, u.how, _definition_key(u.target))
