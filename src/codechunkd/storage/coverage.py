"""How much of the index answers by text and how much by vector too.

A first index (or any large change) writes each file's rows as soon as the file is
chunked, before the model has embedded it: such a row has everything but its
vector, so full-text search finds it at once. Its ``vector`` and its
``embedding_model`` are NULL until the vector is filled in (``fill_vectors``, by
the single writer, in one commit per group of rows: a row's content never changes
with it). Readers count ``embedding_model IS NULL`` rows as not yet complete:
``verify``, the seed (it looks up ``embedding_model = <model>`` only) and the
coverage said by ``status`` and search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from codechunkd.errors import CodechunkdError
from codechunkd.storage.rows import in_list, quote
from codechunkd.storage.store import IndexStore

VECTORLESS = "embedding_model IS NULL"
"""The filter of rows whose vector is not there yet (cheaper than ``vector IS NULL``:
a short string column, not the vectors; both are NULL together)."""


@dataclass(frozen=True, slots=True)
class Coverage:
    """Chunks in the table, and how many of them have their vector."""

    chunks: int
    vectors: int

    @property
    def complete(self) -> bool:
        return self.vectors >= self.chunks

    @property
    def share(self) -> float:
        """Fraction of chunks with a vector (1.0 for an empty table)."""
        return self.vectors / self.chunks if self.chunks else 1.0

    def text(self) -> str:
        """``text 2,303/2,303 chunks · vectors 412/2,303``."""
        n = f"{self.chunks:,}"
        return f"text {n}/{n} chunks · vectors {self.vectors:,}/{n}"

    def as_dict(self) -> dict[str, int]:
        return {"text_chunks": self.chunks, "vector_chunks": self.vectors}


def _where(source: str | None, extra: str | None = None) -> str | None:
    parts = [p for p in (f"source = {quote(source)}" if source else None, extra) if p]
    return " AND ".join(parts) or None


class Counts(Protocol):
    """What :func:`coverage` reads: ``IndexStore`` (the writer) and ``LanceReader``."""

    def count_chunks(self, where: str | None = None) -> int: ...


def coverage(store: Counts, source: str | None = None) -> Coverage:
    """The coverage of one source's rows, or of the whole table (two filtered counts)."""
    chunks = store.count_chunks(_where(source))
    if not chunks:
        return Coverage(0, 0)
    missing = store.count_chunks(_where(source, VECTORLESS))
    return Coverage(chunks, chunks - missing)


def vectorless(store: IndexStore, source: str) -> pa.Table:
    """``id, path, embed_text, embed_hash, token_count`` of the rows of ``source`` without
    a vector."""
    columns = ["id", "path", "embed_text", "embed_hash", "token_count"]
    return store.scan_chunks(_where(source, VECTORLESS), columns)


def fill_vectors(
    store: IndexStore,
    ids: Sequence[str],
    vectors: Sequence[npt.NDArray[np.float32]],
    model_id: str,
) -> int:
    """Set the vectors of rows ``ids`` (one commit; writer only); returns rows set.

    Only rows still without a vector are touched: a row replaced meanwhile keeps its
    own (``IndexStore.update_chunks`` inserts no row whose id is gone)."""
    if not ids:
        return 0
    dim = store.index_model()
    assert dim is not None
    flat = np.concatenate([np.asarray(v, np.float32).reshape(-1) for v in vectors])
    table = pa.table(
        {
            "id": pa.array(list(ids), pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), dim[1]),
            "embedding_model": pa.array([model_id] * len(ids), pa.string()),
        }
    )
    store.update_chunks(table)
    return len(ids)


def without_vector(store: IndexStore, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` have no vector yet (for tests and the reader)."""
    if not ids:
        return set()
    rows = store.select(f"{in_list('id', ids)} AND {VECTORLESS}", ["id"])
    return {r["id"] for r in rows}


def table_counts(
    store: IndexStore | None, source: str, *, skipped: bool = False
) -> dict[str, Any] | None:
    """What the table holds for ``source`` now, for ``status``: ``files``, ``chunks`` (both
    as ``IndexStore.count``), ``text_chunks`` and ``vector_chunks``; with ``skipped``, the
    files recorded without chunks by reason (``IndexStore.skipped``). None without a store
    or when it cannot be read (status then says what ``state.json`` recorded)."""
    if store is None:
        return None
    try:
        files, chunks = store.count(source)
        cov = coverage(store, source)
        skips = store.skipped(source) if skipped else None
    except CodechunkdError:
        return None
    counts: dict[str, Any] = {"files": files, "chunks": chunks, **cov.as_dict()}
    if skips is not None:
        counts["skipped"] = skips
    return counts
