"""Reading the index: vector search with filters.

Readers never take the writer lock; their handles use strong read consistency
(``read_consistency_interval=0``) so each query sees the latest commit, and a
commit replaces a file's rows atomically, so no query sees a file half-updated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from codechunkd.storage.store import IndexStore, quote

RESULT_COLUMNS = [
    "id",
    "repo",
    "branch",
    "commit",
    "blob",
    "path",
    "language",
    "kind",
    "symbol",
    "parent_id",
    "start_line",
    "end_line",
    "content",
    "summary",
    "signature",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Filters:
    repo: str | None = None
    """Repository root (exact), as shown by ``codechunkd status``."""
    branch: str | None = None
    path: str | None = None
    """Glob on the path (``*`` and ``?``; ``*`` also matches ``/``)."""
    language: str | None = None
    kind: str | None = None

    def where(self) -> str | None:
        parts = []
        if self.repo:
            parts.append(f"repo = {quote(self.repo)}")
        if self.branch:
            parts.append(f"branch = {quote(self.branch)}")
        if self.language:
            parts.append(f"language = {quote(self.language)}")
        if self.kind:
            parts.append(f"kind = {quote(self.kind)}")
        if self.path:
            parts.append(f"path LIKE {quote(glob_to_like(self.path))} ESCAPE '\\\\'")
        return " AND ".join(parts) or None


def glob_to_like(glob: str) -> str:
    out = []
    for ch in glob:
        if ch in "%_\\":
            out.append("\\" + ch)
        elif ch == "*":
            out.append("%")
        elif ch == "?":
            out.append("_")
        else:
            out.append(ch)
    return "".join(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    id: str
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
    content: str
    summary: str
    signature: str
    score: float
    """Cosine similarity of the query and the chunk (1 is identical)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def vector_search(
    store: IndexStore,
    query: npt.NDArray[np.float32],
    *,
    k: int = 10,
    filters: Filters | None = None,
) -> list[Hit]:
    if not store.has_chunks():
        return []
    q = store.chunks_table().search(np.asarray(query, dtype=np.float32)).distance_type("cosine")
    where = (filters or Filters()).where()
    if where:
        q = q.where(where, prefilter=True)
    rows: Sequence[dict[str, Any]] = q.select([*RESULT_COLUMNS, "_distance"]).limit(k).to_list()
    return [
        Hit(
            **{c: r[c] for c in RESULT_COLUMNS},
            score=round(1.0 - float(r["_distance"]), 4),
        )
        for r in rows
    ]
