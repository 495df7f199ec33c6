"""The LanceDB index: chunk rows, the file manifest, and per-source state.

One writer per index directory (concurrent ``merge_insert`` on overlapping ids
was measured to leave duplicate ids).  Each batch of changed files is one
commit of ``chunks`` (its old rows replaced by its new rows: readers never see a
file half-updated), then one commit of ``files``, then the source's state.
The order makes every crash repairable: a path whose ``files`` row is missing
or stale is simply done again, and re-doing a file is idempotent.

Every handle uses strong read consistency: a default LanceDB handle never sees
another process's later writes.

Storage owns LanceDB: every method that touches a table translates LanceDB, Arrow
and OS errors (``@translating``, see ``storage/_errors.py``) into one-line
``StoreError``s, and a missing or unreadable file into ``IndexDamaged``
(``codechunkd index --rebuild`` repairs it, see ``storage/repair.py``).  Callers
never see a LanceDB exception.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from codechunkd.embedding.base import vector_problems
from codechunkd.errors import IndexDamaged, ModelMismatch, SchemaMismatch, StoreError
from codechunkd.storage import schema as S
from codechunkd.storage._errors import translate, translating
from codechunkd.storage.crashpoints import crashpoint
from codechunkd.storage.objectstore import failure_reason, is_local
from codechunkd.storage.references import reference_rows, replace_references
from codechunkd.storage.statefile import SourceState as SourceState  # re-exported
from codechunkd.storage.statefile import read_state_file as read_state_file  # re-exported
from codechunkd.storage.statefile import write_state_file
from codechunkd.types import BlobId, SourceId

if TYPE_CHECKING:  # at run time only the writer needs them: readers skip pygit2 and tree-sitter
    from codechunkd.chunking.chunker import Chunk
    from codechunkd.git.changes import Head, Source

os.environ.setdefault("LANCEDB_LOG", "error")  # silence Rust WARN lines outside structlog


def quote(value: str) -> str:
    """A SQL string literal for LanceDB filters."""
    return "'" + value.replace("'", "''") + "'"


def in_list(column: str, values: Iterable[str]) -> str:
    return f"{column} IN ({', '.join(quote(v) for v in values)})"


def row_id(source: SourceId, chunk_id: str) -> str:
    return hashlib.sha256(f"{source}\0{chunk_id}".encode()).hexdigest()[:32]


FTS_MERGE_FACTOR = 4
"""A full-text delta is merged into an update at most this many times the update's size."""
FTS_MERGE_FLOOR = 4096
"""A full-text delta under this many rows is always merged into an update (a cheap rewrite
that keeps small saves from piling up one-row deltas)."""

FTS_INDEX = "fts_text_idx"
FTS_CONFIG: dict[str, Any] = {
    "base_tokenizer": "code",
    "split_identifiers": True,
    "preserve_original": True,
    "split_on_numerics": True,
    "language": "English",
    "stem": True,
    "remove_stop_words": True,
    "lower_case": True,
    "ascii_folding": True,
    "max_token_length": 40,
    "with_position": False,
}
"""How the full-text index reads ``fts_text`` (and a query): Lance's code tokenizer cuts
identifiers into their words and keeps them whole (``addBusinessDays`` → ``addbusinessdays
add business days``), then English stemming and stop words (code rarely holds "the", so
kept stop words pull the few chunks with comments up: docs/operations.md, Measured). Pinned,
not the library's defaults, which have changed between releases: an index built otherwise is
rebuilt by the writer (``ensure_fts``)."""

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def identifier_words(name: str) -> str:
    """``DataLoader.load_all`` -> ``data loader load all``."""
    return " ".join(w.lower() for w in _WORD.findall(name))


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"[A-Za-z0-9]+")
"""What the full-text index's tokenizer (``simple``) makes of an identifier: it cuts at
``_`` and keeps ``addBusinessDays`` whole."""


