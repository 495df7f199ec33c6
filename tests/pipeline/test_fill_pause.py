"""A first index's vector fill lets other work through: asked to stop (the daemon's queue
has an edit due), it commits what it has and returns, its source still marked pending;
the same process's next sync writes the edit without looking at every file, then goes on
with the fill in its order. A mark found by a new process (a crash may have left it
mid-write) still makes it look at every file.

The embedder is a real HTTP embedding server on 127.0.0.1 that lets one request through
at a time (``StallingServer.gate``): each slice of the fill lasts until the test admits it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Repo, scaled, wait_for
from tests.pipeline.test_text_first import _module, _repository, _Writer
from tests.stalling_server import StallingServer, serving

from codechunkd.git.changes import GitSource
from codechunkd.pipeline.progress import SyncProgress
from codechunkd.pipeline.report import SyncReport
from codechunkd.pipeline.verify import verify
from codechunkd.storage.coverage import coverage
from codechunkd.storage.search import Mode, Searcher

EDITED = "zanzibarquota"
"""A word only the edit made during the fill holds."""


@pytest.fixture
def server() -> Iterator[StallingServer]:
    with serving() as srv:
        yield srv


def _paused(repo: Repo, writer: _Writer, server: StallingServer) -> SyncReport:
    """A first sync of 12 files whose fill is asked to stop at every turn: the server admits
    one slice at a time (each held until the test sees it), so the fill's patience runs out
    long before its texts do."""
    _repository(repo)
    git = GitSource(repo.path)
    asked = threading.Event()

    def wanted() -> bool:
        asked.set()
        return True

    server.gate.set()
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(writer.syncer.sync(git, yield_to=wanted)))
    thread.start()
    try:
        wait_for(
            lambda: not (server.admit_waiting() or thread.is_alive()),
            "the sync returned, its slices let through one at a time",
        )
    finally:
        server.open_gate()
        thread.join(timeout=scaled(60))
    assert out and asked.is_set(), out
    report: SyncReport = out[0]
    assert report.fill_paused and 0 < report.embedded <= server.held, report.as_dict()
    return report


def test_a_paused_fill_lets_an_edit_through_and_the_next_sync_goes_on_with_it(
    repo: Repo, index_dir: Path, server: StallingServer
) -> None:
    """Paused: some vectors set, the rest not, the source marked pending at its commit.
    The edit's sync (same process) reads only the edited path, writes it, and finishes
    the fill: every vector set, the mark gone, verify clean."""
    writer = _Writer(index_dir, server.url, CODECHUNKD_EMBEDDING_BATCH_SIZE="1")
    try:
        _paused(repo, writer, server)
        git = GitSource(repo.path)
        cov = coverage(writer.store, git.source.id)
        assert 0 < cov.vectors < cov.chunks, cov
        state = writer.store.state(git.source.id)
        assert state is not None and state.pending == state.commit == repo.head(), state
        repo.write("pkg/mod0.py", _module(0) + f"\n\ndef {EDITED}():\n    return 1\n")
        seen: list[SyncProgress] = []
        report = writer.syncer.sync(git, paths=["pkg/mod0.py"], progress=seen.append)
        assert not report.full and report.changed == 1 and not report.fill_paused, report
        cov = coverage(writer.store, git.source.id)
        assert cov.complete
        # its progress counts the source's rows, not the one file this sync wrote
        filling = [p for p in seen if p.activity == "filling vectors"]
        assert filling and all(p.chunks == cov.chunks for p in filling), seen
        assert all(p.vectors <= p.chunks for p in seen) and filling[-1].vectors == cov.chunks
        done = writer.store.state(git.source.id)
        assert done is not None and done.pending is None, done
        assert verify(writer.settings, writer.store, git).ok
        hits = Searcher(writer.store).search(EDITED, None, mode=Mode.TEXT)
        assert [h.path for h in hits][:1] == ["pkg/mod0.py"]
    finally:
        writer.close()


def test_a_paused_fill_found_by_a_new_process_is_reconciled_in_full(
    repo: Repo, index_dir: Path, server: StallingServer
) -> None:
    """The pending mark of a paused fill, found by another process (which cannot tell it
    from a write cut short), makes that process look at every file, then finish the fill."""
    first = _Writer(index_dir, server.url, CODECHUNKD_EMBEDDING_BATCH_SIZE="1")
    try:
        _paused(repo, first, server)
    finally:
        first.close()
    second = _Writer(index_dir, server.url)
    try:
        git = GitSource(repo.path)
        report = second.syncer.sync(git)
        assert report.full and report.added == report.changed == 0, report.as_dict()
        assert coverage(second.store, git.source.id).complete
        assert verify(second.settings, second.store, git).ok
    finally:
        second.close()
