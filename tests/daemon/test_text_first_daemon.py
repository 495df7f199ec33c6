"""A cold daemon answers from the full text before any vector exists, and says so.

The daemon's embedder is a real HTTP embedding server on 127.0.0.1 that holds every
request from the start: the daemon writes the whole repository's text, and its fill
waits on its first slice. At that instant (awaited, not timed) a search for a word that
only the last-ordered file holds is answered from the full text, without waiting for the
model, and ``status`` counts what the table holds. Once the server answers, the vectors
fill in and search goes hybrid.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import Repo, run_service, wait_for
from tests.pipeline.test_fill_pause import EDITED
from tests.pipeline.test_text_first import LAST_WORD, _env, _module, _repository
from tests.stalling_server import StallingServer, serving

from codechunkd.config import load_settings
from codechunkd.daemon.control import SourceSpec
from codechunkd.daemon.service import Service
from codechunkd.daemon.status import render_text, status_line
from codechunkd.git.changes import GitSource
from codechunkd.mcp_server.render import render_status
from codechunkd.storage.coverage import coverage
from codechunkd.storage.request import SearchRequest
from codechunkd.storage.store import IndexStore


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[StallingServer]:
    with serving() as srv:
        for key, value in _env(srv.url).items():
            monkeypatch.setenv(key, value)
        yield srv


def _search(service: Service, query: str) -> dict:  # type: ignore[type-arg]
    return service.search({"cmd": "search", **SearchRequest(query=query, k=5).to_json()})


def test_a_cold_daemon_answers_from_the_text_before_the_first_vector(
    repo: Repo, index_dir: Path, server: StallingServer
) -> None:
    """While the first embedding request is held: the last-ordered file answers (mode
    ``text``, with a note), status's file and chunk counts are the table's, and coverage
    says no vectors yet; after the server answers, every chunk has its vector."""
    _repository(repo)
    server.stall.set()
    overrides = {"index.dir": str(index_dir), "daemon.debounce_ms": 50, "daemon.nice": 0}
    service = Service(load_settings(overrides=overrides), specs=[SourceSpec.parse(str(repo.path))])
    source = GitSource(repo.path).source.id
    seen: dict[str, object] = {}

    def drive() -> None:
        wait_for(lambda: server.held >= 1, "the fill's first request held by the server")
        reader = IndexStore(str(index_dir))
        files, chunks = reader.count(source)
        assert coverage(reader, source).vectors == 0  # no embedding slice written
        answer = _search(service, LAST_WORD)
        assert [h["path"] for h in answer["hits"]][:1] == ["vendor/lib/last.py"], answer
        assert answer["mode"] == "text" and "full text" in answer["note"], answer
        assert answer["coverage"]["vector_chunks"] == 0
        assert answer["coverage"]["text_chunks"] == chunks
        (src,) = service.status()["sources"]
        assert (src["files"], src["chunks"]) == (files, chunks) == (12, chunks)
        assert (src["text_chunks"], src["vector_chunks"]) == (chunks, 0)
        # what the MCP status tool tells an agent: indexing, not stale or interrupted
        mcp = render_status(service.status())
        assert "INDEXING; branch main" in mcp and "PARTIAL" not in mcp, mcp
        assert f"vectors for 0 of {chunks:,} chunks so far" in mcp, mcp
        seen["line"] = status_line(service.snapshot(read_git=False))
        server.stall.clear()
        server.release.set()
        wait_for(service.ready.is_set, "the first index, vectors filled")
        (src,) = service.status()["sources"]
        assert src["vector_chunks"] == src["text_chunks"] == src["chunks"] == chunks, src
        after = _search(service, LAST_WORD)
        assert after["mode"] == "hybrid" and "note" not in after, after
        assert [h["path"] for h in after["hits"]][:1] == ["vendor/lib/last.py"]

    assert run_service(service, drive) == 0
    assert "vectors" in str(seen["line"]), seen


def test_a_query_gives_up_its_turn_while_the_model_is_held(server: StallingServer) -> None:
    """The shared model held by the writer (its request held by the server, as a model load
    holds it): a query's turn gives up (``ModelBusy``) instead of waiting, the writer's
    slice is not disturbed, and once the model is free a query gets its vector."""
    from codechunkd.daemon.answer import ModelBusy
    from codechunkd.daemon.embedder_lock import LockedEmbedder
    from codechunkd.embedding.embedder import make_embedder

    locked = LockedEmbedder(make_embedder(load_settings().embedding))
    server.stall.set()
    done: list[object] = []
    writer = threading.Thread(target=lambda: done.append(locked.embed(["a slice"] * 4)))
    writer.start()
    try:
        wait_for(lambda: server.held >= 1, "the writer's slice held by the server")
        with pytest.raises(ModelBusy):
            locked.embed_within(["a query"], 0.2)
    finally:
        server.stall.clear()
        server.release.set()
        writer.join(timeout=60)
    assert done and len(done[0]) == 4  # type: ignore[arg-type]
    assert locked.embed_within(["a query"], 60).shape == (1, 8)


def test_an_edit_during_the_first_fill_is_searchable_before_the_fill_ends(
    repo: Repo, index_dir: Path, server: StallingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server lets one request through at a time. While the first index's fill waits
    on a slice, a file is edited: once that edit is due, the fill stops at its next slice,
    the edit is written (and searchable) while most vectors are still missing, and the fill
    then goes on to the end."""
    _repository(repo)
    monkeypatch.setenv("CODECHUNKD_EMBEDDING_BATCH_SIZE", "1")  # a slice per text
    server.gate.set()
    overrides = {"index.dir": str(index_dir), "daemon.debounce_ms": 50, "daemon.nice": 0}
    service = Service(load_settings(overrides=overrides), specs=[SourceSpec.parse(str(repo.path))])

    def drive() -> None:
        wait_for(lambda: server.held >= 1, "the fill's first slice held by the server")
        repo.write("pkg/mod0.py", _module(0) + f"\n\ndef {EDITED}():\n    return 1\n")
        wait_for(
            lambda: service.status()["sources"][0]["pending_paths"] >= 1,
            "the edit waiting for the writer",
        )

        def edit_found() -> bool:
            server.admit_waiting()
            request = SearchRequest(query=EDITED, k=5, mode="text")
            answer = service.search({"cmd": "search", **request.to_json()})
            return [h["path"] for h in answer["hits"]][:1] == ["pkg/mod0.py"]

        wait_for(edit_found, "the edit searchable, one slice admitted at a time")
        (src,) = service.status()["sources"]
        assert src["vector_chunks"] < src["chunks"] - 10, src  # the fill is far from done
        server.open_gate()
        wait_for(service.ready.is_set, "the first index caught up")
        wait_for(
            lambda: (
                (s := service.status()["sources"][0])["fresh"] and s["vector_chunks"] == s["chunks"]
            ),
            "every vector filled",
        )

    assert run_service(service, drive) == 0


