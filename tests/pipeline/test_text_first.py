"""Text first, vectors second: a large change is searchable by full text before any
embedding, its vectors are filled in after (in the index's order), and a crash at any
point of the fill is finished at the next start with nothing computed lost.

The embedder is a real HTTP embedding server on 127.0.0.1 (hash vectors: no model to
load) that holds its requests on demand, so a test looks at the index exactly while
the fill waits for its first slice, not after some delay.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.conftest import Repo, scaled, wait_for
from tests.stalling_server import DIM, StallingServer, serving, vector

from codechunkd.config import Settings, load_settings
from codechunkd.daemon.status import progress_text
from codechunkd.embedding.embedder import make_embedder
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.progress import WRITING_TEXT
from codechunkd.pipeline.sync import Syncer, SyncProgress
from codechunkd.pipeline.verify import verify
from codechunkd.storage.cache import EmbeddingCache
from codechunkd.storage.coverage import coverage
from codechunkd.storage.crashpoints import AT_ENV
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.search import Mode, Searcher
from codechunkd.storage.seed import Seed
from codechunkd.storage.store import IndexStore

LAST_WORD = "quokkafrobnicate"
"""A word only the file the order puts last holds."""


def _module(i: int) -> str:
    return "\n\n".join(
        f"def step_{i}_{j}(value):\n    '''Step {j} of module {i}.'''\n"
        f"    return value * {i + 1} + {j * 7}\n"
        for j in range(3)
    )


def _repository(repo: Repo) -> None:
    """12 files: source, tests, docs, and one vendored file (ordered last)."""
    for i in range(8):
        repo.write(f"pkg/mod{i}.py", _module(i))
    repo.write("tests/test_mod.py", "def test_step():\n    assert True\n")
    repo.write("docs/guide.md", "# Guide\n\nHow to step through modules.\n")
    repo.write("README.md", "# Project\n\nSteps.\n")
    repo.write(
        "vendor/lib/last.py",
        f"def {LAST_WORD}(x):\n    '''The vendored {LAST_WORD} helper.'''\n    return x\n",
    )
    repo.commit("init")


def _env(url: str) -> dict[str, str]:
    return {
        "CODECHUNKD_EMBEDDING_BACKEND": "remote",
        "CODECHUNKD_EMBEDDING_REMOTE_URL": url,
        "CODECHUNKD_EMBEDDING_REMOTE_MODEL": "stall-test",
        "CODECHUNKD_EMBEDDING_REMOTE_DIMENSION": str(DIM),
        "CODECHUNKD_EMBEDDING_TIMEOUT": "600",
        "CODECHUNKD_EMBEDDING_RETRIES": "0",
        "CODECHUNKD_EMBEDDING_BATCH_SIZE": "4",
        "CODECHUNKD_EMBEDDING_CONCURRENCY": "1",  # requests in order: the order is seen
    }


@pytest.fixture
def server() -> Iterator[StallingServer]:
    with serving() as srv:
        yield srv


class _Writer:
    """A real Syncer over the server's embedder, on a real index directory."""

    def __init__(self, index_dir: Path, url: str, **extra: str) -> None:
        self.settings: Settings = load_settings(
            env={**_env(url), **extra}, overrides={"index.dir": str(index_dir)}
        )
        paths = IndexPaths.of(self.settings)
        self.store = IndexStore(paths.uri, state_file=paths.state_file)
        self.cache = EmbeddingCache(paths.cache, max_entries=self.settings.embedding.cache_size)
        self.embedder = make_embedder(self.settings.embedding)
        self.syncer = Syncer(self.settings, self.store, self.embedder, self.cache)

    def close(self) -> None:
        self.syncer.close()
        self.cache.close()


@pytest.fixture
def writer(index_dir: Path, server: StallingServer) -> Iterator[_Writer]:
    w = _Writer(index_dir, server.url)
    yield w
    w.close()


