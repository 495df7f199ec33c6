"""The ``references`` table: the definitions each chunk makes and the names it uses.

Written by ``IndexStore`` in the same per-file replacement as ``chunks`` (docs/schema.md):
a file's reference rows are replaced by its new ones in one table commit, right before its
chunk rows (a cold build appends them right after) and before its ``files`` row.  So by
the time an edit is searchable its references are there, and as the manifest is written
last, a process killed between the three commits leaves the file's manifest row old: the
next sync redoes the file, both tables new again.
Until then (and for the instant between two commits) a reader may see new references with
old chunks: a ``chunk_id`` that is not yet (or no longer) a row.

One row per definition (``kind`` ``definition``: ``name`` is the last part of the qualified
name, in lower case where the language ignores case, ``qualifier`` the whole of it; the
definitions of a chunk's functions and classes at its first line, the constants, variables
and fields it binds outside a function at theirs) and
one per :class:`~codechunkd.chunking.references.Ref` of a chunk.  Rows carry the source,
branch, commit and blob of their chunk, so they are exactly as fresh as it, and they are
made from the chunk alone (no other file is read): content-addressed like the chunks, a
file version always gets the same rows.  What the reference graph (storage/refgraph.py)
reads back from them: a ``Definition``, a ``Use``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from codechunkd.storage import schema as S
from codechunkd.storage.refnames import used_name

if TYPE_CHECKING:
    from codechunkd.git.changes import Head, Source

__all__ = [
    "DEFINES",
    "DEFINITION",
    "VALUE",
    "Definition",
    "Use",
    "reference_rows",
    "replace_references",
]

DEFINITION = "definition"
"""``kind`` of a definition row."""
DEFINES = "defines"
"""``kind`` of a chunk's :class:`~codechunkd.chunking.imports.Ref` for a name it binds
outside any function (``MAX = 3``, ``Color.RED``: ``chunking/refs_defines.py``), written
as a definition row whose ``module`` is :data:`VALUE`."""
VALUE = "value"
"""``module`` of a definition row that names a value (``MAX = 3``), not a function, class or
type: a use resolves to it in its own file or through an import, never by name alone (a
local ``t`` elsewhere is not ``copy.py``'s module variable ``t``)."""


@dataclass(frozen=True, slots=True)
class Definition:
    """A definition: a chunk that defines ``symbol``."""

    chunk_id: str
    source: str
    path: str
    language: str
    symbol: str
    """Qualified name (``Session.request``)."""
    line: int


@dataclass(frozen=True, slots=True)
class Use:
    """One use of a name, and the definition it resolved to (if any) and how."""

    chunk_id: str
    """The chunk that uses the name."""
    chunk_symbol: str
    source: str
    path: str
    line: int
    kind: str
    name: str
    qualifier: str
    target: Definition | None
    how: str
    """``exact``, ``imported`` or ``by-name`` (``""`` when unresolved)."""


def reference_rows(
    source: Source,
    head: Head,
    files: Sequence[Any],
    now: datetime,
    row_id: Any,
) -> pa.Table:
    """The ``references`` rows of ``files`` (``IndexedFile``s of storage/rows.py, which
    the writer passes in), ``row_id(source, chunk id)`` naming each chunk's row."""
    cols: dict[str, list[Any]] = {f.name: [] for f in S.REFERENCES_SCHEMA}
    sid = source.id

    def add(rid: str, f: Any, c: Any, kind: str, name: str, qual: str, mod: str, line: int) -> None:
        for k, v in (
            ("id", rid),
            ("source", sid),
            ("branch", head.branch),
            ("commit", head.commit),
            ("blob", f.blob),
            ("path", f.path),
            ("language", c.language),
            ("chunk_id", row_id(sid, c.id)),
            ("chunk_symbol", c.symbol),
            ("kind", kind),
            ("name", name),
            ("qualifier", qual),
            ("module", mod),
            ("line", line),
            ("indexed_at", now),
        ):
            cols[k].append(v)

    for f in files:
        for e in f.chunks:
            c = e.chunk
            if c.kind == "block" and c.part > 1:
                names: tuple[str, ...] = ()  # a later piece of a split definition
            else:
                names = c.names
            base = f"{sid}\0{c.path}\0{c.id}\0"
            for i, qualified in enumerate(names):
                rid = hashlib.sha256(f"{base}d{i}".encode()).hexdigest()[:32]
                name = used_name(qualified, c.language)
                add(rid, f, c, DEFINITION, name, qualified, "", c.start_line)
            defined = set(names)
            for i, r in enumerate(c.refs):
                rid = hashlib.sha256(f"{base}r{i}".encode()).hexdigest()[:32]
                if r.kind != DEFINES:
                    add(rid, f, c, r.kind, r.name, r.qualifier, r.module, r.line)
                elif r.qualifier not in defined:  # ``MAX = 3``: a definition, once a chunk
                    defined.add(r.qualifier)
                    name = used_name(r.qualifier, c.language)
                    add(rid, f, c, DEFINITION, name, r.qualifier, VALUE, r.line)
    return pa.table(
        [pa.array(cols[f.name], type=f.type) for f in S.REFERENCES_SCHEMA],
        schema=S.REFERENCES_SCHEMA,
    )


def replace_references(tbl: Any, rows: pa.Table, scope: str, *, append: bool) -> None:
    """Replace the rows in ``scope`` (a source's paths) with ``rows``, in one commit.

    ``append``: no row of the scope exists (a cold index), so the rows are added.
    """
    if append:
        if rows.num_rows:
            tbl.add(rows)
        return
    if rows.num_rows:
        (
            tbl.merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(scope)
            .execute(rows)
        )
    else:
        tbl.delete(scope)
