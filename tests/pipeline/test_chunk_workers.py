"""Chunking on worker processes (``index.chunk_workers``, issue #20): the same rows as
chunking in the indexing process, hostile files handled the same, and a worker killed
mid-sync fails that sync clearly while the next one completes.

The embedder is the ``remote`` backend against a real server on 127.0.0.1 that answers
hash vectors at once: the fast embedder this setting exists for, and a fast test.
"""

from __future__ import annotations

import os
import signal
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Indexer, Repo, wait_for
from tests.embedding.test_embed_remote import MODEL, EmbeddingServer

from codechunkd.config import Settings, load_settings
from codechunkd.embedding.embedder import make_embedder
from codechunkd.errors import ChunkingError
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.report import SyncReport
from codechunkd.pipeline.sync import SyncProgress
from codechunkd.pipeline.verify import verify
from codechunkd.pipeline.workers import chunk_workers

#: The grammar-crash reproduction of tests/chunking/test_grammar_fuzz.py (300 nested quotes).
DEEP_MARKDOWN = b">" * 300 + b" quokka\n"


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    with EmbeddingServer() as srv:
        yield srv


def stdlib_files(count: int, max_bytes: int = 12_000, min_bytes: int = 2_000) -> list[Path]:
    """``count`` real modules of Python's standard library, small ones, in a stable order."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in lib.glob("*.py") if min_bytes < p.stat().st_size < max_bytes)
    assert len(files) >= count
    return files[:count]


def make_settings(tmp: Path, name: str, url: str, workers: int, **more: Any) -> Settings:
    overrides = {
        "index.dir": str(tmp / name),
        "index.chunk_workers": workers,
        "embedding.backend": "remote",
        "embedding.remote_url": url,
        "embedding.remote_model": MODEL,
        **more,
    }
    return load_settings(env={}, overrides=overrides)


def index_with(
    repo: Repo, tmp: Path, url: str, workers: int, **more: Any
) -> tuple[list[dict[str, Any]], SyncReport]:
    """A cold index of ``repo`` with ``workers`` chunking processes: its rows and report."""
    settings = make_settings(tmp, f"index-{workers}", url, workers, **more)
    ix = Indexer(settings, make_embedder(settings.embedding))
    try:
        report = ix.sync(repo.path)
        assert verify(settings, ix.store, GitSource(repo.path)).ok
        if workers > 1:
            pool = ix.syncer.chunk_pool
            assert pool is not None and pool.started == workers
            assert pool.tasks_done > 0, "a multi-batch change was chunked on worker processes"
            assert not worker_pids(), "the workers ended with the change"
        rows = sorted(ix.rows(), key=lambda r: (r["path"], r["start_byte"], r["id"]))
    finally:
        ix.close()
    wait_for(lambda: not worker_pids(), "the workers ended with the syncer", timeout=10)
    return rows, report


def worker_pids() -> list[int]:
    """This process's children that are multiprocessing ``spawn`` workers (a /proc scan)."""
    me = str(os.getpid())
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue  # ended while we looked
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[1] == me and fields[0] != "Z" and b"spawn_main" in cmdline:
            pids.append(int(proc.name))
    return pids


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds workers through /proc")
def test_workers_write_exactly_the_rows_of_one_process(
    repo: Repo, tmp_path: Path, server: EmbeddingServer
) -> None:
    """40 real stdlib modules indexed with 2 chunking workers give the same rows (ids,
    content hashes, spans, symbols, kinds, blobs) as chunking in the indexing process."""
    for f in stdlib_files(40):
        repo.write(f"lib/{f.name}", f.read_bytes())
    repo.commit()

    one, report_one = index_with(repo, tmp_path, server.url, 1)
    two, report_two = index_with(repo, tmp_path, server.url, 2)

    assert len(one) > 200
    assert two == one
    assert report_two.chunks == report_one.chunks and report_two.added == 40


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds workers through /proc")
def test_hostile_files_are_handled_the_same_in_workers(
    repo: Repo, tmp_path: Path, server: EmbeddingServer
) -> None:
    """A Markdown file whose nesting crashes its grammar, a YAML one likewise, a file that is
    not UTF-8, a binary and an oversized file: the same skips, decodings and rows on worker
    processes as in the indexing process, and no worker crashes."""
    for f in stdlib_files(10, max_bytes=25_000, min_bytes=12_000):  # batches that start them
        repo.write(f"lib/{f.name}", f.read_bytes())
    repo.write("deep.md", b"# Title\n\n" + DEEP_MARKDOWN)
    repo.write("deep.yaml", b"- " * 300 + b"x\n")
    repo.write("latin1.py", "s = 'caf\xe9'\n".encode("latin-1"))
    repo.write("blob.bin", b"\0\1\2" * 100)
    repo.write("big.txt", b"word " * 8000)
    repo.commit()
    more = {"files.max_file_size": 30_000}

    one, report_one = index_with(repo, tmp_path, server.url, 1, **more)
    two, report_two = index_with(repo, tmp_path, server.url, 2, **more)

    assert two == one
    assert report_two.skipped == report_one.skipped
    assert report_two.skipped["binary"] == 1 and report_two.skipped["too_large"] == 1
    assert report_two.replaced_utf8 == report_one.replaced_utf8 == 1
    assert any(r["path"] == "deep.md" for r in two), "the deep file is still indexed (as text)"


