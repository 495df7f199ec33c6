"""Reading the index through Lance (``pylance``) alone, without importing LanceDB.

``import lancedb`` costs seconds of CPU (most of it a generated REST client and
an embedding-function registry a local index never uses: docs/operations.md,
Measured); ``import lance`` a fraction of that, and a read needs nothing more:
each table is a Lance dataset ``<index>/<table>.lance`` (what LanceDB's directory
layout is, local or ``s3://``), and vector search, full-text search and filters
are Lance's own (LanceDB hands them down).  ``codechunkd search`` without a
daemon, ``codechunkd mcp`` and ``open_index`` read through this; the writer and
the daemon keep ``IndexStore``.

Every read sees the latest commit, as ``IndexStore``'s strong-consistency handle
does (a Lance dataset, like a default LanceDB handle, stays at the version it
opened: FACTS.md, Trap 7): each query first checks the dataset out at its latest
version, one listing of its versions.  A table that does not exist yet is looked
for again on the next read.  Errors are translated as ``IndexStore``'s are.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from codechunkd.errors import IndexDamaged, ModelMismatch, SchemaMismatch, StoreError
from codechunkd.storage import schema as S
from codechunkd.storage._errors import translate, translating
from codechunkd.storage.objectstore import failure_reason, is_local
from codechunkd.storage.refscan import RefSnapshot
from codechunkd.storage.rows import in_list
from codechunkd.storage.statefile import SourceState
from codechunkd.storage.store import IndexStore
from codechunkd.storage.tables import not_made

os.environ.setdefault("LANCE_LOG", "error")  # Lance's Rust WARN lines, outside structlog

NPROBES = 20
"""IVF partitions a vector query probes at least: LanceDB's default, so both readers
rank alike once the table has a vector index."""


class ChunkReader(Protocol):
    """What a search reads from an index: ``IndexStore`` and ``LanceReader`` both are one."""

    def has_chunks(self) -> bool: ...
    def has_fts(self) -> bool: ...
    def index_model(self) -> tuple[str, int] | None: ...
    def check_model(self, model_id: str, dimension: int) -> None: ...
    def select(
        self, where: str | None, columns: Sequence[str], *, limit: int | None = None
    ) -> list[dict[str, Any]]: ...
    def rows_by_id(self, ids: Sequence[str], columns: Sequence[str]) -> list[dict[str, Any]]: ...
    def vector_search(
        self, vector: npt.NDArray[np.float32], n: int, where: str | None, columns: Sequence[str]
    ) -> list[dict[str, Any]]: ...
    def text_search(
        self, text: str, n: int, where: str | None, columns: Sequence[str]
    ) -> list[dict[str, Any]]: ...
    def states(self) -> list[SourceState]: ...
    def count_chunks(self, where: str | None = None) -> int: ...
    def references_snapshot(self) -> RefSnapshot | None: ...


class LanceReader:
    """The tables of one index directory, read-only, through ``lance``."""

    def __init__(self, uri: str, *, storage_options: Mapping[str, str] | None = None) -> None:
        import lance

        self._lance = lance
        self.uri = uri.rstrip("/")
        self._options = dict(storage_options or {})
        self._datasets: dict[str, Any] = {}
        self._lock = threading.Lock()  # a hybrid search reads from two threads

    # -- tables -------------------------------------------------------------

    def _table_uri(self, name: str) -> str:
        return f"{self.uri}/{name}.lance"

    def _dataset(self, name: str) -> Any | None:
        """The table at its latest version; None while it does not exist."""
        with self._lock:
            ds = self._datasets.get(name)
            if ds is not None:
                self._latest(ds, name)
                return ds
            ds = self._open(name)
            if ds is not None:
                self._datasets[name] = ds
            return ds

    @translating("reading the latest version")
    def _latest(self, ds: Any, name: str) -> None:
        if ds.latest_version != ds.version:
            ds.checkout_latest()

    def _open(self, name: str) -> Any | None:
        table = self._table_uri(name)
        if is_local(self.uri):
            from pathlib import Path

            if not Path(table.removeprefix("file://")).is_dir():
                return None
        try:
            ds = self._lance.dataset(table, storage_options=self._options or None)
        except Exception as exc:
            text = str(exc)
            reason = None if is_local(self.uri) else failure_reason(text)
            if reason:
                raise StoreError(f"cannot open the index at {self.uri}: {reason}") from None
            if not_made(self.uri, name, exc):
                return None  # no such table (yet): none listed, or listed before its manifest
            raise translate(exc, f"opening a table in {self.uri}", damage=True) from exc
        schema = ds.schema
        if not schema.names:
            raise IndexDamaged(f"table {name!r} has no columns: its manifest is unreadable")
        found = int((schema.metadata or {}).get(S.META_VERSION, b"0"))
        if found != S.SCHEMA_VERSION:
            raise SchemaMismatch(name, found, S.SCHEMA_VERSION)
        return ds

    def has_chunks(self) -> bool:
        return self._dataset(S.CHUNKS) is not None

    @translating("listing indexes")
    def has_fts(self) -> bool:
        ds = self._dataset(S.CHUNKS)
        return ds is not None and any(ix.index_type == "Inverted" for ix in _indices(ds))

    @translating("reading the table schema")
    def index_model(self) -> tuple[str, int] | None:
        """(model id, dimension) of the vectors in the index, if it has any table."""
        ds = self._dataset(S.CHUNKS)
        if ds is None:
            return None
        meta = ds.schema.metadata or {}
        dim = ds.schema.field("vector").type.list_size
        return meta.get(S.META_MODEL, b"").decode(), int(dim)

    def check_model(self, model_id: str, dimension: int) -> None:
        found = self.index_model()
        if found is not None and found != (model_id, dimension):
            raise ModelMismatch(found[0], model_id, found[1], dimension)

    # -- reads --------------------------------------------------------------

    @translating("reading chunks")
    def select(
        self, where: str | None, columns: Sequence[str], *, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Rows of ``chunks`` matching a filter (no ranking)."""
        ds = self._dataset(S.CHUNKS)
        if ds is None:
            return []
        rows: list[dict[str, Any]] = ds.to_table(
            columns=list(columns), filter=where or None, limit=limit
        ).to_pylist()
        return rows

    def rows_by_id(self, ids: Sequence[str], columns: Sequence[str]) -> list[dict[str, Any]]:
        if not ids:
            return []
        return self.select(in_list("id", ids), columns)

    @translating("counting rows")
    def count_chunks(self, where: str | None = None) -> int:
        """Rows of ``chunks`` matching ``where`` (0 without a table)."""
        ds = self._dataset(S.CHUNKS)
        return 0 if ds is None else int(ds.count_rows(filter=where or None))

    @translating("searching vectors")
    def vector_search(
        self, vector: npt.NDArray[np.float32], n: int, where: str | None, columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The ``n`` rows of ``chunks`` nearest to ``vector`` (cosine), with ``_distance``."""
        ds = self._dataset(S.CHUNKS)
        if ds is None:
            return []
        nearest = {
            "column": "vector",
            "q": np.asarray(vector, np.float32),
            "k": n,
            "metric": "cosine",
            "minimum_nprobes": NPROBES,
        }
        table = ds.to_table(
            columns=[*columns, "_distance"],
            filter=where or None,
            nearest=nearest,
            prefilter=True,
            disable_scoring_autoprojection=True,
        )
        rows: list[dict[str, Any]] = table.to_pylist()
        return rows

    @translating("searching text")
    def text_search(
        self, text: str, n: int, where: str | None, columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The ``n`` best BM25 matches of ``text`` in ``fts_text``, with ``_score``."""
        ds = self._dataset(S.CHUNKS)
        if ds is None:
            return []
        table = ds.to_table(
            columns=[*columns, "_score"],
            filter=where or None,
            full_text_query={"query": text, "columns": ["fts_text"]},
            limit=n,
            prefilter=True,
            disable_scoring_autoprojection=True,
        )
        rows: list[dict[str, Any]] = table.to_pylist()
        return rows

    @translating("reading references")
    def references_snapshot(self) -> RefSnapshot | None:
        """The ``references`` table at its latest version, for reads in parts; None
        without one."""
        ds = self._dataset(S.REFERENCES)
        if ds is None:
            return None
        return RefSnapshot(
            ds.checkout_version(ds.version), self.uri, lambda: self._dataset(S.FILES)
        )

    @translating("reading a table")
    def states(self) -> list[SourceState]:
        ds = self._dataset(S.REPOS)
        if ds is None:
            return []
        cols = [f.name for f in S.REPOS_SCHEMA]
        return [IndexStore._state_from_row(r) for r in ds.to_table(columns=cols).to_pylist()]

    def close(self) -> None:
        """Drop the datasets (and what Lance caches for them); the next read reopens them."""
        with self._lock:
            self._datasets.clear()


def _indices(ds: Any) -> list[Any]:
    return list(ds.describe_indices())


__all__ = ["ChunkReader", "LanceReader"]
