"""The table contract's rows: ids, filter literals, and the rows a write appends.

Owns what a row of ``chunks`` and ``files`` holds (``chunk_rows``, ``manifest_rows``), the
values a batch hands the writer (``IndexedFile`` of ``EmbeddedChunk``s), what a ``files``
row reads back as (``FileRecord``), row ids (``row_id``) and the SQL literals of filters
(``quote``, ``in_list``).  Builds Arrow tables only: it must not open, read or write a
table (``storage/writes.py`` and ``storage/fragments.py`` write what it builds).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from codechunkd.storage import schema as S
from codechunkd.storage.fulltext import fts_text
from codechunkd.types import BlobId, SourceId

if TYPE_CHECKING:  # at run time only the writer needs them: readers skip pygit2 and tree-sitter
    from codechunkd.chunking.chunker import Chunk
    from codechunkd.git.changes import Head, Source


def quote(value: str) -> str:
    """A SQL string literal for LanceDB filters."""
    return "'" + value.replace("'", "''") + "'"


def in_list(column: str, values: Iterable[str]) -> str:
    return f"{column} IN ({', '.join(quote(v) for v in values)})"


def row_id(source: SourceId, chunk_id: str) -> str:
    return hashlib.sha256(f"{source}\0{chunk_id}".encode()).hexdigest()[:32]


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
class FileRecord:
    """What the index holds for one path of one source (a row of ``files``)."""

    path: str
    blob: BlobId
    language: str
    chunks: int
    skip_reason: str | None
    dirty: bool


def chunk_rows(
    source: Source,
    head: Head,
    files: Sequence[IndexedFile],
    model_id: str,
    now: datetime,
    schema: pa.Schema,
) -> pa.Table:
    """The ``chunks`` rows of ``files``, in the table's ``schema``."""
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


def manifest_rows(source: Source, files: Sequence[IndexedFile], now: datetime) -> pa.Table:
    """The ``files`` rows of ``files`` (one per file, skipped ones included)."""
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


_T = TypeVar("_T")


def once(items: Iterable[_T], key: Callable[[_T], Hashable]) -> list[_T]:
    """``items`` in order, each ``key`` once: the first of its copies (the same chunk, use or
    definition indexed in several sources, a repository and its worktree, is one answer)."""
    seen: set[Hashable] = set()
    out = []
    for x in items:
        k = key(x)
        if k not in seen:
            seen.add(k)
            out.append(x)
    return out
