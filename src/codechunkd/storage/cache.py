"""Content-addressed caches: embeddings keyed by (embedded-text hash, model id).

Identical text anywhere (any branch, worktree, repository) is embedded once;
switching to a branch and back embeds nothing.  The cache is bounded: entries
least recently used are evicted past ``max_entries``.

Only usable vectors go in and come out (``embedding.base.vector_problems``): a NaN
or all-zero vector offered to ``put_many`` is refused, and one already in the file
(put there by an older codechunkd, from a poisoned seed) is never returned: it is
deleted when found, so the chunk is embedded again instead of failing every write.

SQLite (stdlib) rather than a LanceDB table: the cache is a private key-value
store of the single writer, read by exact key thousands of times per batch and
touched on every hit, which is what SQLite is good at and LanceDB is not
(every LanceDB write is a new table version).

SQLite errors leave as one-line ``StoreError``s (``translating``): a full disk is
a plain one and the failed write is rolled back (the batch is embedded again next
time, nothing half-written stays); a corrupt file is ``IndexDamaged``, and
``codechunkd index --rebuild`` moves it aside (``storage/repair.py``).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from codechunkd.embedding.base import vector_problems
from codechunkd.storage._errors import translating
from codechunkd.storage.crashpoints import crashpoint
from codechunkd.types import ContentHash

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,
    key TEXT NOT NULL,
    vector BLOB NOT NULL,
    last_used REAL NOT NULL,
    PRIMARY KEY (model, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS embeddings_lru ON embeddings (last_used);
CREATE TABLE IF NOT EXISTS summaries (
    content_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    summary TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (content_hash, model, prompt_version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS summary_usage (
    day TEXT NOT NULL PRIMARY KEY,
    chunks INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    requests INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
"""
"""The whole of ``cache.sqlite``: both caches share the file, and whichever opens it first
creates every table (``IF NOT EXISTS``), so there is one schema of it, here."""


@dataclass(frozen=True, slots=True)
class CacheStats:
    hits: int
    misses: int
    entries: int

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


def _rollback(db: sqlite3.Connection) -> None:
    """End a failed write's transaction (SQLite may have ended it already)."""
    with contextlib.suppress(sqlite3.Error):
        db.execute("ROLLBACK")