def _sync_in_a_thread(
    syncer: Syncer, git: GitSource, **kwargs: Any
) -> tuple[threading.Thread, list[BaseException]]:
    """``syncer.sync(git)`` started on a thread; what it raises lands in the list."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            syncer.sync(git, **kwargs)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, name="sync")
    thread.start()
    return thread, errors


def _paths(hits: Any) -> list[str]:
    return [h.path for h in hits]


def test_every_file_answers_by_text_before_the_first_vector_is_computed(
    repo: Repo, writer: _Writer, server: StallingServer
) -> None:
    """While the fill's first embedding request is held, every file's rows are in the
    table without vectors: the last-ordered file answers a text and a hybrid search,
    ``verify`` says the index is not complete, and the seed offers none of them. Once the
    server answers, every row gets its vector and verify is clean."""
    _repository(repo)
    git = GitSource(repo.path)
    server.stall.set()
    seen: list[SyncProgress] = []
    thread, errors = _sync_in_a_thread(writer.syncer, git, progress=seen.append)
    try:
        wait_for(lambda: server.held >= 1, "the fill's first request held by the server")
        reader = IndexStore(writer.store.uri)
        cov = coverage(reader, git.source.id)
        files, chunks = reader.count(git.source.id)
        assert files == 12 and cov.chunks == chunks > 12 and cov.vectors == 0, cov
        searcher = Searcher(reader)
        text = searcher.search(LAST_WORD, None, mode=Mode.TEXT)
        assert _paths(text)[:1] == ["vendor/lib/last.py"], _paths(text)
        hybrid = searcher.search(LAST_WORD, np.asarray(vector(LAST_WORD), np.float32))
        assert _paths(hybrid)[:1] == ["vendor/lib/last.py"], _paths(hybrid)
        report = verify(writer.settings, reader, git)
        assert not report.ok and report.vectorless == chunks, report.as_dict()
        assert report.unusable_vectors == 0  # a missing vector is not a bad one
        hashes = {r["embed_hash"] for r in reader.select(None, ["embed_hash"])}
        assert (
            Seed(reader.uri, reader.chunks_table(), "remote:stall-test", DIM)
            .lookup("remote:stall-test", hashes)
            .vectors
            == {}
        )
        state = reader.state(git.source.id)
        # at the new commit, marked pending until its vectors are in (a kill: finished next run)
        assert state is not None and state.commit == state.pending == repo.head(), state
        assert seen[-1].files_done == 12 and seen[-1].chunks == chunks
        # the write said what it was doing, at its own pace: chunks written, not vectors
        wrote = [p for p in seen if p.activity == WRITING_TEXT]
        assert wrote and wrote[-1].files_done == 12 and wrote[-1].chunks == chunks, seen
        assert wrote[-1].embedded == 0 and wrote[-1].rate == chunks / wrote[-1].seconds
        line = progress_text(wrote[-1].as_dict())
        assert line.startswith("writing text") and f"12/12 files written, {chunks:,} chunks" in line
    finally:
        server.stall.clear()
        server.release.set()
        thread.join(timeout=scaled(120))
    assert not thread.is_alive() and not errors, errors
    cov = coverage(writer.store, git.source.id)
    assert cov.complete and cov.chunks == chunks, cov
    assert verify(writer.settings, writer.store, git).ok
    done = writer.store.state(git.source.id)
    assert done is not None and done.pending is None and done.commit == repo.head()
    assert seen[-1].activity == "filling vectors" and seen[-1].fill_embedded == seen[-1].fill_texts
    assert seen[-1].eta_s == 0


def test_the_fill_follows_the_order_source_first(
    repo: Repo, writer: _Writer, server: StallingServer
) -> None:
    """The fill embeds source files before tests, docs and vendored code: the server is
    sent their texts in that order."""
    _repository(repo)
    writer.syncer.sync(GitSource(repo.path))
    assert coverage(writer.store).complete
    path_of = {
        r["embed_text"]: r["path"] for r in writer.store.select(None, ["path", "embed_text"])
    }
    sent = [path_of[t] for t in server.inputs]
    groups = [0 if p.startswith("pkg/") else 3 if p.startswith("vendor/") else 1 for p in sent]
    assert groups == sorted(groups), sent
    assert sent[0].startswith("pkg/") and sent[-1] == "vendor/lib/last.py", sent


@pytest.mark.parametrize("files", [12, 4], ids=["text first, the fill", "in the batch"])
def test_every_worker_of_the_embedder_is_kept_busy(
    files: int, repo: Repo, index_dir: Path, server: StallingServer
) -> None:
    """The embedder is handed a full batch for each of its workers at once, by the fill of
    a text-first change (12 files) as by a small change embedded in its batch (4 files): with
    3 requests allowed in flight and batches of 4, three requests are held by the server
    together (a call of one batch, 4 texts, would make at most 2 of 2)."""
    if files == 12:
        _repository(repo)
    else:
        for i in range(files):
            repo.write(f"pkg/mod{i}.py", _module(i))
        repo.commit("init")
    w = _Writer(index_dir, server.url, CODECHUNKD_EMBEDDING_CONCURRENCY="3")
    server.stall.set()
    thread, errors = _sync_in_a_thread(w.syncer, GitSource(repo.path))
    try:
        wait_for(lambda: server.held >= 3, "three requests held at once")
    finally:
        server.stall.clear()
        server.release.set()
        thread.join(timeout=scaled(120))
        w.close()
    assert not thread.is_alive() and not errors, errors
    assert coverage(w.store).complete


def _index(
    repo: Path, index: Path, url: str, extra: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codechunkd", "index", str(repo), "--index-dir", str(index)],
        env={**os.environ, **_env(url), **extra},
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )


@pytest.mark.parametrize(
    "point", ["fill.slice_cached:2", "fill.committed:1", "sync.state_written:1"]
)
def test_a_fill_killed_is_finished_by_the_next_run_with_nothing_lost(
    repo: Repo, tmp_path: Path, server: StallingServer, point: str
) -> None:
    """``codechunkd index`` killed inside the fill (after a slice is cached, after a
    commit of vectors, or right after the text is written): the next run embeds only what
    the cache lacks, every row gets its vector, and verify is clean."""
    _repository(repo)
    index = tmp_path / "index"
    killed = _index(repo.path, index, server.url, {AT_ENV: point})
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr[-2000:])
    # marked for the next run wherever the kill fell: ``codechunkd index``'s no-op path
    # trusts an unmarked state.json, and would leave the rows without vectors
    state = json.loads((index / "_codechunkd" / "state.json").read_text())
    assert state["sources"][0]["pending"] is not None, state
    w = _Writer(index, server.url)
    try:
        git = GitSource(repo.path)
        before = coverage(w.store, git.source.id)
        assert before.chunks > 0 and not before.complete, before
        assert not verify(w.settings, w.store, git).ok
        cached = w.cache.stats().entries
        report = w.syncer.sync(git)
        after = coverage(w.store, git.source.id)
        assert after.complete and after.chunks == before.chunks, after
        assert verify(w.settings, w.store, git).ok
        texts = len({r["embed_text"] for r in w.store.select(None, ["embed_text"])})
        assert report.embedded == texts - cached, (report.as_dict(), texts, cached)
    finally:
        w.close()


def test_a_40_file_repository_gets_its_source_searchable_before_its_docs(
    repo: Repo, writer: _Writer
) -> None:
    """40 files, below one batch (256): written in the order, source first and the most
    recently changed source first of all; no doc is searchable while a source file is not.
    The docs are the newest commit: the group comes before recency."""
    for i in range(20):
        repo.write(f"src/mod{i:02}.py", _module(i))
    for i in range(10):
        repo.write(f"tests/test_mod{i}.py", f"def test_{i}():\n    assert {i}\n")
    repo.commit("code")
    repo.write("src/mod07.py", _module(77))  # the source file changed last
    repo.commit("edit")
    for i in range(10):
        repo.write(f"docs/page{i}.md", f"# Page {i}\n\nAbout module {i}.\n")
    repo.commit("docs")
    git = GitSource(repo.path)
    seen: list[set[str]] = []

    def progress(_p: SyncProgress) -> None:
        paths = writer.store.chunk_paths(git.source.id)
        if paths and (not seen or paths != seen[-1]):
            seen.append(paths)

    writer.syncer.sync(git, progress=progress)
    source = {f"src/mod{i:02}.py" for i in range(20)}
    docs = {f"docs/page{i}.md" for i in range(10)}
    assert len(seen) >= 3, seen  # written in several commits, not one
    assert seen[0] <= source and "src/mod07.py" in seen[0], sorted(seen[0])
    for paths in seen:
        assert not (paths & docs) or source <= paths, sorted(paths)
    assert seen[-1] >= source | docs


def test_the_vector_index_is_trained_on_vectors_only(
    repo: Repo, index_dir: Path, server: StallingServer
) -> None:
    """With a vector index due at 4 rows, the text-first write (no vectors yet) trains none;
    the fill's upkeep trains it once vectors are there, and the sync ends complete."""
    _repository(repo)
    w = _Writer(index_dir, server.url, CODECHUNKD_INDEX_VECTOR_INDEX_ROWS="4")
    try:
        w.syncer.sync(GitSource(repo.path))
        assert w.store.has_vector_index()
        assert coverage(w.store).complete
        assert verify(w.settings, w.store, GitSource(repo.path)).ok
    finally:
        w.close()


