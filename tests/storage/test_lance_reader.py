"""The Lance reader (``storage/lance_reader.py``): what LanceDB's handle reads, without
importing LanceDB, and every later commit seen without reopening."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
from tests.conftest import Indexer, Repo

from codechunkd.storage.lance_reader import LanceReader
from codechunkd.storage.search import RESULT_COLUMNS
from codechunkd.storage.store import IndexStore

FILES = {
    "geo.py": "def haversine_distance(a, b):\n    return great_circle(a, b)\n",
    "text.py": "def slugify(title):\n    return title.lower().replace(' ', '-')\n",
    "config.py": "class ConfigParser:\n    def parse_file(self, path):\n"
    "        return open(path).read()\n\n    def parse_text(self, text):\n        return text\n",
}


def _ranked(rows: list[dict[str, Any]], score: str) -> list[tuple[float, str]]:
    """(score, id) in score order; ids of equal scores sorted (both libraries break ties
    in no fixed order)."""
    return sorted(((round(r[score], 4), r["id"]) for r in rows), key=lambda t: (-t[0], t[1]))


def test_lance_reader_reads_what_the_lancedb_handle_reads(repo: Repo, indexer: Indexer) -> None:
    """Full text, vectors (with a prefilter), filtered selects, sources and the model are
    the same through Lance as through LanceDB on one real index."""
    for path, text in FILES.items():
        repo.write(path, text)
    repo.commit("init")
    indexer.sync(repo.path)
    old, new = indexer.store, LanceReader(indexer.store.uri)
    assert new.has_chunks() and new.has_fts()
    assert new.index_model() == old.index_model()
    for query in ("parse file path", "slugify title", "great circle distance"):
        for where in (None, "synthetic = false", "path = 'config.py'"):
            a = old.text_search(query, 50, where, RESULT_COLUMNS)
            b = new.text_search(query, 50, where, RESULT_COLUMNS)
            assert _ranked(a, "_score") == _ranked(b, "_score")
            assert {r["id"]: r for r in a} == {r["id"]: r for r in b}
    vector = np.asarray(old.select(None, ["vector"], limit=1)[0]["vector"], np.float32)
    for where in (None, "language = 'python' AND synthetic = false"):
        a = old.vector_search(vector, 50, where, RESULT_COLUMNS)
        b = new.vector_search(vector, 50, where, RESULT_COLUMNS)
        assert a and _ranked(a, "_distance") == _ranked(b, "_distance")
    where = "symbol LIKE 'ConfigParser%'"
    by_id = lambda rows: sorted(rows, key=lambda r: r["id"])  # noqa: E731
    assert by_id(new.select(where, ["id", "symbol"])) == by_id(old.select(where, ["id", "symbol"]))
    assert len(new.select(None, ["id"], limit=2)) == 2
    assert new.states() == old.states()


def test_lance_reader_sees_tables_made_and_commits_written_after_it_opened(
    repo: Repo, indexer: Indexer
) -> None:
    """A reader opened on an index with no table yet finds the table once written, and
    a later commit's rows without being reopened (no stale handle: FACTS.md Trap 7)."""
    reader = LanceReader(indexer.store.uri)
    assert not reader.has_chunks() and reader.select(None, ["id"]) == [] and not reader.states()
    repo.write("geo.py", FILES["geo.py"])
    repo.commit("init")
    indexer.sync(repo.path)
    assert [r["symbol"] for r in reader.text_search("haversine", 5, None, ["symbol"])] == [
        "haversine_distance"
    ]
    repo.write("text.py", FILES["text.py"])
    repo.commit("more")
    indexer.sync(repo.path)
    assert [r["symbol"] for r in reader.text_search("slugify", 5, None, ["symbol"])] == ["slugify"]
    assert {s.commit for s in reader.states()} == {repo.head()}


def test_search_without_a_daemon_imports_no_lancedb(
    repo: Repo,
    index_dir: Path,
    indexer: Indexer,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """``codechunkd search`` with no daemon reads through Lance: LanceDB is never
    imported, and a text search imports no embedding runtime (onnxruntime, tokenizers,
    torch) either; both answer."""
    repo.write("geo.py", FILES["geo.py"])
    repo.commit("init")
    indexer.sync(repo.path)
    code = textwrap.dedent(
        """
        import json, sys
        from codechunkd.cli import main
        try:
            main(sys.argv[1:])
        except SystemExit as exc:
            heavy = ("lancedb", "onnxruntime", "tokenizers", "torch", "lance")
            print(json.dumps([exc.code, sorted(m for m in heavy if m in sys.modules)]))
        """
    )
    env = {"CODECHUNKD_EMBEDDING_ONNX_DIR": embedder._settings.onnx_dir}
    for mode, loaded in (("text", ["lance"]), ("hybrid", ["lance", "onnxruntime", "tokenizers"])):
        argv = ["search", "great circle", "--mode", mode, "--index-dir", str(index_dir)]
        done = subprocess.run(
            [sys.executable, "-c", code, *argv],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
        )
        assert done.returncode == 0, done.stderr
        assert "haversine_distance" in done.stdout
        assert json.loads(done.stdout.strip().splitlines()[-1]) == [0, loaded]


def test_a_missing_index_store_is_not_created_by_the_reader(tmp_path: Path) -> None:
    """Reading a directory that holds no index creates nothing there (``IndexStore``
    makes the directory; the reader only looks)."""
    where = tmp_path / "nothing"
    reader = LanceReader(str(where))
    assert not reader.has_chunks() and reader.index_model() is None
    assert not where.exists()
    IndexStore(str(where))
    assert where.is_dir()
