"""The reference answers as plain dictionaries: what ``codechunkd defs/refs/map --json``
prints and the MCP ``definition``/``references``/``repo_map`` tools return, the same for both."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict
from typing import Any

__all__ = [
    "MAX_BUDGET",
    "MAX_DEPTH",
    "beyond",
    "containing",
    "definition_dicts",
    "in_repository",
    "located",
    "map_folder",
    "reference_dicts",
    "repository_of",
    "source_roots",
    "within",
    "working_checkout",
]

MAX_BUDGET = 100_000
"""The largest repository map asked for, in tokens."""
MAX_DEPTH = 5
"""The most levels of callers asked for (``refs --depth``, the MCP ``references`` tool's
``depth``): five levels of a name every file calls are the whole repository already."""


def source_roots(index: Any) -> dict[str, str]:
    """Each indexed source's id -> its repository's root: which checkout an answer is in
    (``repo`` in the dictionaries below; a repository and its worktree hold the same paths)."""
    return {s.source.id: s.source.repo for s in index.sources()}


def containing(path: str, roots: Collection[str]) -> str | None:
    """The deepest of ``roots`` that ``path`` is in (or is), or None."""
    inside = [r for r in roots if path == r or path.startswith(r.rstrip(os.sep) + os.sep)]
    return max(inside, key=len, default=None)


def within(repo: str, roots: Collection[str]) -> tuple[str, ...]:
    """What a repository filter reaches: ``repo`` and the indexed checkouts inside it (its
    submodules, a clone kept in one of its folders), sorted. Searching a superproject
    searches its submodules, which are part of the code a person works on there."""
    inside = {r for r in roots if r.startswith(repo.rstrip(os.sep) + os.sep)}
    return tuple(sorted({repo, *inside}))


def beyond(repo: str, roots: Collection[str]) -> int:
    """How many of the indexed ``roots`` a filter on ``repo`` leaves out (``within``)."""
    return len(set(roots) - set(within(repo, roots)))


def repository_of(folder: str, roots: Collection[str]) -> str | None:
    """The indexed repository that ``folder`` (relative to the current directory, or
    absolute) is in: ``--repo .`` anywhere in a checkout names that checkout; None when it
    is in none."""
    return containing(os.path.realpath(os.path.expanduser(folder)), roots)


def in_repository(path: str) -> str:
    """A path inside a repository as the index writes it: ``./src/`` -> ``src``, ``.`` -> ``""``
    (``lstrip("./")`` would also eat the dot of ``.github``)."""
    clean = os.path.normpath(path) if path.strip() else "."
    return "" if clean == "." else clean


def map_folder(
    folder: str, repo: str | None, roots: Collection[str]
) -> tuple[str | None, str] | None:
    """(repository, folder inside it) of the folder a person gives the map: relative to the
    current directory (``map .`` in ``src/`` is ``src``, as git reads a pathspec), or
    absolute, or else, when that is in no indexed repository (or not in ``repo``), relative to
    the repository's root. None for an absolute folder outside them."""
    if not folder.strip():
        return repo, ""
    given = os.path.expanduser(folder)
    full = os.path.realpath(given)
    where = containing(full, [repo] if repo else roots)
    if where is not None:
        return where, in_repository(os.path.relpath(full, where))
    if os.path.isabs(given):
        return None
    return repo, in_repository(folder)


def located(answers: Sequence[Mapping[str, Any]]) -> Callable[[Mapping[str, Any]], str]:
    """How an answer's file is written (``path``, ``repo``: a search hit's, a definition's or
    a use's dictionary): its path in its repository, or, when the answers come from several
    indexed repositories, the file's full path (which one it is). Not made printable."""
    if len({a.get("repo") for a in answers}) < 2:
        return lambda a: str(a["path"])
    return lambda a: os.path.join(a.get("repo") or "", a["path"])


def working_checkout(roots: Mapping[str, str]) -> str | None:
    """The indexed repository the current directory is in (of a repository and its
    worktree, the one the asker works in), or None: whose copy of an answer indexed in
    both to give (``Index.definitions``'s ``prefer``)."""
    return containing(os.getcwd(), set(roots.values()))


def definition_dicts(defs: list[Any], roots: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each definition: its chunk ``id``, ``source``, ``repo`` (the root of the checkout it
    is in, from ``roots``), ``path``, ``language``, ``symbol`` and ``line``."""
    out = []
    for d in defs:
        fields = {k: v for k, v in asdict(d).items() if k != "chunk_id"}
        out.append({"id": d.chunk_id, "source": d.source, "repo": roots.get(d.source), **fields})
    return out


def reference_dicts(uses: list[Any], roots: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each use: its chunk's ``id`` and ``symbol``, ``source`` and ``repo`` (as a
    definition's), ``path``, ``line``, ``kind``, ``name``, ``qualifier``, how it was
    ``resolved`` and the ``target`` definition it means."""
    out = []
    for u in uses:
        t = u.target
        out.append(
            {
                "id": u.chunk_id,
                "symbol": u.chunk_symbol,
                "source": u.source,
                "repo": roots.get(u.source),
                "path": u.path,
                "line": u.line,
                "kind": u.kind,
                "name": u.name,
                "qualifier": u.qualifier,
                "resolved": u.how or None,
                "target": None
                if t is None
                else {"id": t.chunk_id, "symbol": t.symbol, "path": t.path},
            }
        )
    return out