def test_a_chunk_without_its_vector_keeps_its_text_rank_in_hybrid_search(
    repo: Repo, writer: _Writer
) -> None:
    """Half-filled: the vendored file's rows lose their vectors (as before their fill), the
    others keep theirs; a query whose words only that file holds still ranks it first in
    hybrid search, not below every chunk that has a vector."""
    import pyarrow as pa

    _repository(repo)
    writer.syncer.sync(GitSource(repo.path))
    rows = writer.store.select("path = 'vendor/lib/last.py'", ["id"])
    assert rows
    flat = pa.array(np.zeros(len(rows) * DIM, np.float32))
    table = pa.table(
        {
            "id": pa.array([r["id"] for r in rows], pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(
                flat, DIM, mask=pa.array([True] * len(rows))
            ),
            "embedding_model": pa.array([None] * len(rows), pa.string()),
        }
    )
    tbl = writer.store.chunks_table()
    tbl.merge_insert("id").when_matched_update_all().execute(table, on_bad_vectors="null")
    writer.store.index_text()
    cov = coverage(writer.store)
    assert 0 < cov.vectors < cov.chunks, cov
    query = "vendored helper step"  # every module matches "step": ranked by text too
    hits = Searcher(writer.store).search(query, np.asarray(vector(query), np.float32))
    assert _paths(hits)[:1] == ["vendor/lib/last.py"], _paths(hits)
