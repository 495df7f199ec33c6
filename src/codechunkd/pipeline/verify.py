"""``codechunkd verify``: compare the index with a fresh chunking of the source.

The expected rows are computed from scratch (every file of HEAD plus the
working tree, chunked now, no embedding) and compared with the stored rows by
(path, span, content hash), and the ``references`` rows those chunks make with the
stored ones (path, chunk, kind, names, line).  Any difference is reported; nothing is
written.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace

from codechunkd.chunking.tokens import counter_for
from codechunkd.config.settings import Settings
from codechunkd.git.changes import GitSource, Matcher
from codechunkd.pipeline.prepare import prepare_file
from codechunkd.storage.coverage import coverage
from codechunkd.storage.references import reference_rows
from codechunkd.storage.rows import row_id
from codechunkd.storage.store import IndexStore

Key = tuple[str, int, int, str, bool]
"""(path, start_byte, end_byte, content_hash, synthetic)"""
RefKey = tuple[str, str, str, str, str, str, int]
"""A ``references`` row: (path, chunk_id, kind, name, qualifier, module, line)"""
_REF_COLUMNS = ("path", "chunk_id", "kind", "name", "qualifier", "module", "line")


@dataclass(slots=True)
class VerifyReport:
    repo: str
    files: int = 0
    rows: int = 0
    missing: list[Key] = field(default_factory=list)
    """Rows a fresh chunking makes that the index lacks."""
    extra: list[Key] = field(default_factory=list)
    """Rows in the index that a fresh chunking does not make (deleted or stale files)."""
    stale_files: list[str] = field(default_factory=list)
    """Paths whose indexed blob differs from the source's."""
    duplicate_ids: int = 0
    unusable_vectors: int = 0
    """Rows whose vector is no embedding (NaN, all zeros): vector search never finds them."""
    vectorless: int = 0
    """Rows written text first whose vector is not filled in yet (``storage/coverage.py``):
    the index is not complete until the fill has run (the next sync does it)."""
    references_missing: list[RefKey] = field(default_factory=list)
    """``references`` rows the fresh chunks make that the index lacks."""
    references_extra: list[RefKey] = field(default_factory=list)
    """``references`` rows in the index that the fresh chunks do not make."""

    @property
    def ok(self) -> bool:
        return not (
            self.missing
            or self.extra
            or self.stale_files
            or self.duplicate_ids
            or self.unusable_vectors
            or self.vectorless
            or self.references_missing
            or self.references_extra
        )

    def as_dict(self) -> dict[str, object]:
        def show(keys: list[Key]) -> list[dict[str, object]]:
            return [
                {"path": p, "start_byte": s, "end_byte": e, "content_hash": h, "synthetic": syn}
                for p, s, e, h, syn in keys[:50]
            ]

        return {
            "repo": self.repo,
            "ok": self.ok,
            "files": self.files,
            "rows": self.rows,
            "missing": len(self.missing),
            "extra": len(self.extra),
            "stale_files": self.stale_files[:50],
            "duplicate_ids": self.duplicate_ids,
            "unusable_vectors": self.unusable_vectors,
            "vectorless": self.vectorless,
            "references_missing": len(self.references_missing),
            "references_extra": len(self.references_extra),
            "references_missing_rows": [
                dict(zip(_REF_COLUMNS, k, strict=True)) for k in self.references_missing[:50]
            ],
            "references_extra_rows": [
                dict(zip(_REF_COLUMNS, k, strict=True)) for k in self.references_extra[:50]
            ],
            "missing_rows": show(self.missing),
            "extra_rows": show(self.extra),
        }


def expected_rows(
    settings: Settings, git: GitSource
) -> tuple[dict[str, str], set[Key], set[RefKey]]:
    """(path → blob, row keys, ``references`` row keys) of a from-scratch index of the
    source as it is now.

    Each file goes through ``prepare_file``, the step ``sync`` uses: a file
    that cannot be read is expected with the blob ``UNREADABLE`` and no rows; its
    ``references`` rows are made as the writer makes them (``reference_rows``).
    """
    changes = git.change_set(since=None, since_dirty={}, full=True)
    matcher = Matcher(settings.files.include, settings.files.exclude)
    blobs: dict[str, str] = {}
    keys: set[Key] = set()
    files: list[SimpleNamespace] = []
    count = counter_for(settings.embedding.model)
    for v in changes.versions:
        if v.blob is None or not matcher(v.path):
            continue
        done = prepare_file(git, v, settings, count)
        assert done.version.blob is not None
        blobs[v.path] = done.version.blob
        for c in done.chunks:
            keys.add((c.path, c.start_byte, c.end_byte, c.content_hash, c.synthetic))
        chunks = [SimpleNamespace(chunk=c) for c in done.chunks]
        files.append(SimpleNamespace(path=v.path, blob=done.version.blob, chunks=chunks))
    head = SimpleNamespace(branch=None, commit=None)  # not compared
    refs = reference_rows(git.source, head, files, datetime.now(UTC), row_id)  # type: ignore[arg-type]
    columns = [refs.column(c).to_pylist() for c in _REF_COLUMNS]
    return blobs, keys, set(zip(*columns, strict=True))


def verify(settings: Settings, store: IndexStore, git: GitSource) -> VerifyReport:
    blobs, want, want_refs = expected_rows(settings, git)
    rows = store.chunk_keys(git.source.id)
    have = [
        (r["path"], r["start_byte"], r["end_byte"], r["content_hash"], bool(r["synthetic"]))
        for r in rows
    ]
    report = VerifyReport(repo=git.source.repo, files=len(blobs), rows=len(rows))
    have_set = set(have)
    report.missing = sorted(want - have_set)
    report.extra = sorted(have_set - want)
    report.duplicate_ids = sum(n - 1 for n in Counter(r["id"] for r in rows).values() if n > 1)
    report.unusable_vectors = store.unusable_vectors(git.source.id)
    cov = coverage(store, git.source.id)
    report.vectorless = cov.chunks - cov.vectors
    have_refs = {tuple(r[c] for c in _REF_COLUMNS) for r in store.reference_keys(git.source.id)}
    report.references_missing = sorted(want_refs - have_refs)
    report.references_extra = sorted(have_refs - want_refs)
    manifest = store.manifest(git.source.id)
    report.stale_files = sorted(
        p
        for p in set(blobs) | set(manifest)
        if blobs.get(p) != getattr(manifest.get(p), "blob", None)
    )
    return report
