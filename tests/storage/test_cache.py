"""``cache.sqlite`` has one schema, whichever of its two caches opens it first."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

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
