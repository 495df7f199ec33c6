"""A seed: another index whose vectors (and LLM summaries) this one takes instead of computing.

Rows are content-addressed: a row's ``vector`` is the model's embedding of its
``embed_text``, named by ``embed_hash`` (the key of the local embedding cache too). So
the index a CI box keeps for ``main`` already holds the vectors of nearly every chunk
a developer's clone of it needs: looked up by ``embed_hash`` in bulk (one query per
few hundred hashes, answered by the writer's BTree on ``embed_hash``), they go into
the local cache, and only the local delta is embedded.

The seed is opened read-only (nothing is created, not even a missing directory), with
few retries: it only saves work, so one that cannot be read, is of another schema or
holds another model's vectors is a reason (``SeedUnusable``, saying what is wrong) to
index without it.  The seed is another machine's file, so nothing in it is trusted: its
schema is checked column by column, and every vector it returns is checked
(``vector_problems``: finite, not all zeros, of the index's dimension) before the
local cache may keep it; one that fails is refused and counted (``SeedRows.refused``),
and its chunk is embedded here.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from codechunkd.config.settings import Settings
from codechunkd.embedding.base import vector_problems
from codechunkd.errors import StoreError
from codechunkd.storage import schema as S
from codechunkd.storage._errors import one_line
from codechunkd.storage.objectstore import ObjectStore, failure_reason, is_local
from codechunkd.storage.rows import in_list, quote

LOOKUP_HASHES = 500
"""Hashes per lookup query: a filter of ~35 kB, well inside what LanceDB parses quickly."""

SEED_RETRIES = 2
"""Retries of a failed request to an object-store seed (an index's own default is 10:
a seed that does not answer soon is skipped rather than waited for)."""
SEED_RETRY_TIMEOUT_S = 15

_COLUMNS = ("embed_hash", "vector", "embedding_model", "summary_of", "summary_source", "summary")


class SeedUnusable(StoreError):
    """The seed cannot serve this index (unreachable, not an index, older schema, other model)."""


@dataclass(frozen=True, slots=True)
class SeedRows:
    """What a lookup found: vectors by ``embed_hash``, LLM summaries by content hash."""

    vectors: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)
    summaries: dict[str, str] = field(default_factory=dict)
    refused: Counter[str] = field(default_factory=Counter)
    """Vectors found but not usable, by why (``not finite``, ``zero length``, ``null``)."""


class Seed:
    """The ``chunks`` table of another index, read-only."""

    def __init__(self, uri: str, table: Any, model_id: str, dimension: int) -> None:
        self.uri = uri
        self._table = table
        self.model_id = model_id
        self.dimension = dimension

    @classmethod
    def from_settings(cls, settings: Settings) -> Seed:
        """The seed ``index.seed`` names (an ``s3://`` one reached with ``object_store``)."""
        uri = settings.index.seed
        if is_local(uri):
            return cls.open(str(Path(uri.removeprefix("file://")).expanduser()))
        store = dataclasses.replace(
            ObjectStore.from_settings(settings.object_store),
            retries=min(settings.object_store.retries, SEED_RETRIES),
            retry_timeout_s=min(settings.object_store.retry_timeout_s, SEED_RETRY_TIMEOUT_S),
        )
        return cls.open(uri.rstrip("/"), store.storage_options())

    @classmethod
    def open(cls, uri: str, options: Mapping[str, str] | None = None) -> Seed:
        """Open the seed's ``chunks`` table, or raise ``SeedUnusable`` saying why not."""
        if is_local(uri) and not (Path(uri) / f"{S.CHUNKS}.lance").is_dir():
            raise SeedUnusable(f"no index at {uri}")
        from codechunkd.storage._lancedb import import_lancedb

        lancedb = import_lancedb()
        try:
            db = lancedb.connect(
                uri,
                read_consistency_interval=timedelta(minutes=1),
                storage_options=dict(options or {}),
            )
            table = db.open_table(S.CHUNKS)
            schema = table.schema
        except Exception as exc:  # noqa: BLE001 - LanceDB raises several types
            text = one_line(exc)
            reason = (None if is_local(uri) else failure_reason(text)) or text
            raise SeedUnusable(f"cannot read the seed {uri}: {reason}") from None
        problem = schema_problem(schema)
        if problem:
            raise SeedUnusable(f"the seed {uri} {problem}")
        model = (schema.metadata or {}).get(S.META_MODEL, b"").decode("utf-8", "replace")
        return cls(uri, table, model, int(schema.field("vector").type.list_size))

    def check_model(self, model_id: str, dimension: int) -> None:
        """Refuse a seed whose vectors are another model's (they would mean nothing here)."""
        if (self.model_id, self.dimension) != (model_id, dimension):
            theirs = self.model_id or "a model it does not name"
            raise SeedUnusable(
                f"the seed {self.uri} holds vectors of {theirs} ({self.dimension} dims), "
                f"this index uses {model_id} ({dimension} dims)"
            )

    def lookup(
        self, model_id: str, hashes: Iterable[str], *, summary_source: str | None = None
    ) -> SeedRows:
        """Vectors of ``model_id`` for the ``embed_hash``es the seed holds, and (when
        ``summary_source`` is given) those rows' summaries of that source, by the content
        hash they summarize (``summary_of``); one query per ``LOOKUP_HASHES`` hashes."""
        wanted = sorted(set(hashes))
        out = SeedRows()
        for i in range(0, len(wanted), LOOKUP_HASHES):
            part = wanted[i : i + LOOKUP_HASHES]
            where = f"embedding_model = {quote(model_id)} AND {in_list('embed_hash', part)}"
            try:
                rows = self._table.search().where(where).select(list(_COLUMNS)).limit(None)
                found = rows.to_arrow()
                self._collect(found, out, summary_source)
            except Exception as exc:  # noqa: BLE001 - LanceDB raises several types
                text = one_line(exc)
                reason = (None if is_local(self.uri) else failure_reason(text)) or text
                raise SeedUnusable(f"cannot read the seed {self.uri}: {reason}") from None
        return out

    def vectors(self, model_id: str, hashes: Iterable[str]) -> dict[str, npt.NDArray[np.float32]]:
        """Vectors of ``model_id`` by ``embed_hash``, for the hashes the seed holds."""
        return self.lookup(model_id, hashes).vectors

    def _collect(self, found: Any, out: SeedRows, summary_source: str | None) -> None:
        """The usable vectors of ``found`` into ``out`` (the others counted as refused)."""
        if found.num_rows == 0:
            return
        column = found.column("vector").combine_chunks()
        dim = column.type.list_size
        # the child values of every slot (a null row's included, then ignored), nulls as NaN
        values = column.values.slice(column.offset * dim, len(column) * dim)
        with np.errstate(over="ignore"):
            flat = values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        matrix = flat.reshape(found.num_rows, dim)
        problems = vector_problems(matrix, self.dimension)
        present = column.is_valid().to_numpy(zero_copy_only=False)
        keys = found.column("embed_hash").to_pylist()
        for j, key in enumerate(keys):
            why = "null" if not present[j] else problems.get(j)
            if why is not None:
                out.refused[why] += 1
            elif isinstance(key, str) and key not in out.vectors:
                out.vectors[key] = matrix[j].copy()
        if summary_source is None:
            return
        cols = ("summary_of", "summary_source", "summary")
        for content, source, summary in zip(
            *(found.column(c).to_pylist() for c in cols), strict=True
        ):
            if source == summary_source and summary and content:
                out.summaries.setdefault(content, summary)


def schema_problem(schema: Any) -> str | None:
    """What makes a seed's ``chunks`` schema unreadable here (finishing "the seed X ..."),
    or None: its version is this codechunkd's, and the columns a lookup reads are there
    with the types it reads."""
    meta = schema.metadata or {}
    raw = meta.get(S.META_VERSION)
    if raw is None:
        return f"has no schema version, this codechunkd reads version {S.SCHEMA_VERSION}"
    text = raw.decode("utf-8", "replace").strip()
    if not text.isdigit():
        return (
            f"has the schema version {text!r}, which is not a number "
            f"(this codechunkd reads version {S.SCHEMA_VERSION})"
        )
    if int(text) != S.SCHEMA_VERSION:
        return f"has schema version {int(text)}, this codechunkd reads version {S.SCHEMA_VERSION}"
    missing = [c for c in _COLUMNS if c not in schema.names]
    if missing:
        return (
            f"has schema version {S.SCHEMA_VERSION} but lacks its column"
            f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
        )
    vector = schema.field("vector").type
    if not (pa.types.is_fixed_size_list(vector) and pa.types.is_floating(vector.value_type)):
        return f"has a vector column of type {vector}, not a fixed-size list of floats"
    for name in ("embed_hash", "embedding_model"):
        kind = schema.field(name).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            return f"has an {name} column of type {kind}, not strings"
    return None
