"""The HTTP clients (embeddings, chat, the S3 lease) against hostile servers on 127.0.0.1.

Each server here is a real TCP server speaking just enough HTTP/1.1 to do harm: an
endless or huge body, a body trickled a byte at a time, a ``Retry-After`` of a day or of
1e12 s, JSON nested 30,000 deep, rows of the wrong shape, an API key echoed escaped.  The
clients must fail with their own error (which the daemon handles: search falls back to
full-text) within their timeout, never hang, grow without bound or crash.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from codechunkd.config.settings import EmbeddingSettings, SummarySettings
from codechunkd.embedding.embed_remote import RemoteEmbedder
from codechunkd.errors import BadAnswer, EmbeddingError, EndpointUnavailable, StoreError
from codechunkd.httpclient import backoff, retry_after
from codechunkd.llm.client import ChatClient
from codechunkd.storage.lease import Lease
from codechunkd.storage.objectstore import ObjectStore

KEY = "sk-AAAA/BBBB+CCCC/secret-key-0123456789"
Reply = Callable[[socket.socket, bytes], None]
"""What the server does with one request: (the connection, the request's head and body)."""


class Peer:
    """A real server on 127.0.0.1: the n-th request gets ``replies[n]`` (the last repeats)."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[bytes] = []
        self.stop = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.threads: list[threading.Thread] = []
        self.accepter = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        self.sock.settimeout(0.05)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            worker = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(worker)
            worker.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data and (part := conn.recv(65536)):
                data += part
            head = data.partition(b"\r\n\r\n")[0].lower()
            length = int(head.partition(b"content-length:")[2].split(b"\r\n")[0] or 0)
            while len(data.partition(b"\r\n\r\n")[2]) < length and (part := conn.recv(65536)):
                data += part
            self.requests.append(data)
            reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
            with contextlib.suppress(OSError):  # the client gave up and left: the point here
                reply(conn, data)

    def __enter__(self) -> Peer:
        self.accepter.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.accepter.join()
        self.sock.close()
        for worker in self.threads:
            worker.join(timeout=10)


def answer(status: int, body: bytes, **headers: str) -> Reply:
    def reply(conn: socket.socket, request: bytes) -> None:
        extra = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
        conn.sendall(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n".encode()
            + body
        )

    return reply


def endless(status: int, stop: threading.Event, most: int) -> Reply:
    """A chunked body of 1 MiB pieces, ``most`` bytes of it (endless, as far as a client
    without a cap can tell: it would have grown to gigabytes)."""

    def reply(conn: socket.socket, request: bytes) -> None:
        conn.sendall(f"HTTP/1.1 {status} X\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        piece = b" " * (1 << 20)
        for _ in range(most >> 20):
            if stop.is_set():
                return
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.sendall(b"0\r\n\r\n")

    return reply


def trickle(stop: threading.Event, seconds: float) -> Reply:
    """A 200 whose body comes a byte every 0.2 s, for ``seconds`` (then the connection
    closes: a client without a deadline waits all of it)."""

    def reply(conn: socket.socket, request: bytes) -> None:
        conn.sendall(b'HTTP/1.1 200 OK\r\nETag: "e"\r\nContent-Length: 100000\r\n\r\n')
        end = time.monotonic() + seconds
        while time.monotonic() < end and not stop.wait(0.2):
            conn.sendall(b" ")

    return reply


def continues(stop: threading.Event, seconds: float) -> Reply:
    """``100 Continue`` every 0.2 s, for ``seconds``: ``http.client`` skips any number of
    them, each within the socket's timeout, before the real status line."""

    def reply(conn: socket.socket, request: bytes) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not stop.wait(0.2):
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")

    return reply


def embeddings(vectors: list[list[float]]) -> Reply:
    data = [{"index": i, "embedding": v} for i, v in enumerate(vectors)]
    return answer(200, json.dumps({"model": "m", "data": data}).encode())


def chat(text: str) -> Reply:
    doc = {"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}
    return answer(200, json.dumps(doc).encode())


def embedder(peer: Peer, **kw: Any) -> RemoteEmbedder:
    settings: dict[str, Any] = {
        "backend": "remote",
        "remote_url": peer.url,
        "remote_model": "m",
        "timeout": 1.0,
        "retries": 0,
        "concurrency": 1,
        "api_key_env": "EMB_KEY",
    }
    extra = {k: kw.pop(k) for k in ("max_delay", "stop") if k in kw}
    return RemoteEmbedder(
        EmbeddingSettings(**{**settings, **kw}), environ={"EMB_KEY": KEY}, backoff=0.001, **extra
    )


def chat_client(peer: Peer, **kw: Any) -> ChatClient:
    settings: dict[str, Any] = {
        "url": peer.url,
        "model": "m",
        "timeout": 1.0,
        "retries": 0,
        "requests_per_minute": 0,
        "api_key_env": "LLM_KEY",
    }
    extra = {k: kw.pop(k) for k in ("max_delay", "stop") if k in kw}
    return ChatClient(
        SummarySettings(**{**settings, **kw}), environ={"LLM_KEY": KEY}, backoff=0.001, **extra
    )


def lease(peer: Peer, ttl: float = 6.0) -> Lease:
    store = ObjectStore(
        endpoint=f"http://127.0.0.1:{peer.port}",
        allow_http=True,
        access_key_id="AKIAEXAMPLE",
        secret_access_key="s3cr3t",
    )
    return Lease("s3://bucket/idx", store, ttl=ttl)  # a request's timeout: 1 s


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


DEEP = b"[" * 30_000 + b"]" * 30_000  # nested past the JSON parser's recursion limit


# -- 2: bodies are read up to a cap ------------------------------------------------------


def test_an_endless_answer_is_cut_at_the_cap(stop: threading.Event) -> None:
    """A 200 whose chunked body never ends (1.5 GB before the cap) fails at 64 MiB with the
    client's own, final error; an endless error body leaves the status's error intact;
    the S3 client reads no more than 64 KiB of an object."""
    huge = endless(200, stop, (64 + 8) << 20)
    with Peer(huge) as peer:
        with pytest.raises(EmbeddingError, match="larger than 64 MiB"):
            embedder(peer, retries=3).embed(["a"])
        assert len(peer.requests) == 1  # not retried: it would come again
        with pytest.raises(EndpointUnavailable, match="larger than 64 MiB"):
            chat_client(peer).complete([{"role": "user", "content": "hi"}])
    unread = r"HTTP 400: \(its message unread: TooLarge"
    with Peer(endless(400, stop, 8 << 20)) as peer, pytest.raises(EmbeddingError, match=unread):
        embedder(peer).embed(["a"])
    with Peer(endless(200, stop, 8 << 20)) as peer, pytest.raises(StoreError, match="larger"):
        lease(peer).holder()


# -- 3: Retry-After is bounded -----------------------------------------------------------


@pytest.mark.parametrize("asked", ["1e12", "inf", "Fri, 31 Dec 9999 23:59:59 GMT", "86400"])
def test_a_retry_after_is_waited_at_most_the_longest_delay(
    asked: str, stop: threading.Event
) -> None:
    """A ``Retry-After`` of a day, of 1e12 s or of the year 9999 (an OverflowError in the
    wait before) is waited no longer than the client's longest delay, then retried."""
    assert backoff(3, retry_after(asked, time.time()), base=0.5, limit=0.2) <= 0.2
    busy = answer(503, b'{"error": {"message": "busy"}}', Retry_After=asked)
    with Peer(busy, embeddings([[0.5] * 8])) as peer:
        shapes: list[object] = []
        client = embedder(peer, retries=1, max_delay=0.2, stop=stop)
        worker = threading.Thread(target=lambda: shapes.append(client.embed(["a"]).shape))
        worker.start()
        worker.join(timeout=5)
        stop.set()  # before the fix: still waiting (or crashed); this ends its wait
        worker.join(timeout=10)
    assert shapes == [(1, 8)]


def test_a_retry_after_of_a_day_pauses_the_chat_client_no_longer_than_its_longest_delay(
    stop: threading.Event,
) -> None:
    """A 503 asking for a day paused every later request of the client for that day."""
    busy = answer(503, b'{"error": {"message": "busy"}}', Retry_After="86400")
    with Peer(busy, chat("Adds two numbers and returns the sum.")) as peer:
        client = chat_client(peer, max_delay=0.2, stop=stop)
        with pytest.raises(EndpointUnavailable):
            client.complete([{"role": "user", "content": "hi"}])
        texts: list[str] = []
        second = threading.Thread(
            target=lambda: texts.append(client.complete([{"role": "user", "content": "hi"}]).text)
        )
        second.start()
        second.join(timeout=10)
        stop.set()  # before the fix: still paused; this ends its wait
        second.join(timeout=10)
    assert texts == ["Adds two numbers and returns the sum."]


# -- 4: an attempt ends within its timeout -----------------------------------------------


@pytest.mark.parametrize("hold", [trickle, continues])
def test_a_trickled_answer_times_out_within_the_timeout(
    hold: Callable[[threading.Event, float], Reply], stop: threading.Event
) -> None:
    """A body sent a byte at a time, or endless interim ``100 Continue`` answers ahead of
    the status, kept a call with timeout = 1 s waiting as long as the server went on (every
    socket read got its bytes in time); the lease's renewal thread with it, and
    ``release()`` joined that thread with no limit."""
    with Peer(hold(stop, 15)) as peer:
        for call, error in [
            (lambda: embedder(peer).embed(["a"]), EmbeddingError),
            (
                lambda: chat_client(peer).complete([{"role": "user", "content": "hi"}]),
                EndpointUnavailable,
            ),
            (lambda: lease(peer).holder(), StoreError),
        ]:
            started = time.monotonic()
            with pytest.raises(error, match=r"timed out|took longer|100 Continue"):
                call()
            assert time.monotonic() - started < 4
        stop.set()  # the server's 15 s end now: leaving the block joins its threads
    again = threading.Event()
    taken = answer(200, b"", ETag='"e1"')
    with Peer(taken, hold(again, 15)) as peer:
        held = lease(peer, ttl=1.5)  # renewed every 0.5 s
        held.acquire()
        while len(peer.requests) < 2:  # the renewal is reading the trickle
            time.sleep(0.05)
        started = time.monotonic()
        held.release()
        assert time.monotonic() - started < 4
        again.set()


# -- 5, 6, 7: malformed answers are the clients' own errors -------------------------------


def rows(*items: object) -> bytes:
    return json.dumps({"model": "m", "data": list(items)}).encode()


@pytest.mark.parametrize(
    ("body", "texts"),
    [
        (DEEP, 1),
        (rows([1.0, 2.0]), 1),
        (rows({"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": 5}), 2),
        (rows({"index": 1e30, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}), 2),
        (rows({"index": 10**30, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}), 2),
        (rows({"index": "zero", "embedding": [1.0, 2.0]}), 1),
        (rows({"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}), 2),
    ],
)
def test_a_malformed_embedding_answer_is_an_embedding_error(body: bytes, texts: int) -> None:
    """Deep JSON (RecursionError), a row that is a list (AttributeError), an index of
    1e30 or a string (OverflowError, ValueError), an embedding that is a number
    (TypeError) or a duplicate index: each an ``EmbeddingError``, which search handles."""
    with Peer(answer(200, body)) as peer, pytest.raises(EmbeddingError):
        embedder(peer).embed([f"t{i}" for i in range(texts)])


def test_a_deeply_nested_chat_answer_is_a_bad_answer() -> None:
    """JSON nested past the parser's depth (RecursionError) from the summary endpoint is a
    ``BadAnswer`` ("not JSON"), which the summarizer handles, not a crashed run."""
    with Peer(answer(200, DEEP)) as peer, pytest.raises(BadAnswer, match="not JSON"):
        chat_client(peer).complete([{"role": "user", "content": "hi"}])


@pytest.mark.parametrize(
    "body",
    [b'{"id":"x","host":"h","pid":Infinity,"what":"w","expires_at":1e300}', DEEP],
)
def test_a_damaged_lease_object_is_an_unreadable_lease(body: bytes) -> None:
    """A pid of Infinity (OverflowError) or deep JSON (RecursionError) is read as other
    damage is: a lease with no holder to name, which ``acquire`` takes over."""
    with Peer(answer(200, body, ETag='"e1"')) as peer:
        assert lease(peer).holder() == (None, '"e1"')


# -- 8: the key is never shown -------------------------------------------------------------


def test_a_key_echoed_json_escaped_is_scrubbed() -> None:
    """PHP's json_encode writes ``/`` as ``\\/``: the raw text did not hold the key, the
    decoded message did."""
    escaped = KEY.replace("/", "\\/")
    body = b'{"error": {"message": "invalid api key: %s"}}' % escaped.encode()
    for status in (401, 503):
        with Peer(answer(status, body)) as peer:
            with pytest.raises(EndpointUnavailable) as chat_error:
                chat_client(peer).complete([{"role": "user", "content": "hi"}])
            with pytest.raises(EmbeddingError) as embed_error:
                embedder(peer).embed(["a"])
        for error in (chat_error.value, embed_error.value):
            assert "invalid api key: ***" in str(error)
            assert "secret-key" not in str(error)


# -- 9: the dimension is learned from a usable answer only ---------------------------------


def test_a_glitch_answer_does_not_fix_the_learned_dimension() -> None:
    """With ``remote_dimension = 0``, an empty vector or a 3-wide one holding a NaN (both
    refused) fixed the dimension (0, 3) for the life of the process before."""
    good = [0.1 * (i + 1) for i in range(8)]
    with Peer(embeddings([[]]), embeddings([[float("nan"), 1.0, 2.0]]), embeddings([good])) as peer:
        learner = embedder(peer, remote_dimension=0)
        for _ in range(2):
            with pytest.raises(EmbeddingError, match="unusable"):
                learner.embed(["a"])
        vectors = learner.embed(["a"])
        assert learner.dimension == 8
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), [1.0], atol=1e-6)


def _vectors_for_each_text(conn: socket.socket, request: bytes) -> None:
    """A sane embeddings server: one 8-wide vector per text of the request, model "m"."""
    texts = json.loads(request.partition(b"\r\n\r\n")[2])["input"]
    rows = [{"index": i, "embedding": [1.0, *[(i % 7) / 10] * 7]} for i in range(len(texts))]
    answer(200, json.dumps({"model": "m", "data": rows}).encode())(conn, request)


def test_a_search_without_a_daemon_whose_embedding_fails_prints_no_traceback(
    tmp_path: Any,
) -> None:
    """`codechunkd search` with no daemon warms the query model on a thread while the index
    opens: an embedding server failing then printed that thread's traceback ("Exception in
    thread") before the search's own one-line error."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import Repo

    repo = Repo(tmp_path / "repo")
    repo.write("m.py", 'def add_numbers(a, b):\n    """Add two numbers."""\n    return a + b\n')
    repo.commit()
    exe = str(Path(sys.executable).parent / "codechunkd")
    env = {
        **__import__("os").environ,
        "CODECHUNKD_INDEX_DIR": str(tmp_path / "index"),
        "CODECHUNKD_EMBEDDING_BACKEND": "remote",
        "CODECHUNKD_EMBEDDING_REMOTE_MODEL": "m",
        "CODECHUNKD_EMBEDDING_REMOTE_DIMENSION": "8",
        "CODECHUNKD_EMBEDDING_TIMEOUT": "5",
        "CODECHUNKD_EMBEDDING_RETRIES": "0",
    }

    def cli(*argv: str, url: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [exe, *argv],
            env={**env, "CODECHUNKD_EMBEDDING_REMOTE_URL": url},
            capture_output=True,
            text=True,
            timeout=120,
        )

    with Peer(_vectors_for_each_text) as good:
        done = cli("index", str(repo.path), url=good.url)
        assert done.returncode == 0, done.stderr
    with Peer(answer(500, b'{"error": {"message": "down"}}')) as bad:
        done = cli("search", "add_numbers", url=bad.url)
    assert done.returncode == 6, done  # an embedding error, said once
    assert done.stderr.count("\n") == 1 and "HTTP 500 down" in done.stderr, done.stderr
