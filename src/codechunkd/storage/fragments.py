"""Ray's writes: a batch's rows as data files, written anywhere, committed by the writer.

Owns ``FragmentBatch``, ``write_fragments`` (any process that can open the index: a Ray
worker writes the rows where it makes them), ``commit_fragments`` (the writer adds the
data files to ``chunks`` in one commit, then the ``files`` rows) and
``remove_unreferenced_files`` (the data files of a killed build).  It must not replace
rows (``storage/writes.py``) nor fold or index (``storage/upkeep.py``); the
``crashpoint`` names here are the boundaries tests/pipeline/test_crash.py kills at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from codechunkd.storage import schema as S
from codechunkd.storage._errors import translate, translating
from codechunkd.storage.crashpoints import crashpoint
from codechunkd.storage.references import reference_rows, replace_references
from codechunkd.storage.rows import IndexedFile, chunk_rows, manifest_rows, row_id
from codechunkd.storage.tables import Tables

if TYPE_CHECKING:  # at run time only the writer needs them: readers skip pygit2 and tree-sitter
    from codechunkd.git.changes import Head, Source


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


class Fragments(Tables):
    """The Ray fragment writes and commits of ``IndexStore``."""

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
        rows = chunk_rows(source, head, files, model_id, now, tbl.schema)
        frags = write_fragments(rows, tbl.to_lance(), schema=rows.schema) if rows.num_rows else []
        crashpoint("write_fragments.after")
        return FragmentBatch(
            fragments=tuple(frags),
            files=manifest_rows(source, files, now),
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