def code_words(text: str) -> str:
    """The words of the identifiers in ``text`` that the full-text tokenizer does not see.

    Identifiers are words run together, and the tokenizer cuts only at punctuation:
    ``addBusinessDays`` gains ``add business days`` and ``parse_header_links`` gains its
    whole, ``parseheaderlinks``. Each word once, in every language; the index and the
    query get the same words, so ``addBusinessDays``, ``add_business_days`` and "add
    business days" all meet.
    """
    seen: set[str] = set()
    out: list[str] = []
    for name in dict.fromkeys(_IDENTIFIER.findall(text)):
        words = [w.lower() for w in _WORD.findall(name)]
        if len(words) < 2:
            continue
        tokens = {t.lower() for t in _TOKEN.findall(name)}
        for w in (*words, "".join(words)):
            if len(w) > 1 and w not in tokens and w not in seen:
                seen.add(w)
                out.append(w)
    return " ".join(out)


def fts_text(chunk: Chunk, summary: str) -> str:
    """The full-text side of a chunk: a line of its names and context header, then its
    summary and content (the header's words: +0.03 BM25 Recall@5, bench/retrieval.py),
    then the words of the content's identifiers (``code_words``)."""
    names = list(dict.fromkeys([chunk.symbol, *chunk.names] if chunk.symbol else chunk.names))
    words = " ".join(f"{n} {identifier_words(n)}" for n in names)
    header = " ".join(chunk.header.split())
    return f"{words} {header}\n{summary}\n{chunk.content}\n{code_words(chunk.content)}"


