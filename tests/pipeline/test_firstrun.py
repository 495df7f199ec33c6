"""The first run, in-process: progress within a batch, vectors saved as computed, the order
of a large index, and a pending mark that a no-op sync clears."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Indexer, Repo

from codechunkd.cli import main
from codechunkd.config import Settings, load_settings
from codechunkd.embedding.embedder import make_embedder
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.plan import fingerprint, up_to_date
from codechunkd.pipeline.sync import SyncProgress, order_rank


def _module(i: int, functions: int = 4) -> str:
    return "\n\n".join(
        f"def step_{i}_{j}(value):\n    '''Step {j} of module {i}.'''\n"
        f"    return value * {i + 1} + {j * 7} - len(str(value))\n"
        for j in range(functions)
    )


def _settings(index_dir: Path, **env: str) -> Settings:
    return load_settings(
        env={f"CODECHUNKD_{k.upper()}": v for k, v in env.items()},
        overrides={"index.dir": str(index_dir)},
    )


@pytest.fixture
def small_slices(
    index_dir: Path, exported_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Indexer]:
    """An indexer that embeds in slices of 4 texts: a model of one session and batches of 4
    (a slice is a batch for each of the model's sessions), as its settings say."""
    settings = _settings(
        index_dir,
        embedding_batch_size="4",
        embedding_sessions="1",
        embedding_threads="1",
        embedding_onnx_dir=str(tmp_path_factory.getbasetemp() / "onnx-models"),
    )
    ix = Indexer(settings, make_embedder(settings.embedding))
    yield ix
    ix.close()


def test_progress_advances_within_a_batch_and_vectors_are_saved_per_slice(
    repo: Repo, small_slices: Indexer
) -> None:
    """One batch of 6 files: progress moves (and the cache fills) slice by slice before the
    batch is committed, and the last report's counts are the sync's."""
    for i in range(6):
        repo.write(f"pkg/mod{i}.py", _module(i))
    repo.commit()
    seen: list[tuple[SyncProgress, int]] = []

    def progress(p: SyncProgress) -> None:
        seen.append((p, small_slices.cache.stats().entries))

    report = small_slices.sync(repo.path, progress=progress)
    before_commit = [(p, entries) for p, entries in seen if p.chunks == 0]
    embedding = [(p, e) for p, e in before_commit if p.embedded > 0]
    assert len(embedding) >= 3, [p for p, _ in seen]  # 24 texts, slices of 4
    assert [p.embedded for p, _ in embedding] == sorted(p.embedded for p, _ in embedding)
    assert all(entries >= p.embedded for p, entries in embedding), "vectors cached per slice"
    assert embedding[-1][0].files_done == 6 and embedding[0][0].files_done < 6
    last = seen[-1][0]
    assert (last.files_done, last.files_total) == (6, 6)
    assert (last.embedded, last.reused, last.chunks) == (
        report.embedded,
        report.reused,
        report.chunks,
    )
    assert last.rate > 0 and last.eta_s == 0
    assert report.embedded == 24


def test_a_noop_sync_clears_a_pending_mark(
    repo: Repo, indexer: Indexer, index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's reproduction: an interrupted checkout leaves `pending`; after checking the
    branch back out, a sync with nothing to do clears it and status says fresh."""
    repo.write("a.py", _module(0))
    old = repo.commit("old")
    for i in range(1, 4):
        repo.write(f"b{i}.py", _module(i, 1))
    repo.commit("new")
    indexer.sync(repo.path)
    repo.git("checkout", "-q", old)

    def interrupt(_p: SyncProgress) -> None:
        raise KeyboardInterrupt  # Ctrl-C before anything was written

    with pytest.raises(KeyboardInterrupt):
        indexer.sync(repo.path, progress=interrupt)
    git = GitSource(repo.path)
    assert indexer.store.state(git.source.id).pending  # type: ignore[union-attr]
    repo.git("checkout", "-q", "main")
    report = indexer.sync(repo.path)
    assert (report.added, report.changed, report.deleted, report.embedded) == (0, 0, 0, 0)
    state = indexer.store.state(git.source.id)
    assert state is not None and state.pending is None
    doc = json.loads(indexer.paths.state_file.read_text())
    fp = fingerprint(indexer.syncer.settings, indexer.syncer.embedder.model_id)
    assert up_to_date(git, doc["sources"][0], fp)
    with pytest.raises(SystemExit) as exc:
        main(["status", "--index-dir", str(index_dir)])
    assert exc.value.code == 13  # no daemon; the source itself is fresh, not interrupted
    assert "[fresh]" in capsys.readouterr().out


def test_order_rank_puts_source_first() -> None:
    """Source, then tests, then docs, then vendored code."""
    assert order_rank("src/app/server.py") == 0
    assert order_rank("tests/test_server.py") == 1
    assert order_rank("pkg/server_test.go") == 1
    assert order_rank("docs/guide.md") == 2
    assert order_rank("README.md") == 2
    assert order_rank("third_party/lib/x.c") == 3
    assert order_rank("web/node_modules/a/index.js") == 3


def test_a_large_first_index_takes_recent_source_first(
    repo: Repo,
    index_dir: Path,
    embedder: Any,
) -> None:
    """With batches of 2 files, the first batch committed holds the two source files of the
    latest commits, not tests, docs, vendored code or older source."""
    repo.write("vendor/lib.py", _module(9, 1))
    repo.write("tests/test_a.py", _module(8, 1))
    repo.write("docs/guide.md", "# Guide\n\nHow to run it.\n")
    repo.write("src/old.py", _module(7, 1))
    repo.commit("old")
    repo.write("src/newer.py", _module(6, 1))
    repo.commit("newer")
    repo.write("src/newest.py", _module(5, 1))
    repo.commit("newest")
    ix = Indexer(_settings(index_dir, index_batch_files="2"), embedder)
    git = GitSource(repo.path)
    firsts: list[set[str]] = []

    def progress(p: SyncProgress) -> None:
        if p.chunks and not firsts:
            firsts.append(set(ix.store.manifest(git.source.id)))

    try:
        ix.syncer.sync(git, progress=progress)
    finally:
        ix.close()
    assert firsts == [{"src/newest.py", "src/newer.py"}]
