"""A repository map: the files and signatures the rest of the code refers to most, cut to a
token budget (an agent's first look at a repository).

Ranking, in the style of a PageRank over the reference graph: files are nodes, and each
resolved use adds an edge from the file that uses a name to the file that defines it
(weight 1 for ``exact``/``imported``, ``0.5/n`` for each of ``n`` ``by-name`` answers;
a file's references to itself are not counted).  The PageRank of a file is then shared out
over the definitions it is referred to through, in proportion to the edges' weights, so a
definition ranks high when much-referred-to files refer to it.  The map lists the files by
rank, each with its best definitions' signatures, until the budget is spent.  A file none of
whose definitions is referred to (a script, or a language whose uses are not read: Kotlin,
Swift, Lua, …) lists its own, in file order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from codechunkd.display import one_line
from codechunkd.storage.references import DEFINITION, VALUE
from codechunkd.storage.refgraph import BY_NAME, RefGraph
from codechunkd.storage.rows import once

__all__ = ["MapEntry", "pagerank", "repo_map"]

_DAMPING = 0.85
_ITERATIONS = 40
_PER_FILE = 12
"""At most this many definitions listed under one file."""


@dataclass(frozen=True, slots=True)
class MapEntry:
    """One file of the map and the definitions listed under it."""

    path: str
    rank: float
    definitions: tuple[tuple[str, str, int], ...]
    """(chunk id, signature or symbol, line), best first."""


def pagerank(edges: dict[str, dict[str, float]], nodes: set[str]) -> dict[str, float]:
    """PageRank of weighted directed ``edges`` (dangling nodes spread evenly), as arrays:
    Go's sources have 8k files and millions of edges."""
    if not nodes:
        return {}
    import numpy as np

    index = {u: k for k, u in enumerate(sorted(nodes))}
    n = len(index)
    pairs = [(index[u], index[v], w) for u, vs in edges.items() for v, w in vs.items()]
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    dst = np.array([p[1] for p in pairs], dtype=np.int64)
    weight = np.array([p[2] for p in pairs], dtype=np.float64)
    out_weight = np.bincount(src, weights=weight, minlength=n)
    dangling = out_weight == 0
    per_weight = np.divide(_DAMPING, out_weight, out=np.zeros(n), where=~dangling)
    rank = np.full(n, 1.0 / n)
    for _ in range(_ITERATIONS):
        base = (1 - _DAMPING) / n + _DAMPING * rank[dangling].sum() / n
        rank = base + np.bincount(dst, weights=weight * (rank * per_weight)[src], minlength=n)
    return {u: float(rank[k]) for u, k in index.items()}


def _edges(
    g: RefGraph, source: str | None
) -> tuple[
    dict[str, dict[str, float]], dict[str, dict[int, float]], set[str], dict[str, list[int]]
]:
    """File edges, per defining file the weight each definition row gets, the files, and
    each file's own definition rows.  The uses of a file that resolve to the same (shared)
    list of definitions are summed before they are spread over it: a method name used a
    thousand times has a thousand definitions."""
    edges: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    into: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    own: dict[str, list[int]] = defaultdict(list)
    files: set[str] = set()
    spread: dict[tuple[str, int], tuple[list[int], list[float]]] = {}
    for i in range(g.rows):
        if source is not None and g._src[i] != source:
            continue
        here = g._path[i]
        files.add(here)
        if g._kind[i] == DEFINITION:
            own[here].append(i)
            continue
        if g._kind[i] == "binds":  # the call or type that gave it says it
            continue
        rows, how = g.resolve(i)  # held by ``spread``: ``id(rows)`` stays its own
        if not rows:
            continue
        w = 0.5 / len(rows) if how == BY_NAME else 1.0 / len(rows)
        spread.setdefault((here, id(rows)), (rows, []))[1].append(w)
    for (here, _), (rows, ws) in spread.items():
        w = sum(ws)
        for j in rows:
            there = g._path[j]
            if there != here:
                edges[here][there] += w
                into[there][j] += w
    return edges, into, files, own