def fts_text_with_summary(old: str, summary: str, content: str) -> str:
    """An ``fts_text`` with its summary replaced (the names line is kept)."""
    return f"{old.split(chr(10), 1)[0]}\n{summary}\n{content}\n{code_words(content)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddedChunk:
    chunk: Chunk
    vector: npt.NDArray[np.float32] | None
    """None: not embedded yet (written text first, filled in later: ``storage/coverage.py``)."""
    embed_hash: str
    embedded_tokens: int
    summary: str
    summary_source: str
    summary_of: str


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexedFile:
    """A file's new rows, ready to replace its old ones."""

    path: str
    blob: BlobId
    language: str
    dirty: bool
    chunks: tuple[EmbeddedChunk, ...] = ()
    skip_reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FragmentBatch:
    """A batch's chunk rows written as Lance data files that no version of ``chunks``
    references yet (``IndexStore.write_fragments``), and its ``files`` rows: small and
    picklable, so a Ray worker hands it to the driver, which commits it
    (``IndexStore.commit_fragments``)."""

    fragments: tuple[Any, ...]
    """Lance ``FragmentMetadata`` of the data files (ids assigned at the commit)."""
    files: pa.Table
    """The batch's rows of ``files`` (one per file, skipped ones included)."""
    chunks: int
    """Rows in the data files."""
    references: pa.Table | None = None
    """The batch's rows of ``references`` (added by the driver's commit)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileRecord:
    """What the index holds for one path of one source (a row of ``files``)."""

    path: str
    blob: BlobId
    language: str
    chunks: int
    skip_reason: str | None
    dirty: bool


class IndexStore:
    """The tables of one index directory."""

    def __init__(
        self,
        uri: str,
        *,
        state_file: Path | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        from codechunkd.storage._lancedb import import_lancedb

        lancedb = import_lancedb()
        self.uri = uri
        self.state_file = state_file
        try:
            if is_local(uri):
                Path(uri.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
            self.db = lancedb.connect(
                uri,
                read_consistency_interval=timedelta(0),
                storage_options=dict(storage_options or {}),
            )
        except Exception as exc:
            reason = None if is_local(uri) else failure_reason(str(exc))
            if reason:
                raise StoreError(f"cannot open the index at {uri}: {reason}") from None
            raise translate(exc, f"cannot open the index at {uri}") from exc
        self._tables: dict[str, Any] = {}

    # -- tables -------------------------------------------------------------

    @translating("listing tables")
    def table_names(self) -> list[str]:
        return list(self.db.list_tables().tables)

    def has_chunks(self) -> bool:
        return S.CHUNKS in self.table_names()

    @translating("opening a table", damage=True)
    def _open(self, name: str) -> Any:
        """A table, once per store.  What stops it from opening is damage (``IndexDamaged``,
        exit 8, with the rebuild hint) unless the environment is to blame: a manifest cut
        short, garbled or zeroed reads as all kinds of LanceDB errors, or as no columns."""
        tbl = self._tables.get(name)
        if tbl is None:
            tbl = self.db.open_table(name)
            schema = tbl.schema
            if not schema.names:
                raise IndexDamaged(f"table {name!r} has no columns: its manifest is unreadable")
            found = int((schema.metadata or {}).get(S.META_VERSION, b"0"))
            if found != S.SCHEMA_VERSION:
                raise SchemaMismatch(name, found, S.SCHEMA_VERSION)
            self._tables[name] = tbl
        return tbl

    @translating("creating a table")
    def _ensure(self, name: str, schema: pa.Schema) -> Any:
        if name not in self._tables and name not in self.table_names():
            self._tables[name] = self.db.create_table(name, schema=schema, exist_ok=True)
        tbl = self._open(name)
        if tbl.schema.names != schema.names:  # same version number, other columns: refuse
            raise SchemaMismatch(
                name, S.SCHEMA_VERSION, S.SCHEMA_VERSION, found_columns=tbl.schema.names
            )
        return tbl

    def ensure_writable(self, model_id: str, dimension: int) -> None:
        """Create missing tables; refuse a chunks table of another model or dimension."""
        self.check_model(model_id, dimension)
        self._ensure(S.CHUNKS, S.chunks_schema(dimension, model_id))
        self._ensure(S.FILES, S.FILES_SCHEMA)
        self._ensure(S.REPOS, S.REPOS_SCHEMA)
        self._ensure(S.REFERENCES, S.REFERENCES_SCHEMA)

    @translating("reading the table schema")
    def index_model(self) -> tuple[str, int] | None:
        """(model id, dimension) of the vectors in the index, if it has any table."""
        if not self.has_chunks():
            return None
        tbl = self._open(S.CHUNKS)
        meta = tbl.schema.metadata or {}
        dim = tbl.schema.field("vector").type.list_size
        return meta.get(S.META_MODEL, b"").decode(), int(dim)

    def check_model(self, model_id: str, dimension: int) -> None:
        found = self.index_model()
        if found is not None and found != (model_id, dimension):
            raise ModelMismatch(found[0], model_id, found[1], dimension)

    @translating("dropping the tables")
    def drop_all(self) -> None:
        for name in (S.CHUNKS, S.FILES, S.REPOS, S.REFERENCES):
            if name in self.table_names():
                self.db.drop_table(name)
        self._tables.clear()

    def chunks_table(self) -> Any:
        """The raw LanceDB table, for tests and tools: codechunkd itself goes through the
        methods here, which translate LanceDB's errors."""
        return self._open(S.CHUNKS)

    @translating("listing indexes")
    def _indices(self) -> list[Any]:
        return list(self._open(S.CHUNKS).list_indices()) if self.has_chunks() else []

    def has_fts(self) -> bool:
        return any(ix.index_type == "FTS" for ix in self._indices())

    def has_vector_index(self) -> bool:
        return any("vector" in ix.columns for ix in self._indices())

    @translating("building the full-text index")
    def ensure_fts(self) -> bool:
        """Create the full-text index once the table has rows (fast enough for the write path),
        or rebuild one made with another configuration than :data:`FTS_CONFIG` (an index of an
        older codechunkd: the same rows, tokenized as now). Returns whether it built one.

        Rows written later join it after each batch (``index_text``).
        """
        if not self.has_chunks() or self._open(S.CHUNKS).count_rows() == 0:
            return False
        if self.has_fts() and self.fts_current():
            return False
        crashpoint("fts_index.before")
        self._open(S.CHUNKS).to_lance().create_scalar_index(
            "fts_text", "INVERTED", name=FTS_INDEX, replace=True, **FTS_CONFIG
        )
        crashpoint("fts_index.after")
        return True

    def fts_current(self) -> bool:
        """Whether the full-text index tokenizes as :data:`FTS_CONFIG` says."""
        details = next(
            (ix.index_details or {} for ix in self._indices() if ix.index_type == "FTS"), {}
        )
        return all(details.get(k) == v for k, v in FTS_CONFIG.items())

    @translating("indexing embed_hash")
    def ensure_embed_hash_index(self) -> bool:
        """A BTree on ``embed_hash``, so an index serving as another's seed
        (``storage/seed.py``) answers bulk lookups by hash without scanning the table.

        Made once, when the table is new (on an empty table it costs nothing), or once
        on an older index; folds keep it current (they update every non-FTS index).
        Returns whether it was made now.
        """
        if not self.has_chunks() or any(ix.columns == ["embed_hash"] for ix in self._indices()):
            return False
        from lancedb.index import BTree

        self._open(S.CHUNKS).create_index("embed_hash", config=BTree(), replace=True)
        return True

    @translating("building the vector index")
    def build_vector_index(self) -> None:
        """An IVF-PQ cosine index on ``vector`` (slow to build: never in the write path)."""
        from lancedb.index import IvfPq

        tbl = self._open(S.CHUNKS)
        crashpoint("vector_index.before")
        tbl.create_index("vector", config=IvfPq(distance_type="cosine"), replace=True)
        crashpoint("vector_index.after")

    @translating("reading chunks")
    def select(
        self, where: str | None, columns: Sequence[str], *, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Rows of ``chunks`` matching a filter (no ranking)."""
        if not self.has_chunks():
            return []
        q = self._open(S.CHUNKS).search()
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
        return int(self._open(S.CHUNKS).count_rows(where)) if self.has_chunks() else 0

    @translating("updating chunks")
    def update_chunks(self, table: pa.Table) -> None:
        """Set the columns of ``table`` on the rows of ``chunks`` with its ids, in one commit
        (writer only; rows whose id is gone are not inserted)."""
        self._open(S.CHUNKS).merge_insert("id").when_matched_update_all().execute(table)

    # -- reads --------------------------------------------------------------

    @translating("reading a table")
    def scan_references(self, columns: Sequence[str]) -> tuple[int, pa.Table]:
        """(table version, the columns of every ``references`` row); (0, empty) without one."""
        if S.REFERENCES not in self.table_names():
            return 0, S.REFERENCES_SCHEMA.empty_table().select(list(columns))
        tbl = self._open(S.REFERENCES)
        return int(tbl.version), self._scan(S.REFERENCES, None, columns)

    @translating("reading the table version")
    def references_version(self) -> int:
        if S.REFERENCES not in self.table_names():
            return 0
        return int(self._open(S.REFERENCES).version)

    @translating("reading a table")
    def _scan(self, name: str, where: str | None, columns: Sequence[str]) -> pa.Table:
        if name not in self.table_names():
            return pa.table({c: [] for c in columns})
        q = self._open(name).search()
        if where:
            q = q.where(where)
        return q.select(list(columns)).limit(None).to_arrow()

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
        if S.CHUNKS not in self.table_names():
            return 0
        tbl = self._open(S.CHUNKS)
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
        return int(self._open(S.CHUNKS).count_rows()) if self.has_chunks() else 0

    @translating("counting rows")
    def count(self, source: SourceId | None = None) -> tuple[int, int]:
        """(files, chunks) in the index, for one source or all."""
        where = f"source = {quote(source)}" if source else None
        files = chunks = 0
        if S.FILES in self.table_names():
            files = self._open(S.FILES).count_rows(
                (where + " AND " if where else "") + "skip_reason IS NULL"
            )
        if S.CHUNKS in self.table_names():
            chunks = self._open(S.CHUNKS).count_rows(where)
        return files, chunks

    # -- writes (the single writer) -----------------------------------------

    @translating("writing a batch")
    def write_batch(
        self,
        source: Source,
        head: Head,
        files: Sequence[IndexedFile],
        deletes: Sequence[str],
        *,
        model_id: str,
        new: bool = False,
    ) -> None:
        """Replace the rows of ``files`` and remove ``deletes``, in one commit per table.

        ``new``: the caller knows no path of ``files`` has rows and ``deletes`` is
        empty (a cold index), so the rows are appended.  A ``merge_insert`` joins
        the batch with the whole table: its memory grows with the table.
        """
        paths = [f.path for f in files] + list(deletes)
        if not paths:
            return
        scope = f"source = {quote(source.id)} AND {in_list('path', paths)}"
        now = datetime.now(UTC)
        chunks = self._open(S.CHUNKS)
        rows = self._chunk_rows(source, head, files, model_id, now, chunks.schema)
        try:
            crashpoint("write_batch.before")
            if new and not deletes:  # references after chunks: a kill between leaves
                if rows.num_rows:  # chunk rows with no manifest row, found and replaced
                    chunks.add(rows, on_bad_vectors="null")  # null: text first (coverage.py)
                crashpoint("write_batch.chunks_committed")
                self._write_references(source, head, files, now, scope, append=True)
                self._open(S.FILES).add(self._file_rows(source, files, now))
                crashpoint("write_batch.after")
                return
            self._write_references(source, head, files, now, scope, append=False)
            if rows.num_rows:
                (
                    chunks.merge_insert("id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .when_not_matched_by_source_delete(scope)
                    .execute(rows, on_bad_vectors="null")
                )
            else:
                chunks.delete(scope)
            crashpoint("write_batch.chunks_committed")
            file_rows = self._file_rows(source, files, now)
            tbl = self._open(S.FILES)
            if file_rows.num_rows:
                (
                    tbl.merge_insert("key")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .when_not_matched_by_source_delete(scope)
                    .execute(file_rows)
                )
            else:
                tbl.delete(scope)
            crashpoint("write_batch.after")
        except Exception as exc:
            raise translate(exc, f"writing {len(paths)} files to {self.uri}") from exc

    def _write_references(
        self,
        source: Source,
        head: Head,
        files: Sequence[IndexedFile],
        now: datetime,
        scope: str,
        *,
        append: bool,
    ) -> None:
        """The files' ``references`` rows, replaced in one commit (storage/references.py),
        before their manifest rows: a kill in between leaves the manifest old, and the next
        sync redoes the files.  A replacement writes them before the chunks (an edit that
        is searchable has its references); an append (a cold index) after them."""
        rows = reference_rows(source, head, files, now, row_id)
        replace_references(self._open(S.REFERENCES), rows, scope, append=append)
        crashpoint("write_batch.references_committed")

    def _chunk_rows(
        self,
        source: Source,
        head: Head,
        files: Sequence[IndexedFile],
        model_id: str,
        now: datetime,
        schema: pa.Schema,
    ) -> pa.Table:
        cols: dict[str, list[Any]] = {f.name: [] for f in schema if f.name != "vector"}
        vectors: list[npt.NDArray[np.float32]] = []
        nulls: list[bool] = []
        dim = schema.field("vector").type.list_size
        blank = np.zeros(dim, np.float32)
        for f in files:
            for e in f.chunks:
                c = e.chunk
                values = {
                    "id": row_id(source.id, c.id),
                    "source": source.id,
                    "repo": source.repo,
                    "branch": head.branch,
                    "commit": head.commit,
                    "blob": f.blob,
                    "path": c.path,
                    "language": c.language,
                    "kind": c.kind,
                    "symbol": c.symbol,
                    "parent_id": row_id(source.id, c.parent_id) if c.parent_id else None,
                    "start_line": c.start_line,
                    "end_line": c.end_line,
                    "start_byte": c.start_byte,
                    "end_byte": c.end_byte,
                    "content": c.content,
                    "content_hash": c.content_hash,
                    "embed_text": c.embed_text,
                    "embed_hash": e.embed_hash,
                    "fts_text": fts_text(c, e.summary),
                    "token_count": c.token_count,
                    "embedded_tokens": e.embedded_tokens,
                    "signature": c.signature,
                    "docstring": c.docstring,
                    "summary": e.summary,
                    "summary_source": e.summary_source,
                    "summary_of": e.summary_of,
                    "embedding_model": model_id if e.vector is not None else None,
                    "synthetic": c.synthetic,
                    "dirty": f.dirty,
                    "indexed_at": now,
                }
                for k, col in cols.items():
                    col.append(values[k])
                vectors.append(blank if e.vector is None else e.vector)
                nulls.append(e.vector is None)
        flat = (
            np.concatenate(vectors).astype(np.float32, copy=False)
            if vectors
            else np.zeros(0, np.float32)
        )
        arrays = {k: pa.array(v, type=schema.field(k).type) for k, v in cols.items()}
        mask = pa.array(nulls, pa.bool_()) if any(nulls) else None
        arrays["vector"] = pa.FixedSizeListArray.from_arrays(
            pa.array(flat, pa.float32()), dim, mask=mask
        )
        return pa.table([arrays[f.name] for f in schema], schema=schema)

    @staticmethod
    def _file_rows(source: Source, files: Sequence[IndexedFile], now: datetime) -> pa.Table:
        return pa.Table.from_pylist(
            [
                {
                    "key": f"{source.id}:{f.path}",
                    "source": source.id,
                    "path": f.path,
                    "blob": f.blob,
                    "language": f.language,
                    "chunks": len(f.chunks),
                    "skip_reason": f.skip_reason,
                    "dirty": f.dirty,
                    "indexed_at": now,
                }
                for f in files
            ],
            schema=S.FILES_SCHEMA,
        )

    @translating("writing data files")
    def write_fragments(
        self, source: Source, head: Head, files: Sequence[IndexedFile], *, model_id: str
    ) -> FragmentBatch:
        """The rows ``write_batch`` would append for ``files``, written as Lance data files
        beside the table but not part of it: nothing changes for readers until the writer
        commits them (``commit_fragments``).

        Any process that can open the index may call it (a Ray worker: the rows of a cold
        build are written where they are made, not shipped to the writer). Only for files
        with no rows yet: an append cannot replace a file's old rows. Data files never
        committed (a killed writer) are deleted by ``remove_unreferenced_files``.
        """
        from lance.fragment import write_fragments

        now = datetime.now(UTC)
        tbl = self._open(S.CHUNKS)
        rows = self._chunk_rows(source, head, files, model_id, now, tbl.schema)
        frags = write_fragments(rows, tbl.to_lance(), schema=rows.schema) if rows.num_rows else []
        crashpoint("write_fragments.after")
        return FragmentBatch(
            fragments=tuple(frags),
            files=self._file_rows(source, files, now),
            chunks=rows.num_rows,
            references=reference_rows(source, head, files, now, row_id),
        )

    def commit_fragments(self, batches: Sequence[FragmentBatch]) -> int:
        """Add the data files of ``batches`` to ``chunks`` in one commit, then their
        ``files`` rows in one (writer only); returns the chunk rows added.

        The order is ``write_batch``'s: rows whose ``files`` row is missing (a kill between
        the two commits) are found and replaced by the next full sync.
        """
        import lance

        frags = [f for b in batches for f in b.fragments]
        files = [b.files for b in batches if b.files.num_rows]
        try:
            crashpoint("commit_fragments.before")
            if frags:
                ds = self._open(S.CHUNKS).to_lance()
                lance.LanceDataset.commit(
                    ds, lance.LanceOperation.Append(frags), read_version=ds.version
                )
            crashpoint("commit_fragments.chunks_committed")
            refs = [b.references for b in batches if b.references is not None]
            if refs:
                replace_references(
                    self._open(S.REFERENCES), pa.concat_tables(refs), "", append=True
                )
            if files:
                self._open(S.FILES).add(pa.concat_tables(files))
            crashpoint("commit_fragments.after")
        except Exception as exc:
            raise translate(exc, f"committing {len(frags)} data files to {self.uri}") from exc
        return sum(b.chunks for b in batches)

    @translating("removing unreferenced data files")
    def remove_unreferenced_files(self, keep: timedelta) -> int:
        """Delete the data files of ``chunks`` that no version references (those of
        ``write_fragments`` never committed: a writer killed mid-build), and versions older
        than ``keep``, as ``fold`` does; returns the bytes freed.

        Lance deletes such files only once they are 7 days old unless told otherwise: they
        may belong to a write in progress. So the writer calls this before it writes or
        hands out any write of its own (one writer per index: no other write can be in
        progress).
        """
        if not self.has_chunks():
            return 0
        stats = (
            self._open(S.CHUNKS)
            .to_lance()
            .cleanup_old_versions(older_than=keep, delete_unverified=True)
        )
        return int(stats.bytes_removed)

    @translating("writing the source state")
    def put_state(self, state: SourceState) -> None:
        src = state.source
        row = {
            "source": src.id,
            "kind": str(src.kind),
            "repo": src.repo,
            "git_dir": src.git_dir,
            "ref": src.ref,
            "branch": state.branch,
            "commit": state.commit,
            "dirty": json.dumps(dict(state.dirty), sort_keys=True),
            "pending": state.pending,
            "fingerprint": state.fingerprint,
            "schema_version": S.SCHEMA_VERSION,
            "embedding_model": state.embedding_model,
            "files": state.files,
            "chunks": state.chunks,
            "updated_at": datetime.now(UTC),
        }
        tbl = self._open(S.REPOS)
        data = pa.Table.from_pylist([row], schema=S.REPOS_SCHEMA)
        try:
            crashpoint("put_state.before")
            tbl.merge_insert(
                "source"
            ).when_matched_update_all().when_not_matched_insert_all().execute(data)
            crashpoint("put_state.committed")
        except Exception as exc:
            raise translate(exc, f"writing the state of {src.repo}") from exc
        self.write_state_file()

    def write_state_file(self) -> None:
        """Mirror ``repos`` into ``state.json`` (atomically) for the fast ``status`` path."""
        if self.state_file is None:
            return
        crashpoint("state_file.before")
        write_state_file(self.state_file, self.uri, self.states(), schema_version=S.SCHEMA_VERSION)
        crashpoint("state_file.after")

    @translating("removing a source")
    def remove_source(self, source: SourceId) -> None:
        where = f"source = {quote(source)}"
        for name in (S.CHUNKS, S.FILES, S.REPOS, S.REFERENCES):
            if name in self.table_names():
                self._open(name).delete(where)

    def _fts_index(self) -> Any | None:
        """The lance description of the full-text index, if there is one."""
        fts = {ix.name for ix in self._indices() if ix.index_type == "FTS"}
        for ix in self._open(S.CHUNKS).to_lance().describe_indices():
            if ix.name in fts:
                return ix
        return None

    @translating("reading fragments")
    def unindexed(self) -> tuple[int, int]:
        """Rows and data fragments of ``chunks`` its full-text index does not cover yet."""
        if not self.has_chunks():
            return 0, 0
        fts = self._fts_index()
        covered: set[int] = set()
        for segment in fts.segments if fts is not None else ():  # the index and its deltas
            covered.update(segment.fragment_ids)
        ds = self._open(S.CHUNKS).to_lance()
        new = [f for f in ds.get_fragments() if f.fragment_id not in covered]
        return sum(f.metadata.physical_rows for f in new), len(new)

    @translating("reading fragments")
    def unfolded(self, fragment_rows: int) -> tuple[int, int]:
        """Rows and data fragments of ``chunks`` written since the last fold.

        Those the vector index does not cover; without one (a small table), the fragments a
        fold would compact, less the one a fold leaves (the remainder under
        ``fragment_rows``). The full-text index is no measure: it is kept current after
        every write (``index_text``).
        """
        if not self.has_chunks():
            return 0, 0
        ds = self._open(S.CHUNKS).to_lance()
        frags = ds.get_fragments()
        vector = {ix.name for ix in self._indices() if "vector" in ix.columns}
        if vector:
            covered: set[int] = set()
            for ix in ds.describe_indices():
                if ix.name in vector:
                    for segment in ix.segments:
                        covered.update(segment.fragment_ids)
            new = [f.metadata.physical_rows for f in frags if f.fragment_id not in covered]
        else:
            small = sorted(f.metadata.physical_rows for f in frags)
            new = [n for n in small if n < fragment_rows][:-1]
        return sum(new), len(new)

    @translating("updating the full-text index")
    def index_text(self) -> int:
        """Add the rows the full-text index does not cover to it (writer only); returns how
        many it added.

        The new rows become a delta of the index, merged with the newest deltas while each
        is at most :data:`FTS_MERGE_FACTOR` times what is merged so far or under
        :data:`FTS_MERGE_FLOOR` rows (tiered merging, as in an LSM tree; the first index is
        never rewritten). So an update costs about what was written (a rewrite is paid for
        by earlier writes many times its size), and the index keeps a few deltas of growing
        sizes: a query pays a little per delta, much less than it pays to scan rows the
        index does not cover (bench/search_quality.py ``--latency``).
        """
        rows, _ = self.unindexed()
        fts = self._fts_index() if rows else None
        if fts is None:
            return 0
        ds = self._open(S.CHUNKS).to_lance()
        size = {f.fragment_id: f.metadata.physical_rows for f in ds.get_fragments()}
        deltas = [sum(size.get(i, 0) for i in seg.fragment_ids) for seg in fts.segments[1:]]
        merged, total = 0, rows
        for delta in reversed(deltas):
            if delta > max(FTS_MERGE_FACTOR * total, FTS_MERGE_FLOOR):
                break
            merged, total = merged + 1, total + delta
        # one atomic commit that adds no row: a kill on either side of it is a kill at the
        # write boundary before or after it (tests/pipeline/test_crash.py)
        ds.optimize.optimize_indices(index_names=[fts.name], num_indices_to_merge=merged)
        return rows

    @translating("compacting the index")
    def fold(self, keep: timedelta, *, fragment_rows: int, merge: bool) -> None:
        """Fold rows written since the last fold into the table's layout and indexes (writer only).

        Small fragments are compacted into fragments of up to ``fragment_rows`` rows on one
        thread; larger ones are left alone. The indexes get a delta for the new rows
        (``merge``: the new rows go into the latest delta instead, for small folds), and
        versions older than ``keep`` are dropped. So a fold costs what was written since the
        last one, not the size of the table: LanceDB's ``optimize()`` rewrites every fragment
        under a million rows and merges the whole index, at a memory cost that grows with the
        table (docs/operations.md, Measured).
        """
        try:
            crashpoint("fold.before")
            if self.has_chunks():
                tbl = self._open(S.CHUNKS)
                tbl.to_lance().optimize.compact_files(
                    target_rows_per_fragment=fragment_rows, num_threads=1
                )
                crashpoint("fold.compacted")
                others = [ix.name for ix in self._indices() if ix.index_type != "FTS"]
                if others:  # the vector index (the full-text one has its own policy)
                    tbl.to_lance().optimize.optimize_indices(
                        index_names=others, num_indices_to_merge=int(merge)
                    )
                self.index_text()
                crashpoint("fold.indexed")
                tbl.to_lance().cleanup_old_versions(older_than=keep)
            if S.REFERENCES in self.table_names():  # many small rows: compacted as chunks
                refs = self._open(S.REFERENCES).to_lance()
                refs.optimize.compact_files(target_rows_per_fragment=fragment_rows, num_threads=1)
                refs.cleanup_old_versions(older_than=keep)
            for name in (S.FILES, S.REPOS):  # one row per file or repository: small
                if name in self.table_names():
                    self._open(name).optimize(cleanup_older_than=keep)
            crashpoint("fold.after")
        except Exception as exc:
            raise translate(exc, f"compacting the index {self.uri}") from exc

    def size_bytes(self) -> int | None:
        if not is_local(self.uri):
            return None
        root = Path(self.uri.removeprefix("file://"))
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
