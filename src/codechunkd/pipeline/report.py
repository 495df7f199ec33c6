"""What one sync did: ``SyncReport``, the counts ``Syncer.sync`` returns and logs.

It owns the report's fields and their dictionary form (``codechunkd index``'s output, the
``sync_done`` log line); it computes nothing and imports nothing of codechunkd: the steps
that count (``pipeline/plan.py``, ``pipeline/batches.py``, ``pipeline/vectors.py``, the
fill's hand-off in ``pipeline/sync.py``) add to it as they go.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(slots=True)
class SyncReport:
    """What one sync did (counts are of files unless named otherwise)."""

    repo: str = ""
    branch: str = ""
    commit: str | None = None
    full: bool = False
    added: int = 0
    changed: int = 0
    deleted: int = 0
    renamed: int = 0
    unchanged: int = 0
    embedded: int = 0
    """Chunks whose vectors were computed."""
    reused: int = 0
    """Chunks whose vectors came from the cache."""
    seeded: int = 0
    """Chunks whose vectors came from the seed (``index.seed``), through the cache."""
    seed_skipped: str | None = None
    """Why the seed was not used (unreadable, older schema, other model); None: it was, or
    none is set."""
    seed_refused: int = 0
    """Vectors the seed offered that were refused (not finite, all zeros, null): their
    chunks were embedded here instead."""
    chunks: int = 0
    """Chunks written."""
    vectorless: int = 0
    """Chunks written without their vector (text first: the fill sets it after)."""
    skipped: Counter[str] = field(default_factory=Counter)
    replaced_utf8: int = 0
    """Files that were not valid UTF-8 and were decoded with replacement characters."""
    truncated: int = 0
    """Chunks longer than the model's window (only their head was embedded)."""
    fill_paused: bool = False
    """The vector fill stopped early for other work; the next sync goes on with it."""
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "repo": self.repo,
            "branch": self.branch,
            "commit": self.commit,
            "full": self.full,
            "added": self.added,
            "changed": self.changed,
            "deleted": self.deleted,
            "renamed": self.renamed,
            "unchanged": self.unchanged,
            "embedded": self.embedded,
            "reused": self.reused,
            "seeded": self.seeded,
            "seed_skipped": self.seed_skipped,
            "seed_refused": self.seed_refused,
            "chunks": self.chunks,
            "vectorless": self.vectorless,
            "skipped": dict(self.skipped),
            "replaced_utf8": self.replaced_utf8,
            "truncated": self.truncated,
            "fill_paused": self.fill_paused,
            "seconds": round(self.seconds, 3),
            "chunks_per_second": round(self.chunks / self.seconds, 1) if self.seconds else 0.0,
        }