def repo_map(
    g: RefGraph,
    *,
    source: str | None,
    signatures: Callable[[Sequence[str]], dict[str, str]],
    count_tokens: Callable[[Sequence[str]], list[int]],
    budget: int,
    prefix: str = "",
    texts: Callable[[Sequence[str]], dict[str, tuple[str, int]]] | None = None,
) -> list[MapEntry]:
    """The map of one source (or all), files under ``prefix`` only, within ``budget`` tokens.

    ``signatures(chunk ids)`` gives each chunk's signature (the ``chunks`` column);
    ``texts(chunk ids)`` each chunk's content and first line, for the line that binds a
    value (``MAX_RETRIES = 3``; without it, a value is shown by its name).
    """
    ranked = g.derived.get(("repo_map", source))  # the graph is of one table version
    if ranked is None:
        edges, into, files, own = _edges(g, source)
        rank = pagerank({u: dict(vs) for u, vs in edges.items()}, files)
        ranked = g.derived[("repo_map", source)] = (into, files, rank, own)
    into, files, rank, own = ranked
    shown = [f for f in files if f.startswith(prefix)]
    shown.sort(key=lambda f: (-rank[f], f))
    out: list[MapEntry] = []
    spent = 0
    for path in shown:
        best = sorted(into.get(path, {}).items(), key=lambda kv: -kv[1])
        rows = _once(g, [j for j, _ in best]) or _in_file_order(g, own.get(path, ()))
        sigs = signatures([g._chunk[j] for j in rows]) if rows else {}
        values = [g._chunk[j] for j in rows if g._mod[j] == VALUE]
        bound = texts(values) if texts is not None and values else {}
        # a member is shown with its owner when the file defines it as a chunk's subject (a
        # class, a function), not in passing (PHP's ``namespace App\Http;`` in a glue chunk)
        classes = {g._qual[j] for j in own.get(path, ()) if g._qual[j] == g._csym[j]}
        defs = tuple(
            dict.fromkeys(  # each line once (the keys of one JSON chunk: one signature)
                (
                    g._chunk[j],
                    # a value (``MAX = 3``) by the line binding it: its chunk's signature
                    # is another definition's, if any
                    _shown(g._qual[j], _line_of(bound.get(g._chunk[j]), g._line[j]), classes)
                    if g._mod[j] == VALUE
                    else _shown(g._qual[j], sigs.get(g._chunk[j]), classes),
                    g._line[j],
                )
                for j in rows
            )
        )
        text = render([MapEntry(path=path, rank=rank[path], definitions=defs)])
        cost = count_tokens([text])[0]
        if spent + cost > budget:  # the file's best definitions that fit, if any
            heads = [render([MapEntry(path, 0.0, defs[:n])]) for n in range(1, len(defs))]
            fit = [n for n, c in enumerate(count_tokens(heads), 1) if spent + c <= budget]
            if fit or not out:  # (the first file alone is over: keep its head at least)
                out.append(
                    MapEntry(path=path, rank=rank[path], definitions=defs[: max(fit, default=0)])
                )
            break
        spent += cost
        out.append(MapEntry(path=path, rank=rank[path], definitions=defs))
    return out


def _in_file_order(g: RefGraph, rows: Sequence[int]) -> list[int]:
    """A file's own definition rows by line, the first :data:`_PER_FILE`."""
    return _once(g, sorted(rows, key=lambda j: g._line[j]))


def _once(g: RefGraph, rows: Sequence[int]) -> list[int]:
    """The first :data:`_PER_FILE` of ``rows``, each definition (a symbol at a line) once:
    the same file in several sources (a repository and its worktree) defines it in each."""
    return once(rows, lambda j: (g._qual[j], g._line[j]))[:_PER_FILE]


_LINE_CHARS = 120
"""A value's binding line is cut to this many characters (``ALL = (…, …, …)``)."""


def _line_of(text: tuple[str, int] | None, line: int) -> str | None:
    """Line ``line`` of a chunk's ``(content, first line)``, stripped and cut; None when
    the chunk is not there (written or dropped between two reads)."""
    if text is None:
        return None
    content, first = text
    lines = content.splitlines()
    if not 0 <= line - first < len(lines):
        return None
    shown = lines[line - first].strip()
    return shown if len(shown) <= _LINE_CHARS else shown[: _LINE_CHARS - 1] + "…"


def _shown(symbol: str, signature: str | None, defined: Collection[str]) -> str:
    """``Engine: def run(self, x)`` for a member (where the language writes ``::``, of a
    class or function ``defined`` in the file: ``Client: public function size()`` of
    ``App\\Http::Client::size``, but ``class Client`` of a namespace's ``App\\Http::Client``),
    the signature alone otherwise, on one line
    (``def f(\\n    a,\\n) -> T``: ``def f(a) -> T``) and cut to 240 characters."""
    first = one_line(signature, _LINE_CHARS * 2) if signature and signature.strip() else symbol
    cut = max(symbol.rfind("."), symbol.rfind("::"))
    owner = symbol[:cut] if cut > 0 else ""
    if owner and symbol.startswith("::", cut):  # a class's, or a namespace's: the file's
        owner = owner.rpartition("::")[2] if owner in defined else ""  # path says which
    return f"{owner}: {first}" if owner and signature else first


def render(entries: Sequence[MapEntry]) -> str:
    """The map as text: each file, then its signatures indented, with line numbers, in the
    order they come in the file (the entry chose them by rank, best first)."""
    lines: list[str] = []
    for e in entries:
        lines.append(f"{e.path}:")
        for _, sig, line in sorted(e.definitions, key=lambda d: d[2]):
            lines.append(f"  {line:>5}  {sig}")
    return "\n".join(lines) + ("\n" if lines else "")
