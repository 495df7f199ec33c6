"""The full-text side of the index: rows indexed as soon as they are written, code-aware words."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import Indexer, Repo

from codechunkd.config.settings import Settings
from codechunkd.storage.search import Mode, Searcher

EXE = str(Path(sys.executable).parent / "codechunkd")


def _segments(ix: Indexer) -> int:
    """How many pieces (the first index and its deltas) the full-text index has."""
    return int(ix.store.chunks_table().index_stats("fts_text_idx").num_indices)


def test_codechunkd_index_of_a_second_repository_leaves_no_row_outside_the_full_text_index(
    repo: Repo,
    tmp_path: Path,
    settings: Settings,
    index_dir: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """After ``codechunkd index`` adds a second repository to an index whose full-text index
    exists, every row is in the full-text index when the command exits, and text search
    finds the new repository's code."""
    repo.write("geo.py", "def haversine_distance(a, b):\n    return great_circle(a, b)\n")
    repo.commit("init")
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    assert ix.store.has_fts()
    ix.close()
    other = Repo(tmp_path / "other")
    for i in range(3):
        other.write(f"m{i}.py", f"def reticulate_splines_{i}(n):\n    return n * {i}\n")
    other.commit("init")
    env = dict(os.environ, CODECHUNKD_EMBEDDING_ONNX_DIR=embedder._settings.onnx_dir)
    done = subprocess.run(
        [EXE, "index", str(other.path), "--index-dir", str(index_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    ix = Indexer(settings, embedder)
    try:
        assert ix.store.unindexed() == (0, 0)
        hits = Searcher(ix.store).search("reticulate_splines_2", None, k=3, mode=Mode.TEXT)
        assert hits and hits[0].symbol == "reticulate_splines_2"
    finally:
        ix.close()


def test_each_save_is_text_indexed_at_once_without_piling_up_deltas(
    repo: Repo,
    settings: Settings,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """A run of small syncs (a developer saving files) leaves no row outside the full-text
    index after each one, every saved function is found by text, and the small deltas are
    merged together rather than kept one per save (each costs every query a little)."""
    repo.write("base.py", "def first_function(x):\n    return x\n")
    repo.commit("init")
    ix = Indexer(settings, embedder)
    try:
        ix.sync(repo.path)
        searcher = Searcher(ix.store)
        for i in range(6):
            repo.write(f"saved_{i}.py", f"def frobnicate_widget_{i}(x):\n    return x + {i}\n")
            ix.sync(repo.path)  # the working tree: a dirty file, as the daemon sees a save
            assert ix.store.unindexed() == (0, 0), i
            hits = searcher.search(f"frobnicate_widget_{i}", None, k=3, mode=Mode.TEXT)
            assert hits and hits[0].symbol == f"frobnicate_widget_{i}", i
        assert _segments(ix) <= 2  # the first index and one delta that took every save
    finally:
        ix.close()


def test_code_words_split_run_together_identifiers_and_keep_them_whole() -> None:
    """``code_words`` adds what the tokenizer misses: the words of a camelCase name and the
    whole of a snake_case one; plain words and single-word names add nothing."""
    from codechunkd.storage.fulltext import code_words

    assert code_words("addBusinessDays(d)").split() == ["add", "business", "days"]
    assert code_words("parse_header_links(x)").split() == ["parseheaderlinks"]
    assert code_words("HTTPResponse") == "http response"
    assert code_words("return the value of x") == ""


def test_text_search_meets_identifiers_written_as_words_or_in_another_case(
    repo: Repo,
    settings: Settings,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """Text search finds a TypeScript camelCase function from its words, and a Python
    snake_case function from its camelCase spelling: the index and the query split
    identifiers the same way, in every language."""
    repo.write(
        "dates.ts",
        "export function addBusinessDays(start: Date, count: number): Date {\n"
        "  const out = new Date(start);\n  return out;\n}\n\n"
        "export function formatStamp(d: Date): string {\n  return d.toISOString();\n}\n",
    )
    repo.write(
        "links.py",
        "def parse_header_links(value):\n    return [v.strip() for v in value.split(',')]\n\n\n"
        "def other_helper(x):\n    return x\n",
    )
    repo.commit("init")
    ix = Indexer(settings, embedder)
    try:
        ix.sync(repo.path)
        searcher = Searcher(ix.store)
        for query, symbol in (
            ("add business days", "addBusinessDays"),
            ("parseHeaderLinks", "parse_header_links"),
        ):
            hits = searcher.search(query, None, k=3, mode=Mode.TEXT)
            assert hits and hits[0].symbol == symbol, (query, [h.symbol for h in hits])
    finally:
        ix.close()


def _old_full_text(ix: Indexer) -> None:
    """Turn the index into one an older codechunkd wrote: rows without the code-words line
    (before #17) under a full-text index with LanceDB's default tokenizer."""
    import pyarrow as pa
    from lancedb.index import FTS

    from codechunkd.storage.fulltext import code_words

    old = ix.store.scan_chunks(None, ["id", "fts_text", "content"]).to_pylist()
    texts = [r["fts_text"].removesuffix("\n" + code_words(r["content"])) for r in old]
    ix.store.update_chunks(pa.table({"id": [r["id"] for r in old], "fts_text": texts}))
    ix.store.chunks_table().create_index("fts_text", config=FTS(), replace=True)


def test_an_index_with_the_old_full_text_config_is_rebuilt_to_read_identifiers(
    repo: Repo,
    settings: Settings,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """A full-text index built with the library's default tokenizer (an older codechunkd)
    does not find a word used only inside a camelCase call; the next sync rebuilds it with
    the code tokenizer, which then finds it, and later rows join it tokenized the same way."""
    repo.write(
        "dates.ts",
        "export function shiftDate(start: Date, n: number): Date {\n"
        "  return addDays(start, n + countWeekendDays(start, n));\n}\n\n"
        "export function formatStamp(d: Date): string {\n  return d.toISOString();\n}\n",
    )
    repo.commit("init")
    ix = Indexer(settings, embedder)
    try:
        ix.sync(repo.path)
        searcher = Searcher(ix.store)
        assert ix.store.fts_current()
        _old_full_text(ix)
        assert not ix.store.fts_current()
        assert not searcher.search("weekend", None, k=3, mode=Mode.TEXT)

        ix.sync(repo.path)  # nothing changed: the upkeep alone brings the index up to date

        assert ix.store.fts_current()
        hits = searcher.search("weekend", None, k=3, mode=Mode.TEXT)
        assert [h.symbol for h in hits] == ["shiftDate"]
        repo.write(
            "more.ts",
            "export function nextSlot(t: number): number {\n  return roundToQuarterHour(t);\n}\n",
        )
        ix.sync(repo.path)
        assert ix.store.unindexed() == (0, 0) and ix.store.fts_current()
        hits = searcher.search("quarter hour", None, k=3, mode=Mode.TEXT)
        assert hits and hits[0].symbol == "nextSlot", [h.symbol for h in hits]
    finally:
        ix.close()