def test_a_killed_worker_fails_the_sync_and_the_next_one_completes(
    repo: Repo, tmp_path: Path, server: EmbeddingServer
) -> None:
    """A chunking worker SIGKILLed mid-sync: that sync raises a ChunkingError that says so,
    with the worker's pid and signal (it does not hang), the source stays marked pending,
    and the next sync (on new workers) completes and verifies.  The files are large enough
    (over 16 KB) that a batch of four starts the workers."""
    for f in stdlib_files(40, max_bytes=60_000, min_bytes=16_500):
        repo.write(f"lib/{f.name}", f.read_bytes())
    repo.commit()
    settings = make_settings(tmp_path, "index", server.url, 2, **{"index.batch_files": 4})
    ix = Indexer(settings, make_embedder(settings.embedding))
    killed: list[int] = []

    def kill_a_worker(p: SyncProgress) -> None:
        # after the first batch: the producer is at most two batches ahead of ten
        if not killed and p.files_done >= 4 and (pids := worker_pids()):
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    try:
        with pytest.raises(ChunkingError, match="chunking worker process died") as info:
            ix.sync(repo.path, progress=kill_a_worker)
        assert killed
        assert f"(pid {killed[0]}, killed by SIGKILL)" in str(info.value)
        git = GitSource(repo.path)
        state = ix.store.state(git.source.id)
        assert state is not None and state.pending is not None

        report = ix.sync(repo.path)
        assert report.full and report.chunks > 0
        assert verify(settings, ix.store, git).ok
        state = ix.store.state(git.source.id)
        assert state is not None and state.pending is None
    finally:
        ix.close()
    wait_for(lambda: not worker_pids(), "no worker outlives the syncer", timeout=10)


def test_auto_chooses_a_worker_per_cpu(tmp_path: Path) -> None:
    """``chunk_workers = 0``: one per usable CPU, at most 8, whatever the embedder (a change
    that has workers is written text first: its vectors come after its chunks); a number set
    is taken as it is."""
    base = {"index.dir": str(tmp_path / "i")}

    def auto(**kw: Any) -> int:
        return chunk_workers(load_settings(env={}, overrides={**base, **kw}))

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    each = max(1, min(cpus or 1, 8))
    assert auto() == each
    assert auto(**{"embedding.backend": "torch"}) == each
    assert auto(**{"embedding.backend": "torch", "embedding.device": "cuda"}) == each
    assert auto(**{"embedding.backend": "remote", "embedding.remote_url": "http://x/v1"}) == each
    assert auto(**{"index.chunk_workers": 3}) == 3


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds workers through /proc")
def test_a_change_of_small_batches_starts_no_worker(
    repo: Repo, tmp_path: Path, server: EmbeddingServer
) -> None:
    """Ten small modules in batches of two (a few KB each, less than a task per worker):
    chunked in the indexing process, no worker started, the rows those of one process."""
    for f in stdlib_files(10, max_bytes=4_000):
        repo.write(f"lib/{f.name}", f.read_bytes())
    repo.commit()
    one, _ = index_with(repo, tmp_path, server.url, 1, **{"index.batch_files": 2})
    settings = make_settings(tmp_path, "index-small", server.url, 2, **{"index.batch_files": 2})
    ix = Indexer(settings, make_embedder(settings.embedding))
    try:
        report = ix.sync(repo.path)
        pool = ix.syncer.chunk_pool
        assert pool is not None and pool.started == 0
        rows = sorted(ix.rows(), key=lambda r: (r["path"], r["start_byte"], r["id"]))
    finally:
        ix.close()
    assert report.added == 10 and rows == one
