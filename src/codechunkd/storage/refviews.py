"""The reference answers as plain dictionaries: what ``codechunkd defs/refs/map --json``
prints and the MCP ``definition``/``references``/``repo_map`` tools return, the same for both."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

__all__ = ["MAX_BUDGET", "MAX_DEPTH", "definition_dicts", "reference_dicts"]

MAX_BUDGET = 100_000
"""The largest repository map asked for, in tokens."""
MAX_DEPTH = 5
"""The most levels of callers asked for (``refs --depth``, the MCP ``references`` tool's
``depth``): five levels of a name every file calls are the whole repository already."""


def definition_dicts(defs: list[Any]) -> list[dict[str, Any]]:
    return [
        {"id": d.chunk_id, **{k: v for k, v in asdict(d).items() if k != "chunk_id"}} for d in defs
    ]


def reference_dicts(uses: list[Any]) -> list[dict[str, Any]]:
    out = []
    for u in uses:
        t = u.target
        out.append(
            {
                "id": u.chunk_id,
                "symbol": u.chunk_symbol,
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
