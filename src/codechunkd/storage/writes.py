"""The single writer's writes: a batch's rows, a source's state, a source's removal.

Owns ``write_batch`` (a batch of files replaced in one commit per table, in the order that
makes every crash repairable: ``chunks``, then ``files``, with ``references`` in between
or before), ``update_chunks``, ``put_state`` and its ``state.json`` mirror, and
``remove_source``.  Writer only (one writer per index directory).  It must not fold,
compact or build indexes (``storage/upkeep.py``), nor write Ray's data files
(``storage/fragments.py``); the ``crashpoint`` names here are the boundaries
tests/pipeline/test_crash.py kills at.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from codechunkd.storage import schema as S
from codechunkd.storage._errors import translate, translating
from codechunkd.storage.crashpoints import crashpoint
from codechunkd.storage.reads import Reads
from codechunkd.storage.references import reference_rows, replace_references
from codechunkd.storage.rows import IndexedFile, chunk_rows, in_list, manifest_rows, quote, row_id
from codechunkd.storage.statefile import SourceState, write_state_file
from codechunkd.types import SourceId

if TYPE_CHECKING:  # at run time only the writer needs them: readers skip pygit2 and tree-sitter
    from codechunkd.git.changes import Head, Source


class Writes(Reads):
    """The writes of ``IndexStore`` (it reads the states it mirrors into ``state.json``)."""

    @translating("updating chunks")
    def update_chunks(self, table: pa.Table) -> None:
        """Set the columns of ``table`` on the rows of ``chunks`` with its ids, in one commit
        (writer only; rows whose id is gone are not inserted)."""
        self._open(S.CHUNKS).merge_insert("id").when_matched_update_all().execute(table)

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
        rows = chunk_rows(source, head, files, model_id, now, chunks.schema)
        try:
            crashpoint("write_batch.before")
            if new and not deletes:  # references after chunks: a kill between leaves
                if rows.num_rows:  # chunk rows with no manifest row, found and replaced
                    chunks.add(rows, on_bad_vectors="null")  # null: text first (coverage.py)
                crashpoint("write_batch.chunks_committed")
                self._write_references(source, head, files, now, scope, append=True)
                self._open(S.FILES).add(manifest_rows(source, files, now))
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
            file_rows = manifest_rows(source, files, now)
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

    def write_state_file(self, *, without: SourceId | None = None) -> None:
        """Mirror ``repos`` into ``state.json`` (atomically) for the fast ``status`` path;
        ``without`` one source, whose rows are about to go (``remove_source``)."""
        if self.state_file is None:
            return
        skipped = self.skipped_by_source()
        states = [
            dataclasses.replace(s, skipped=skipped.get(s.source.id, {}))
            for s in self.states()
            if s.source.id != without
        ]
        crashpoint("state_file.before")
        write_state_file(self.state_file, self.uri, states, schema_version=S.SCHEMA_VERSION)
        crashpoint("state_file.after")

    @translating("removing a source")
    def remove_source(self, source: SourceId) -> None:
        """Delete every row of ``source``, what says it is indexed first: ``state.json`` without
        it, its ``repos`` row, its ``files`` manifest; then its references and chunks.  A kill
        part-way leaves a source with no state and no manifest, which the next run indexes
        again; never a state or manifest that says a file is indexed over rows already gone
        (a plain ``index`` trusts ``state.json``, a sync the manifest)."""
        self.write_state_file(without=source)
        where = f"source = {quote(source)}"
        for name in (S.REPOS, S.FILES, S.REFERENCES, S.CHUNKS):
            if (tbl := self._table(name)) is not None:
                crashpoint(f"remove_source.{name}")
                tbl.delete(where)