def test_a_shutdown_stops_the_fill_at_a_slice_and_the_next_start_finishes_it(
    repo: Repo, index_dir: Path, server: StallingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM while the first index's fill runs (the server admitting every slice it is
    sent once the shutdown has begun): the fill stops at a slice's end, its vectors so far
    set, the source still marked pending; the next start finishes it."""
    _repository(repo)
    for i in range(8, 40):  # ~100 slices: many more than the fill's patience lets it run
        repo.write(f"pkg/mod{i}.py", _module(i))
    repo.commit("more modules")
    monkeypatch.setenv("CODECHUNKD_EMBEDDING_BATCH_SIZE", "1")
    server.gate.set()
    overrides = {"index.dir": str(index_dir), "daemon.debounce_ms": 50, "daemon.nice": 0}
    settings = load_settings(overrides=overrides)
    spec = SourceSpec.parse(str(repo.path))
    source = GitSource(repo.path).source.id
    stop = threading.Event()
    service = Service(settings, specs=[spec])

    def admit_all() -> None:
        while not stop.is_set():
            if service.queue.closed:
                server.admit_waiting()
            stop.wait(0.01)

    admitter = threading.Thread(target=admit_all)

    def drive() -> None:
        wait_for(lambda: server.held >= 1, "the fill's first slice held by the server")
        admitter.start()

    try:
        assert run_service(service, drive) == 0
    finally:
        stop.set()
        if admitter.is_alive():
            admitter.join()
    reader = IndexStore(str(index_dir))
    cov = coverage(reader, source)
    assert cov.vectors < cov.chunks, cov  # stopped, not run to its end
    state = reader.state(source)
    assert state is not None and state.pending == state.commit, state
    server.open_gate()
    service = Service(settings, specs=[spec])
    assert run_service(service, lambda: wait_for(service.ready.is_set, "caught up")) == 0
    assert coverage(IndexStore(str(index_dir)), source).complete


def test_a_fill_that_gave_way_to_a_reload_goes_on_by_itself(
    repo: Repo, index_dir: Path, server: StallingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reload (SIGHUP) asked for while the first index's fill runs: the fill stops at a
    slice (the last batch says so), the reload is applied, and the fill is taken up again
    though nothing of the source changed; every vector is filled."""
    _repository(repo)
    monkeypatch.setenv("CODECHUNKD_EMBEDDING_BATCH_SIZE", "1")
    server.gate.set()
    overrides = {"index.dir": str(index_dir), "daemon.debounce_ms": 50, "daemon.nice": 0}
    service = Service(load_settings(overrides=overrides), specs=[SourceSpec.parse(str(repo.path))])

    def drive() -> None:
        wait_for(lambda: server.held >= 1, "the fill's first slice held by the server")
        os.kill(os.getpid(), signal.SIGHUP)

        def paused() -> bool:
            server.admit_waiting()
            batch = service.status()["sources"][0].get("last_batch") or {}
            return bool(batch.get("fill_paused"))

        wait_for(paused, "the fill paused for the reload, one slice admitted at a time")
        text = render_text(service.status())
        assert "its vector fill paused for other work" in text, text
        server.open_gate()
        wait_for(
            lambda: (
                (s := service.status()["sources"][0])["fresh"] and s["vector_chunks"] == s["chunks"]
            ),
            "every vector filled, with no change to the source",
        )

    assert run_service(service, drive) == 0
