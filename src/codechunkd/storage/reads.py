"""Reading the tables: rows of ``chunks``, the manifest, source states, counts.

Owns every read of ``IndexStore`` (a filter, a vector or full-text query, a scan, a count).
Reads only: it must not write, create or drop a table (``storage/writes.py``), nor touch
an index (``storage/upkeep.py``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from codechunkd.embedding.base import vector_problems
from codechunkd.storage import schema as S
from codechunkd.storage._errors import translating
from codechunkd.storage.refscan import RefSnapshot
from codechunkd.storage.rows import FileRecord, in_list, quote
from codechunkd.storage.statefile import SourceState
from codechunkd.storage.tables import Tables
from codechunkd.types import SourceId


class Reads(Tables):
    """The reads of ``IndexStore``."""

    @translating("reading chunks")
    def select(
        self, where: str | None, columns: Sequence[str], *, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Rows of ``chunks`` matching a filter (no ranking)."""
        tbl = self._table(S.CHUNKS)
        if tbl is None:
            return []
        q = tbl.search()
        if where:
            q = q.where(where)
        rows: list[dict[str, Any]] = q.select(list(columns)).limit(limit).to_list()
        return rows

    def rows_by_id(self, ids: Sequence[str], columns: Sequence[str]) -> list[dict[str, Any]]:
        if not ids:
            return []
        return self.select(in_list("id", ids), columns)

    @translating("searching vectors")
    def vector_search(
        self, vector: npt.NDArray[np.float32], n: int, where: str | None, columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The ``n`` rows of ``chunks`` nearest to ``vector`` (cosine), with ``_distance``."""
        q = self._open(S.CHUNKS).search(np.asarray(vector, np.float32)).distance_type("cosine")
        if where:
            q = q.where(where, prefilter=True)
        rows: list[dict[str, Any]] = q.select([*columns, "_distance"]).limit(n).to_list()
        return rows

    @translating("searching text")
    def text_search(
        self, text: str, n: int, where: str | None, columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        """The ``n`` best BM25 matches of ``text`` in ``fts_text``, with ``_score``."""
        q = self._open(S.CHUNKS).search(text, query_type="fts", fts_columns="fts_text")
        if where:
            q = q.where(where, prefilter=True)
        rows: list[dict[str, Any]] = q.select([*columns, "_score"]).limit(n).to_list()
        return rows

    def scan_chunks(self, where: str | None, columns: Sequence[str]) -> pa.Table:
        """Every row of ``chunks`` matching ``where`` (an Arrow table, no ranking)."""
        return self._scan(S.CHUNKS, where, columns)

    @translating("counting rows")
    def count_chunks(self, where: str | None = None) -> int:
        """Rows of ``chunks`` matching ``where`` (0 without a table)."""
        tbl = self._table(S.CHUNKS)
        return 0 if tbl is None else int(tbl.count_rows(where))

    @translating("reading references")
    def references_snapshot(self) -> RefSnapshot | None:
        """The ``references`` table at its latest version, for reads in parts; None
        without one."""
        tbl = self._table(S.REFERENCES)
        return None if tbl is None else RefSnapshot(tbl.to_lance(), self.uri, self._files_lance)

    def _files_lance(self) -> Any:
        """The ``files`` table as a Lance dataset (None without one): ``RefSnapshot.indexed``."""
        files = self._table(S.FILES)
        return None if files is None else files.to_lance()

    @translating("reading a table")
    def _scan(self, name: str, where: str | None, columns: Sequence[str]) -> pa.Table:
        tbl = self._table(name)
        if tbl is None:
            return pa.table({c: [] for c in columns})
        return _scan_all(tbl, where, columns)

    def manifest(self, source: SourceId) -> dict[str, FileRecord]:
        cols = ["path", "blob", "language", "chunks", "skip_reason", "dirty"]
        t = self._scan(S.FILES, f"source = {quote(source)}", cols).to_pylist()
        return {
            r["path"]: FileRecord(
                path=r["path"],
                blob=r["blob"],
                language=r["language"] or "",
                chunks=r["chunks"] or 0,
                skip_reason=r["skip_reason"],
                dirty=bool(r["dirty"]),
            )
            for r in t
        }

    def reference_keys(self, source: SourceId) -> list[dict[str, Any]]:
        """What ``verify`` compares of ``source``'s ``references`` rows: each row's file,
        chunk, kind, names and line."""
        cols = ["path", "chunk_id", "kind", "name", "qualifier", "module", "line"]
        rows: list[dict[str, Any]] = self._scan(
            S.REFERENCES, f"source = {quote(source)}", cols
        ).to_pylist()
        return rows

    def chunk_paths(self, source: SourceId) -> set[str]:
        """Paths that have chunk rows (orphans of a crash show up here, not in ``files``)."""
        t = self._scan(S.CHUNKS, f"source = {quote(source)}", ["path"])
        return set(t.column("path").to_pylist())

    def chunk_keys(self, source: SourceId) -> list[dict[str, Any]]:
        cols = ["id", "path", "start_byte", "end_byte", "content_hash", "blob", "synthetic"]
        rows: list[dict[str, Any]] = self._scan(
            S.CHUNKS, f"source = {quote(source)}", cols
        ).to_pylist()
        return rows

    @translating("reading vectors")
    def unusable_vectors(self, source: SourceId) -> int:
        """Rows of ``source`` whose vector is no embedding (NaN, infinite, all zeros; see
        ``vector_problems``): ``verify`` counts them, a rebuild embeds them again.  Reads the
        vectors a batch at a time."""
        tbl = self._table(S.CHUNKS)
        if tbl is None:
            return 0
        dim = tbl.schema.field("vector").type.list_size
        # a NULL vector is one not filled in yet (storage/coverage.py), not a bad one
        where = f"source = {quote(source)} AND embedding_model IS NOT NULL"
        q = tbl.search().where(where).select(["vector"]).limit(None)
        bad = 0
        for batch in q.to_batches(4096):
            column = batch.column("vector")
            flat = column.values.slice(column.offset * dim, len(column) * dim)
            matrix = flat.to_numpy(zero_copy_only=False).reshape(len(column), dim)
            bad += len(vector_problems(matrix, dim))
        return bad

    def states(self) -> list[SourceState]:
        cols = [f.name for f in S.REPOS_SCHEMA]
        return [self._state_from_row(r) for r in self._scan(S.REPOS, None, cols).to_pylist()]

    def state(self, source: SourceId) -> SourceState | None:
        cols = [f.name for f in S.REPOS_SCHEMA]
        rows = self._scan(S.REPOS, f"source = {quote(source)}", cols).to_pylist()
        return self._state_from_row(rows[0]) if rows else None

    @staticmethod
    def _state_from_row(r: Mapping[str, Any]) -> SourceState:
        from codechunkd.git.changes import Source, SourceKind

        return SourceState(
            source=Source(
                id=r["source"],
                kind=SourceKind(r["kind"]),
                repo=r["repo"],
                git_dir=r["git_dir"],
                ref=r["ref"],
            ),
            branch=r["branch"] or "",
            commit=r["commit"],
            dirty=json.loads(r["dirty"] or "{}"),
            pending=r["pending"],
            fingerprint=r["fingerprint"] or "",
            embedding_model=r["embedding_model"] or "",
            files=int(r["files"] or 0),
            chunks=int(r["chunks"] or 0),
            updated_at=r["updated_at"],
        )

    @translating("counting rows")
    def rows(self) -> int:
        """Rows of ``chunks`` (all sources; from the table's metadata)."""
        tbl = self._table(S.CHUNKS)
        return 0 if tbl is None else int(tbl.count_rows())

    @translating("counting rows")
    def count(self, source: SourceId | None = None) -> tuple[int, int]:
        """(files, chunks) in the index, for one source or all."""
        where = f"source = {quote(source)}" if source else None
        files = chunks = 0
        if (tbl := self._table(S.FILES)) is not None:
            files = tbl.count_rows((where + " AND " if where else "") + "skip_reason IS NULL")
        if (tbl := self._table(S.CHUNKS)) is not None:
            chunks = tbl.count_rows(where)
        return files, chunks

    @translating("counting skipped files")
    def skipped(self, source: SourceId) -> dict[str, int]:
        """Files of ``source`` recorded without chunks, by ``skip_reason`` (name order)."""
        return self.skipped_by_source(source).get(source, {})

    @translating("counting skipped files")
    def skipped_by_source(self, source: SourceId | None = None) -> dict[str, dict[str, int]]:
        """``skipped`` of every source (or of ``source``) in one scan: source id -> reason
        -> files."""
        tbl = self._table(S.FILES)
        if tbl is None:
            return {}
        where = "skip_reason IS NOT NULL"
        if source is not None:
            where = f"source = {quote(source)} AND {where}"
        rows = _scan_all(tbl, where, ["source", "skip_reason"])
        found = Counter(
            zip(
                rows.column("source").to_pylist(),
                rows.column("skip_reason").to_pylist(),
                strict=True,
            )
        )
        out: dict[str, dict[str, int]] = {}
        for (sid, reason), n in sorted(found.items()):
            out.setdefault(sid, {})[reason] = n
        return out


def _scan_all(tbl: Any, where: str | None, columns: Sequence[str]) -> pa.Table:
    """Every row of the open table ``tbl`` matching ``where``, its ``columns``."""
    q = tbl.search()
    if where:
        q = q.where(where)
    return q.select(list(columns)).limit(None).to_arrow()
