"""Upkeep of ``chunks``: its full-text, vector and ``embed_hash`` indexes, the BTrees of
``references``, and folds.

Owns building the indexes (``ensure_fts`` with :data:`FTS_CONFIG`, ``build_vector_index``,
``ensure_embed_hash_index``, ``ensure_reference_indexes``), keeping the full-text index
current after each write (``index_text``: tiered merging of its deltas), what they do not
cover yet (``unindexed``, ``unfolded``), and ``fold`` (compaction, index deltas, old
versions dropped).  Writer only, between writes (LanceDB's ``optimize`` fails beside a
concurrent write).  It must not add, replace or delete rows (``storage/writes.py``,
``storage/fragments.py``); the ``crashpoint`` names here are the boundaries
tests/pipeline/test_crash.py kills at.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from codechunkd.storage import schema as S
from codechunkd.storage._errors import translate, translating
from codechunkd.storage.crashpoints import crashpoint
from codechunkd.storage.tables import Tables

FTS_MERGE_FACTOR = 4
"""A full-text delta is merged into an update at most this many times the update's size."""
FTS_MERGE_FLOOR = 4096
"""A full-text delta under this many rows is always merged into an update (a cheap rewrite
that keeps small saves from piling up one-row deltas)."""

REFERENCE_INDEXES = ("name", "path")
"""The columns of ``references`` with a BTree: a question reads the uses of a few names and
what gives variables their class in a few files (storage/refquery.py), not the whole table
(on the standard library's 737k rows, 77 -> 16 ms and 51 -> 4 ms a read)."""

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


class Upkeep(Tables):
    """The index upkeep of ``IndexStore``."""

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

    @translating("indexing references")
    def ensure_reference_indexes(self) -> bool:
        """A BTree on each of :data:`REFERENCE_INDEXES` of ``references``, made once the
        table exists (or once on an older index, or after a repair dropped one); folds keep
        them current.  Returns whether it made one now."""
        tbl = self._table(S.REFERENCES)
        if tbl is None:
            return False
        have = {tuple(ix.columns) for ix in tbl.list_indices()}
        missing = [c for c in REFERENCE_INDEXES if (c,) not in have]
        if missing:
            from lancedb.index import BTree

            for column in missing:
                tbl.create_index(column, config=BTree(), replace=True)
        return bool(missing)

    @translating("building the vector index")
    def build_vector_index(self) -> None:
        """An IVF-PQ cosine index on ``vector`` (slow to build: never in the write path)."""
        from lancedb.index import IvfPq

        tbl = self._open(S.CHUNKS)
        crashpoint("vector_index.before")
        tbl.create_index("vector", config=IvfPq(distance_type="cosine"), replace=True)
        crashpoint("vector_index.after")

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
            if (refs_tbl := self._table(S.REFERENCES)) is not None:  # compacted as chunks
                refs = refs_tbl.to_lance()
                refs.optimize.compact_files(target_rows_per_fragment=fragment_rows, num_threads=1)
                if refs_tbl.list_indices():  # the new rows join the BTrees
                    refs_tbl.to_lance().optimize.optimize_indices(num_indices_to_merge=int(merge))
                refs.cleanup_old_versions(older_than=keep)
            for name in (S.FILES, S.REPOS):  # one row per file or repository: small
                if (small := self._table(name)) is not None:
                    small.optimize(cleanup_older_than=keep)
            crashpoint("fold.after")
        except Exception as exc:
            raise translate(exc, f"compacting the index {self.uri}") from exc
