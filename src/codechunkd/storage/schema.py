"""The table contract: every table and column readers may depend on.

``docs/schema.md`` documents the same columns; ``tests/storage/test_schema_doc.py``
fails when the two disagree.  Changing a column means bumping ``SCHEMA_VERSION``
and writing a migration, never a surprise for readers.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

CHUNKS = "chunks"
FILES = "files"
REPOS = "repos"
REFERENCES = "references"

#: Schema metadata keys (stored on the ``chunks`` table).
META_VERSION = b"codechunkd.schema_version"
META_MODEL = b"codechunkd.embedding_model"

_TS = pa.timestamp("us", tz="UTC")


def chunks_schema(dimension: int, model_id: str) -> pa.Schema:
    fields = [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("repo", pa.string()),
        pa.field("branch", pa.string()),
        pa.field("commit", pa.string()),
        pa.field("blob", pa.string()),
        pa.field("path", pa.string(), nullable=False),
        pa.field("language", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("symbol", pa.string()),
        pa.field("parent_id", pa.string()),
        pa.field("start_line", pa.int32()),
        pa.field("end_line", pa.int32()),
        pa.field("start_byte", pa.int64()),
        pa.field("end_byte", pa.int64()),
        pa.field("content", pa.string()),
        pa.field("content_hash", pa.string()),
        pa.field("embed_text", pa.string()),
        pa.field("embed_hash", pa.string()),
        pa.field("fts_text", pa.string()),
        pa.field("token_count", pa.int32()),
        pa.field("embedded_tokens", pa.int32()),
        pa.field("signature", pa.string()),
        pa.field("docstring", pa.string()),
        pa.field("summary", pa.string()),
        pa.field("summary_source", pa.string()),
        pa.field("summary_of", pa.string()),
        pa.field("vector", pa.list_(pa.float32(), dimension)),
        pa.field("embedding_model", pa.string()),
        pa.field("synthetic", pa.bool_()),
        pa.field("dirty", pa.bool_()),
        pa.field("indexed_at", _TS),
    ]
    meta = {META_VERSION: str(SCHEMA_VERSION).encode(), META_MODEL: model_id.encode()}
    return pa.schema(fields, metadata=meta)


FILES_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("blob", pa.string()),
        pa.field("language", pa.string()),
        pa.field("chunks", pa.int32()),
        pa.field("skip_reason", pa.string()),
        pa.field("dirty", pa.bool_()),
        pa.field("indexed_at", _TS),
    ],
    metadata={META_VERSION: str(SCHEMA_VERSION).encode()},
)

REPOS_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("kind", pa.string()),
        pa.field("repo", pa.string()),
        pa.field("git_dir", pa.string()),
        pa.field("ref", pa.string()),
        pa.field("branch", pa.string()),
        pa.field("commit", pa.string()),
        pa.field("dirty", pa.string()),
        pa.field("pending", pa.string()),
        pa.field("fingerprint", pa.string()),
        pa.field("schema_version", pa.int32()),
        pa.field("embedding_model", pa.string()),
        pa.field("files", pa.int64()),
        pa.field("chunks", pa.int64()),
        pa.field("updated_at", _TS),
    ],
    metadata={META_VERSION: str(SCHEMA_VERSION).encode()},
)

REFERENCES_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("branch", pa.string()),
        pa.field("commit", pa.string()),
        pa.field("blob", pa.string()),
        pa.field("path", pa.string(), nullable=False),
        pa.field("language", pa.string()),
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("chunk_symbol", pa.string()),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("qualifier", pa.string()),
        pa.field("module", pa.string()),
        pa.field("line", pa.int32()),
        pa.field("indexed_at", _TS),
    ],
    metadata={META_VERSION: str(SCHEMA_VERSION).encode()},
)
