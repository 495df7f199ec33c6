"""The tables of one index directory: the connection, opening and creating tables.

Owns the LanceDB connection (strong read consistency: a default handle never sees another
process's later writes), opening a table once per store and refusing one of another schema
version, model or dimension (``SchemaMismatch``, ``ModelMismatch``; a table that will not
open is ``IndexDamaged``).  The base of ``IndexStore`` (``storage/store.py``): it reads and
writes no rows (``storage/reads.py``, ``storage/writes.py``) and keeps no index
(``storage/upkeep.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from codechunkd.errors import IndexDamaged, ModelMismatch, SchemaMismatch, StoreError
from codechunkd.storage import schema as S
from codechunkd.storage._errors import translate, translating
from codechunkd.storage.objectstore import failure_reason, is_local

os.environ.setdefault("LANCEDB_LOG", "error")  # silence Rust WARN lines outside structlog


class TableNotMade(IndexDamaged):
    """A table listed before its first version: a writer creating it lists its folder
    before the manifest lands (on S3 too), and one that crashed there leaves it so.  Like
    a missing table, not damage, to readers (``Tables._table``) and to the writer, which
    makes it; damage only where a table is needed at once (``_open``)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"table {name!r} has no version yet (_versions/ is missing or empty)")


def not_made(uri: str, name: str, exc: BaseException) -> bool:
    """Whether ``exc``, from opening table ``name`` at ``uri``, says it has no version yet:
    locally, its ``_versions/`` holds no manifest; in an object store (one listing is all
    there is), LanceDB says "not found"."""
    if not is_local(uri):
        return "not found" in str(exc).lower()
    versions = Path(uri.removeprefix("file://")) / f"{name}.lance" / "_versions"
    try:
        return not any(p.suffix == ".manifest" for p in versions.iterdir())
    except FileNotFoundError:
        return True
    except OSError:  # not a directory, unreadable: damage
        return False


class Tables:
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

    @translating("listing tables")
    def table_names(self) -> list[str]:
        return list(self.db.list_tables().tables)

    def has_chunks(self) -> bool:
        return self._table(S.CHUNKS) is not None

    def _table(self, name: str) -> Any | None:
        """The table, or None while there is none: not listed, or listed before its first
        version (``TableNotMade``), which readers and the next writer take as no table."""
        if name not in self.table_names():  # listed each time: a rebuild drops tables
            return None
        try:
            return self._open(name)
        except TableNotMade:
            return None

    @translating("opening a table", damage=True)
    def _open(self, name: str) -> Any:
        """A table, once per store.  What stops it from opening is damage (``IndexDamaged``,
        exit 8, with the rebuild hint) unless the environment is to blame: a manifest cut
        short, garbled or zeroed reads as all kinds of LanceDB errors, or as no columns."""
        tbl = self._tables.get(name)
        if tbl is None:
            try:
                tbl = self.db.open_table(name)
            except Exception as exc:
                if not_made(self.uri, name, exc):
                    raise TableNotMade(name) from exc
                raise
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
        if self._table(name) is None:  # none, or one whose creation never ended: made now
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
        tbl = self._table(S.CHUNKS)
        if tbl is None:
            return None
        meta = tbl.schema.metadata or {}
        dim = tbl.schema.field("vector").type.list_size
        return meta.get(S.META_MODEL, b"").decode(), int(dim)

    def check_model(self, model_id: str, dimension: int) -> None:
        found = self.index_model()
        if found is not None and found != (model_id, dimension):
            raise ModelMismatch(found[0], model_id, found[1], dimension)

    @translating("dropping the tables")
    def drop_all(self) -> None:
        listed = self.table_names()
        for name in (S.CHUNKS, S.FILES, S.REPOS, S.REFERENCES):
            if name in listed:
                self.db.drop_table(name)
        self._tables.clear()

    def chunks_table(self) -> Any:
        """The raw LanceDB table, for tests and tools: codechunkd itself goes through the
        methods here, which translate LanceDB's errors."""
        return self._open(S.CHUNKS)

    @translating("listing indexes")
    def _indices(self) -> list[Any]:
        tbl = self._table(S.CHUNKS)
        return [] if tbl is None else list(tbl.list_indices())

    def size_bytes(self) -> int | None:
        if not is_local(self.uri):
            return None
        root = Path(self.uri.removeprefix("file://"))
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
