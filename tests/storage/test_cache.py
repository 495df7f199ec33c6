"""``cache.sqlite`` has one schema, whichever of its two caches opens it first."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import scaled

from codechunkd.storage.cache import EmbeddingCache, SummaryCache


def _tables(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        db.close()
    return {name for (name,) in rows}


@pytest.mark.parametrize("first", [EmbeddingCache, SummaryCache])
def test_either_cache_creates_the_whole_file(first: type, tmp_path: Path) -> None:
    """Opened first on a new file, either cache creates every table of ``cache.sqlite``, and
    the other then reads and writes its own rows in it."""
    path = tmp_path / "cache.sqlite"
    opened = first(path, max_entries=10) if first is EmbeddingCache else first(path)
    opened.close()
    assert _tables(path) == {"embeddings", "summaries", "summary_usage"}
    summaries = SummaryCache(path)
    summaries.put("m", "v1", "h1", "reads a file", 12)
    summaries.add_usage("2025-01-01", chunks=1, tokens=12, requests=1)
    assert summaries.get_many("m", "v1", ["h1"]) == {"h1": "reads a file"}
    assert summaries.usage("2025-01-01").tokens == 12
    summaries.close()
    embeddings = EmbeddingCache(path, max_entries=10)
    assert embeddings.stats().entries == 0
    embeddings.close()


def test_unusable_vectors_never_go_in_nor_come_out(tmp_path: Path) -> None:
    """`put_many` refuses NaN, infinite and all-zero vectors (and says how many); one already
    in the file (an older codechunkd kept it from a poisoned seed) is not returned by
    `get_many` but deleted, so its chunk is embedded again."""
    import numpy as np

    path = tmp_path / "cache.sqlite"
    cache = EmbeddingCache(path, max_entries=100)
    try:
        good = np.full(4, 0.5, dtype=np.float32)
        nan = np.array([np.nan, 0, 0, 1], dtype=np.float32)
        inf = np.array([np.inf, 0, 0, 1], dtype=np.float32)
        zero = np.zeros(4, dtype=np.float32)
        refused = cache.put_many("m", {"good": good, "nan": nan, "inf": inf, "zero": zero})
        assert refused == 3
        assert cache.stats().entries == 1
        db = sqlite3.connect(path)
        with db:  # planted behind the cache's back, as an older version wrote them
            db.executemany(
                "INSERT INTO embeddings (model, key, vector, last_used) VALUES ('m', ?, ?, 0)",
                [("old-nan", nan.tobytes()), ("old-zero", zero.tobytes())],
            )
        db.close()
        found = cache.get_many("m", ["good", "old-nan", "old-zero"], 4)
        assert list(found) == ["good"]
        np.testing.assert_array_equal(found["good"], good)
        assert cache.dropped == 2
        assert cache.stats().entries == 1  # deleted, not just skipped
    finally:
        cache.close()


def test_stats_answer_while_a_lookup_holds_the_cache(tmp_path: Path) -> None:
    """``status`` counts the cache's entries while the writer is in the middle of a lookup
    (a fill taking up 130k rows asks for all their vectors, for seconds): the lookup is
    held inside its SQLite query, on purpose, until ``stats`` has answered."""
    cache = EmbeddingCache(tmp_path / "cache.sqlite", max_entries=10_000)
    vecs = {f"h{i}": np.full(4, i + 1, dtype=np.float32) for i in range(1_000)}
    cache.put_many("m", vecs)  # type: ignore[arg-type]
    inside, release = threading.Event(), threading.Event()

    def hold() -> int:  # SQLite's progress handler: runs inside the lookup's query
        if not inside.is_set():  # the first time only; the lookup then runs freely
            inside.set()
            release.wait(scaled(30))
        return 0

    cache._db.set_progress_handler(hold, 1000)
    found: dict[str, object] = {}
    lookup = threading.Thread(target=lambda: found.update(cache.get_many("m", vecs, 4)))
    lookup.start()
    assert inside.wait(scaled(30))
    answered: list[object] = []
    counter = threading.Thread(target=lambda: answered.append(cache.stats()))
    counter.start()
    counter.join(scaled(10))
    stuck = counter.is_alive()
    release.set()
    lookup.join(scaled(30))
    counter.join(scaled(10))
    assert not stuck, "stats waited for the lookup"
    assert answered[0].entries == 1_000  # type: ignore[attr-defined]
    assert len(found) == 1_000
    cache.close()
