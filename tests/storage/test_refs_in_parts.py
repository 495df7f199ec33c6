"""A question about names reads the reference graph in parts: every definition, import
and base, and only the uses it is about (storage/refquery.py, storage/refscan.py).

The answers must be the whole graph's.  The index is real code nobody here wrote (packages
of the Python standard library), chunked by the product's chunker and written by
``IndexStore.write_batch`` into a real LanceDB directory, half of it under the BTrees the
writer keeps on ``references`` and half not yet; the vectors are random, as no question
about references reads them.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import sysconfig
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

from codechunkd.storage.reader import open_index
from codechunkd.storage.refquery import ReferenceQueries
from codechunkd.storage.rows import IndexedFile
from codechunkd.storage.store import IndexStore

BENCH = Path(__file__).parents[2] / "bench"
DIM = 8


def _bench() -> ModuleType:
    """``bench/refs_query.py``, which writes such an index (its ``indexed_file``)."""
    spec = importlib.util.spec_from_file_location("bench_refs_query", BENCH / "refs_query.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path  # as the bench left it: bench/mcp.py must not shadow the SDK
    return module


REFS_BENCH = _bench()
PACKAGES = ("json", "email", "http", "logging", "concurrent", "xmlrpc", "wsgiref", "asyncio")


def _file(rel: str, data: bytes, rng: np.random.Generator) -> IndexedFile:
    return REFS_BENCH.indexed_file(rel, data, rng, DIM)  # type: ignore[no-any-return]


def _write(store: IndexStore, files: list[IndexedFile]) -> None:
    source = SimpleNamespace(id="stdlib", repo="/stdlib")
    head = SimpleNamespace(branch="main", commit=None)
    store.write_batch(source, head, files, [], model_id="test-random", new=True)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def stdlib_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lib = Path(sysconfig.get_paths()["stdlib"])
    index = tmp_path_factory.mktemp("refs") / "index"
    store = IndexStore(str(index))
    store.ensure_writable("test-random", DIM)
    rng = np.random.default_rng(29)
    files = [
        _file(p.relative_to(lib).as_posix(), p.read_bytes(), rng)
        for name in PACKAGES
        for p in sorted((lib / name).rglob("*.py"))
    ]
    half = len(files) // 2
    _write(store, files[:half])
    assert store.ensure_reference_indexes()  # as the writer's upkeep makes them
    _write(store, files[half:])  # rows the BTrees do not cover yet: read by a scan
    return index


def _answers(refs: ReferenceQueries, name: str) -> tuple[object, ...]:
    return (
        refs.definitions(name),
        sorted(map(repr, refs.references(name))),
        sorted(map(repr, refs.references(name, kinds=["call"]))),
        sorted(map(repr, refs.callers(name))),
        sorted(map(repr, refs.callees(name))),
    )


def test_questions_in_parts_answer_as_the_whole_graph(stdlib_index: Path) -> None:
    """For names drawn from the index's definitions (bare and qualified: ``Message``,
    ``Message.get_payload``), each question answered from the skeleton and the name's
    uses, by a reader that keeps the skeleton and by a fresh one, equals the answer of
    the whole graph; so do the callers a search's hits list."""
    index = open_index(str(stdlib_index))
    whole = ReferenceQueries(index.store)
    graph = whole.graph()
    assert graph.rows > 20_000  # the packages' uses, not a toy
    qualified = sorted({graph.definition(i).symbol for v in graph.defs_by_name.values() for i in v})
    pick = random.Random(31)
    names = pick.sample(sorted(graph.defs_by_name), 40) + pick.sample(qualified, 40)
    names += ["Message", "get_payload", "Handler.handle", "loads", "HTTPConnection.request"]
    # a variable's class read from its binding in another row (``p = FeedParser(...)``,
    # then ``p.feed(...)``): wrong when the question reads no binds of its uses' files
    names += ["FeedParser.feed", "Lock.acquire", "Handler.setFormatter", "Generator.flatten"]
    kept = ReferenceQueries(index.store)
    differing = []
    used = 0
    for name in names:
        expected = _answers(whole, name)
        used += bool(expected[1])
        if _answers(kept, name) != expected:
            differing.append(name)
        fresh = ReferenceQueries(index.store)  # no skeleton yet: ``codechunkd defs`` once
        if fresh.definitions(name) != expected[0]:
            differing.append(f"definitions of {name}")
    assert differing == []
    assert used > 40  # most names asked have uses to get right
    hits = [(n, [d.chunk_id for d in graph.definitions(n)]) for n in names[:20]]
    assert kept.callers_of_hits(hits) == whole.callers_of_hits(hits)
    assert kept._graph is None  # questions never built the whole graph


def test_a_question_reads_one_version_while_a_writer_commits(tmp_path: Path) -> None:
    """A snapshot of the references table keeps reading the version it was taken at:
    the parts of one question never mix a writer's commit in, and the next question
    sees it."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    store = IndexStore(str(tmp_path / "index"))
    store.ensure_writable("test-random", DIM)
    rng = np.random.default_rng(3)
    _write(store, [_file("json/decoder.py", (lib / "json/decoder.py").read_bytes(), rng)])
    refs = ReferenceQueries(open_index(str(tmp_path / "index")).store)
    snap = refs.store.references_snapshot()
    assert snap is not None
    before = snap.scan(["name"], "name = 'JSONDecoder'").num_rows
    assert refs.definitions("JSONDecoder")
    assert not refs.references("JSONDecoder")  # nothing in decoder.py uses it
    _write(store, [_file("json/__init__.py", (lib / "json/__init__.py").read_bytes(), rng)])
    assert snap.scan(["name"], "name = 'JSONDecoder'").num_rows == before
    assert refs.store.references_snapshot().version > snap.version  # type: ignore[union-attr]
    users = {u.path for u in refs.references("JSONDecoder")}
    assert users == {"json/__init__.py"}


def test_the_map_is_ranked_once_per_version(tmp_path: Path) -> None:
    """The repository map's ranking (every use resolved, a PageRank) is computed once per
    table version and kept with the graph: a second map in another folder reuses it; a
    writer's commit makes a new graph, and the map shows the new file."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    store = IndexStore(str(tmp_path / "index"))
    store.ensure_writable("test-random", DIM)
    rng = np.random.default_rng(5)
    _write(
        store,
        [
            _file(f"json/{n}", (lib / "json" / n).read_bytes(), rng)
            for n in ("decoder.py", "scanner.py")
        ],
    )
    refs = ReferenceQueries(open_index(str(tmp_path / "index")).store)

    def paths(folder: str = "") -> list[str]:
        entries = refs.repo_map(
            count_tokens=lambda ts: [len(t) // 4 for t in ts], budget=10_000, path=folder
        )
        return [e.path for e in entries]

    assert sorted(paths()) == ["json/decoder.py", "json/scanner.py"]
    first = refs.graph()
    assert [key for key, _ in first.derived] == ["repo_map"]
    assert paths("json") == paths()
    assert refs.graph() is first and len(first.derived) == 1  # ranked once
    _write(store, [_file("json/__init__.py", (lib / "json/__init__.py").read_bytes(), rng)])
    assert "json/__init__.py" in paths()
    assert refs.graph() is not first
