"""A reranking server (``rerank.*``): default search sends its best candidates to a real
server on 127.0.0.1 and takes its order, the ranking rules on top; a server that fails,
hangs or answers nonsense leaves the search its own order, with a note saying why."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import index_of
from tests.rerank_server import RerankServer

from codechunkd.config import load_settings
from codechunkd.config.settings import RerankSettings
from codechunkd.errors import ConfigError
from codechunkd.llm.rerank import Reranker, RerankError
from codechunkd.storage.reader import Index
from codechunkd.storage.request import SearchRequest

EXE = str(Path(sys.executable).parent / "codechunkd")

INVOICE = """\
def compute_invoice_total(lines, tax_rate):
    subtotal = sum(line.price * line.quantity for line in lines)
    return subtotal * (1 + tax_rate)
"""
NOTES = """\
def stripe_pattern(width):
    # zebra zebra zebra: alternate dark and light bands
    return ["dark" if i % 2 else "light" for i in range(width)]
"""
NOTES_TEST = """\
def test_stripe_pattern():
    # zebra zebra zebra zebra
    assert stripe_pattern(2) == ["light", "dark"]
"""
QUERY = "compute the invoice total from its lines"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, embedder) -> Index:  # type: ignore[no-untyped-def]
    return index_of(
        tmp_path_factory.mktemp("rerank"),
        {
            "billing/invoice.py": INVOICE,
            "art/stripes.py": NOTES,
            "tests/test_stripes.py": NOTES_TEST,
        },
        embedder,
    )


@pytest.fixture
def server() -> Iterator[RerankServer]:
    with RerankServer(word="zebra") as s:
        yield s


def _reranked(index: Index, server: RerankServer, **settings: object) -> Index:
    rerank = RerankSettings(url=server.url, model="test-reranker", **settings)  # type: ignore[arg-type]
    return Index(index.store, dataclasses.replace(index.settings, rerank=rerank), index.embedder)


def _paths(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.path for h in hits]


def test_the_reranker_orders_the_candidates_and_the_rules_still_apply(
    index: Index, server: RerankServer
) -> None:
    """The server's best candidate comes first though both retrievers put the invoice
    first; the test file, which the server scores highest of all, comes after the code
    (`test_prior` on top of the reranker's scores); text mode asks no reranker."""
    req = SearchRequest(query=QUERY, k=3)
    assert _paths(index.run(req))[0] == "billing/invoice.py"
    hits, notes = _reranked(index, server).answer(req)
    assert notes == []
    assert _paths(hits)[0] == "art/stripes.py" and len(hits) == 3, _paths(hits)
    unruled = _reranked(index, server).run(dataclasses.replace(req, disable=("test_prior",)))
    assert _paths(unruled)[0] == "tests/test_stripes.py"
    server.seen[1:] = []
    (body, headers), *_ = server.seen
    assert body["model"] == "test-reranker" and body["query"] == QUERY
    assert len(body["documents"]) == 3 and "Authorization" not in headers
    assert any(d.startswith("billing/invoice.py\n") for d in body["documents"])
    server.seen.clear()
    text = _reranked(index, server).run(SearchRequest(query=QUERY, k=3, mode="text"))
    assert _paths(text)[0] == "billing/invoice.py" and server.seen == []


def test_only_the_best_candidates_go_to_the_reranker(index: Index, server: RerankServer) -> None:
    """With ``rerank.depth`` 2, the server sees two documents, and the third candidate
    stays below them whatever the server would have said of it."""
    hits = _reranked(index, server, depth=2).run(SearchRequest(query=QUERY, k=3))
    (body, _), *_ = server.seen
    assert len(body["documents"]) == 2
    sent = {d.split("\n", 1)[0] for d in body["documents"]}
    assert set(_paths(hits)[:2]) == sent


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ((500, b'{"error": "overloaded"}'), "HTTP 500"),
        ((401, b'{"error": "bad key"}'), "HTTP 401"),
        ((200, b"<html>"), "not JSON"),
        ((200, b'{"results": [{"index": 0, "relevance_score": 1.0}]}'), "scored 1 of 3"),
        ((200, b'{"results": [{"index": 7, "relevance_score": 1.0}]}'), "a result is not"),
        ((200, b'{"results": [{"index": 0, "relevance_score": NaN}]}'), "a result is not"),
        ((200, b'{"results": "nope"}'), "no list of results"),
    ],
    ids=["500", "401", "html", "short", "index", "nan", "shape"],
)
def test_a_failing_reranker_leaves_the_search_its_own_order_and_says_why(
    index: Index, server: RerankServer, answer: tuple[int, bytes], said: str
) -> None:
    """An error, a body that is not JSON or one that does not score every candidate once
    with a finite number: the hits are those of the search without a reranker, and the
    note names the server and what went wrong."""
    server.answer = lambda body: answer
    req = SearchRequest(query=QUERY, k=3)
    hits, notes = _reranked(index, server).answer(req)
    assert _paths(hits) == _paths(index.run(req))
    [note] = notes
    assert note.startswith(f"ranked without the reranker: reranker {server.url}/rerank")
    assert said in note, note


def test_a_reranker_that_does_not_answer_costs_the_search_its_timeout_only(
    index: Index, server: RerankServer
) -> None:
    """A server that holds the request: the search answers in its own order once
    ``rerank.timeout`` has passed (one try, no retries), saying it timed out."""
    server.hang.set()
    req = SearchRequest(query=QUERY, k=3)
    hits, notes = _reranked(index, server, timeout=0.3).answer(req)
    assert _paths(hits) == _paths(index.run(req))
    assert len(server.seen) == 1 and "timed out" in notes[0], notes