class EmbeddingCache:
    """Vectors by (model id, embedded-text hash), LRU-bounded, safe across threads."""

    @translating("opening the embedding cache")
    def __init__(self, path: Path, *, max_entries: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.max_entries = max_entries
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        # ``stats`` reads on its own connection: WAL lets it beside the writer's lookups,
        # which hold ``_lock`` for seconds when a fill asks for 130k vectors at once
        self._counter = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._counter_lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.dropped = 0
        """Unusable vectors found in the file (NaN, all zeros) and deleted, so far."""
        self.refused = 0
        """Unusable vectors ``put_many`` was offered and did not keep, so far."""

    def close(self) -> None:
        with self._lock, self._counter_lock:
            self._db.close()
            self._counter.close()

    @translating("reading the embedding cache")
    def get_many(
        self, model: str, keys: Iterable[ContentHash], dimension: int
    ) -> dict[ContentHash, npt.NDArray[np.float32]]:
        wanted = list(dict.fromkeys(keys))
        found: dict[ContentHash, npt.NDArray[np.float32]] = {}
        with self._lock:
            for i in range(0, len(wanted), 500):
                part = wanted[i : i + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT key, vector FROM embeddings WHERE model = ? AND key IN ({marks})",  # noqa: S608
                    [model, *part],
                ).fetchall()
                for key, blob in rows:
                    if len(blob) == 4 * dimension:
                        found[key] = np.frombuffer(blob, dtype=np.float32)
            bad = self._unusable(found, dimension)
            if bad:  # never handed out: deleted, so the chunks are embedded again
                self._db.executemany(
                    "DELETE FROM embeddings WHERE model = ? AND key = ?", [(model, k) for k in bad]
                )
                for k in bad:
                    del found[k]
                self.dropped += len(bad)
            if found:
                now = time.time()
                self._db.executemany(
                    "UPDATE embeddings SET last_used = ? WHERE model = ? AND key = ?",
                    [(now, model, k) for k in found],
                )
            self.hits += len(found)
            self.misses += len(wanted) - len(found)
        return found

    @staticmethod
    def _unusable(
        vectors: Mapping[ContentHash, npt.NDArray[np.float32]], dimension: int
    ) -> list[str]:
        """Keys of the vectors that are NaN, infinite or all zeros (``vector_problems``)."""
        if not vectors:
            return []
        keys = list(vectors)
        matrix = np.stack([vectors[k] for k in keys])
        return [keys[i] for i in vector_problems(matrix, dimension)]

    @translating("writing the embedding cache")
    def put_many(self, model: str, vectors: Mapping[ContentHash, npt.NDArray[np.float32]]) -> int:
        """Keep ``vectors``; one that is not finite or is all zeros is refused (the caller
        checked it already: this is the last guard).  Returns how many were refused."""
        if not vectors:
            return 0
        kept = {k: np.asarray(v, dtype=np.float32).ravel() for k, v in vectors.items()}
        widths = {v.shape[0] for v in kept.values()}
        bad = [k for w in widths for k in self._unusable(_of_width(kept, w), w)]
        for k in bad:
            del kept[k]
        self.refused += len(bad)
        now = time.time()
        rows = [(model, k, v.tobytes(), now) for k, v in kept.items()]
        if not rows:
            return len(bad)
        with self._lock:
            crashpoint("cache_put.before")
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO embeddings (model, key, vector, last_used) "
                    "VALUES (?, ?, ?, ?)",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                _rollback(self._db)  # else the connection stays in the transaction for good
                raise
            crashpoint("cache_put.after")
        return len(bad)

    @translating("evicting from the embedding cache")
    def evict(self) -> int:
        """Drop least recently used entries past ``max_entries``; returns how many."""
        with self._lock:
            (count,) = self._db.execute("SELECT COUNT(*) FROM embeddings").fetchone()
            excess = int(count) - self.max_entries
            if excess <= 0:
                return 0
            self._db.execute(
                "DELETE FROM embeddings WHERE (model, key) IN "
                "(SELECT model, key FROM embeddings ORDER BY last_used LIMIT ?)",
                (excess,),
            )
            return excess

    @translating("reading the embedding cache")
    def stats(self) -> CacheStats:
        """Hits, misses and entries (what ``status`` shows): never waits for a lookup."""
        with self._counter_lock:
            (count,) = self._counter.execute("SELECT COUNT(*) FROM embeddings").fetchone()
        return CacheStats(hits=self.hits, misses=self.misses, entries=int(count))


def _of_width(
    vectors: Mapping[ContentHash, npt.NDArray[np.float32]], width: int
) -> dict[ContentHash, npt.NDArray[np.float32]]:
    return {k: v for k, v in vectors.items() if v.shape[0] == width}


@dataclass(frozen=True, slots=True)
class SummaryUsage:
    """What the LLM cost on one UTC day (all processes sharing the cache file)."""

    chunks: int = 0
    """Summaries received and kept."""
    tokens: int = 0
    """Prompt and answer tokens of every request, kept or not."""
    requests: int = 0
    failures: int = 0


class SummaryCache:
    """LLM summaries by (content hash, model, prompt version), and the daily usage.

    Summaries are small and never evicted: each one cost a request.  The file is
    the embedding cache's (``cache.sqlite``), on its own connection.
    """

    @translating("opening the summary cache")
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @translating("reading the summary cache")
    def get_many(
        self, model: str, prompt_version: str, hashes: Iterable[ContentHash]
    ) -> dict[ContentHash, str]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[ContentHash, str] = {}
        with self._lock:
            for i in range(0, len(wanted), 500):
                part = wanted[i : i + 500]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    "SELECT content_hash, summary FROM summaries "  # noqa: S608 - placeholders only
                    f"WHERE model = ? AND prompt_version = ? AND content_hash IN ({marks})",
                    [model, prompt_version, *part],
                ).fetchall()
                found.update(rows)
        return found

    @translating("writing the summary cache")
    def put(
        self, model: str, prompt_version: str, content_hash: ContentHash, summary: str, tokens: int
    ) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO summaries "
                "(content_hash, model, prompt_version, summary, tokens, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (content_hash, model, prompt_version, summary, tokens, time.time()),
            )

    @translating("reading the summary cache")
    def count(self, model: str, prompt_version: str) -> int:
        with self._lock:
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM summaries WHERE model = ? AND prompt_version = ?",
                (model, prompt_version),
            ).fetchone()
        return int(n)

    @translating("reading the summary cache")
    def usage(self, day: str) -> SummaryUsage:
        with self._lock:
            row = self._db.execute(
                "SELECT chunks, tokens, requests, failures FROM summary_usage WHERE day = ?",
                (day,),
            ).fetchone()
        return SummaryUsage(*row) if row else SummaryUsage()

    @translating("writing the summary cache")
    def add_usage(
        self, day: str, *, chunks: int = 0, tokens: int = 0, requests: int = 0, failures: int = 0
    ) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO summary_usage (day, chunks, tokens, requests, failures) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(day) DO UPDATE SET "
                "chunks = chunks + excluded.chunks, tokens = tokens + excluded.tokens, "
                "requests = requests + excluded.requests, failures = failures + excluded.failures",
                (day, chunks, tokens, requests, failures),
            )