def test_text_embeddings_inference_is_asked_in_its_own_shape(
    index: Index, server: RerankServer
) -> None:
    """``rerank.protocol = "tei"``: the request carries ``texts`` (and ``truncate``, so a
    long candidate is cut, not refused), and the bare list it answers orders the hits."""
    hits = _reranked(index, server, protocol="tei").run(SearchRequest(query=QUERY, k=3))
    (body, _), *_ = server.seen
    assert set(body) == {"query", "texts", "truncate"} and body["truncate"] is True
    assert _paths(hits)[0] == "art/stripes.py"


def test_the_server_reads_other_answer_shapes_and_sends_the_key(server: RerankServer) -> None:
    """text-embeddings-inference's bare list of ``{"index", "score"}`` is read too; the
    key from ``rerank.api_key_env`` goes as a bearer token; a key variable that is not set
    is a configuration error naming it."""
    server.answer = lambda body: (200, b'[{"index": 1, "score": -2.5}, {"index": 0, "score": 3}]')
    settings = RerankSettings(url=server.url, model="m", api_key_env="RERANK_KEY")
    reranker = Reranker(settings, environ={"RERANK_KEY": "s3cret"})
    assert reranker.scores("q", ["a", "b"]) == [3.0, -2.5]
    assert server.seen[0][1]["Authorization"] == "Bearer s3cret"
    with pytest.raises(ConfigError, match="RERANK_KEY"):
        Reranker(settings, environ={})
    server.answer = lambda body: (200, b'[{"index": 0, "score": true}, {"index": 1, "score": 1}]')
    with pytest.raises(RerankError, match="a result is not"):
        reranker.scores("q", ["a", "b"])


def test_search_from_the_command_line_notes_a_failed_reranker(
    index: Index, server: RerankServer
) -> None:
    """`codechunkd search` with `CODECHUNKD_RERANK_URL` set: the reranked order on stdout;
    with the server failing, the search's own order and a `note:` line on stderr (`--json`
    keeps stdout for the hits)."""
    env = {
        **os.environ,
        "CODECHUNKD_INDEX_DIR": index.settings.index.dir,
        "CODECHUNKD_RERANK_URL": server.url,
        "CODECHUNKD_RERANK_MODEL": "test-reranker",
    }
    argv = [EXE, "search", QUERY, "-k", "3", "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout)[0]["path"] == "art/stripes.py"
    assert "note:" not in done.stderr, done.stderr
    server.answer = lambda body: (503, b'{"error": "\x1b]0;owned\x07overloaded"}')
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout)[0]["path"] == "billing/invoice.py"
    assert "note: ranked without the reranker" in done.stderr and "HTTP 503" in done.stderr
    assert "\x1b" not in done.stderr and "\\x1b]0;owned\\x07overloaded" in done.stderr


def test_a_reranker_url_needs_a_model_and_a_known_protocol(tmp_path: Path) -> None:
    """`rerank.url` without `rerank.model` is refused at start-up (exit 2), naming the key;
    so is a protocol other than `cohere` and `tei`."""
    env = {**os.environ, "CODECHUNKD_RERANK_URL": "http://127.0.0.1:9/v1"}
    done = subprocess.run(
        [EXE, "search", "x", "--index-dir", str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 2 and "rerank.model" in done.stderr, done.stderr
    with pytest.raises(ConfigError, match=r"'rerank\.protocol' must be one of cohere, tei"):
        load_settings(env={"CODECHUNKD_RERANK_PROTOCOL": "grpc"})


def test_the_daemon_and_the_mcp_server_say_the_reranker_failed(
    index: Index, server: RerankServer, embedder
) -> None:  # type: ignore[no-untyped-def]
    """The daemon's answer and the MCP server's (answering from the index itself) carry the
    same note as the command line, beside their coverage; with the server well, none."""
    from codechunkd.daemon.answer import answer_search
    from codechunkd.daemon.embedder_lock import LockedEmbedder
    from codechunkd.mcp_server.backend import Backend
    from codechunkd.mcp_server.render import render_hits

    settings = _reranked(index, server).settings
    doc = SearchRequest(query=QUERY, k=3).to_json()
    locked = LockedEmbedder(embedder)

    def daemon() -> dict:  # type: ignore[type-arg]
        return answer_search(
            doc, index.store, settings, locked, text_only=None, partial=lambda repo: None
        )

    backend = Backend(settings)
    assert daemon()["hits"][0]["path"] == "art/stripes.py" and "note" not in daemon()
    hits, origin, about = backend.search(SearchRequest(query=QUERY, k=3))
    assert origin == "index" and hits[0]["path"] == "art/stripes.py" and "note" not in about
    server.answer = lambda body: (500, b"{}")
    answer = daemon()
    assert answer["hits"][0]["path"] == "billing/invoice.py"
    assert answer["note"].startswith("ranked without the reranker") and "HTTP 500" in answer["note"]
    hits, _, about = backend.search(SearchRequest(query=QUERY, k=3))
    assert hits[0]["path"] == "billing/invoice.py" and "HTTP 500" in about["note"]
    server.answer = lambda body: (500, b"\x1b[2Jwiped")  # the agent reads it escaped
    hits, via, about = backend.search(SearchRequest(query=QUERY, k=3))
    text = render_hits(QUERY, hits, via, [], about)
    assert "Note: ranked without the reranker" in text and "\\x1b[2Jwiped" in text
    assert "\x1b" not in text


def test_a_search_with_no_candidates_asks_the_reranker_nothing(
    index: Index, server: RerankServer
) -> None:
    """A filter that matches no chunk: no hits, no note, no request."""
    hits, notes = _reranked(index, server).answer(SearchRequest(query=QUERY, path="nowhere/*"))
    assert (hits, notes, server.seen) == ([], [], [])
