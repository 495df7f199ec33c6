"""The remote backend against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from structlog.testing import capture_logs
from tests.conftest import scaled

from codechunkd.config.settings import EmbeddingSettings
from codechunkd.embedding.embed_remote import EndpointMismatch, RemoteEmbedder
from codechunkd.embedding.embed_torch import TorchEmbedder
from codechunkd.embedding.embedder import make_embedder
from codechunkd.errors import ConfigError, EmbeddingError
from codechunkd.httpclient import retry_after

MODEL = "test-embed"


def hash_vector(text: str, dim: int) -> list[float]:
    """The server's deterministic, unnormalised vector of a text."""
    digest = hashlib.sha256(text.encode()).digest()
    return [(digest[i % 32] - 127.5) / 128 for i in range(dim)]


def expected(texts: list[str], dim: int = 8) -> npt.NDArray[np.float32]:
    v = np.array([hash_vector(t, dim) for t in texts], dtype=np.float32)
    return np.asarray(v / np.linalg.norm(v, axis=1, keepdims=True), dtype=np.float32)


@dataclass
class Seen:
    """One request as the server received it."""

    at: float
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class Action:
    """What the server does with one request; ``ok`` answers with vectors."""

    kind: str = "ok"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every handler thread

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out and left is part of the test, not an error."""


class EmbeddingServer:
    """A real HTTP server speaking ``POST /v1/embeddings``, scripted request by request."""

    def __init__(self) -> None:
        self.script: deque[Action] = deque()
        self.seen: list[Seen] = []
        self.dimension = 8
        self.model = MODEL
        self.gate = 0  # the first requests wait until this many are in flight at once
        self.delay = 0.0  # seconds each answer takes (a GPU server's time per batch)
        self.inflight = 0
        self.max_inflight = 0
        self.cond = threading.Condition()
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.handle(self, body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="embedding-server"
        )

    def handle(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        with self.cond:
            self.seen.append(Seen(time.monotonic(), body, dict(handler.headers)))
            action = self.script.popleft() if self.script else Action()
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            self.cond.notify_all()
            if self.gate:
                self.cond.wait_for(lambda: self.inflight >= self.gate, timeout=5)
                self.gate = 0
        answering = False
        try:
            if action.kind == "hang":
                self.release.wait(10)
                return
            if self.delay:
                time.sleep(self.delay)  # the modelled server's work, not a wait in the test
            with self.cond:  # done before the answer leaves: the client may send the next
                self.inflight -= 1
                answering = True
            if action.kind == "ok":
                data = [
                    {"object": "embedding", "index": i, "embedding": hash_vector(t, self.dimension)}
                    for i, t in enumerate(body["input"])
                ]
                data.reverse()  # the protocol orders by "index", not by position
                payload = {"object": "list", "model": self.model, "data": data}
                action.body = json.dumps(payload).encode()
            handler.send_response(action.status)
            for name, value in {"Content-Type": "application/json", **action.headers}.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(action.body)))
            handler.end_headers()
            handler.wfile.write(action.body)
        finally:
            if not answering:
                with self.cond:
                    self.inflight -= 1

    def wait_for_requests(self, count: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.seen) >= count, timeout=10)

    def __enter__(self) -> EmbeddingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    with EmbeddingServer() as srv:
        yield srv


def remote(url: str, **kw: Any) -> EmbeddingSettings:
    values: dict[str, Any] = {
        "backend": "remote",
        "remote_url": url,
        "remote_model": MODEL,
        "batch_size": 16,
        "retries": 3,
        "timeout": 5.0,
    }
    return EmbeddingSettings(**{**values, **kw})


def error(status: int, message: str = "", **headers: str) -> Action:
    body = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
    return Action(kind="status", status=status, headers=headers, body=body)


def test_batches_in_order_with_bounded_concurrency(server: EmbeddingServer) -> None:
    """Texts go out in batches, concurrently up to the limit, and come back in input order."""
    texts = [f"def f{i}(): return {i}" for i in range(70)] + ["def f3(): return 3"]
    server.gate = 3
    embedder = RemoteEmbedder(remote(server.url, concurrency=3), backoff=0.001)

    vectors = embedder.embed(texts)

    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert sorted((len(s.body["input"]) for s in server.seen), reverse=True) == [16, 16, 16, 16, 6]
    assert server.max_inflight == 3
    assert {MODEL} == {s.body["model"] for s in server.seen}
    assert embedder.dimension == 8
    assert embedder.model_id == f"remote:{MODEL}"


def test_default_concurrency_keeps_a_slow_server_busy(server: EmbeddingServer) -> None:
    """With a server taking 50 ms per request, the default concurrency is reached, the
    vectors equal those of one request at a time, and the texts take about 1/N the time."""
    texts = [f"def g{i}(x): return x * {i}" for i in range(8 * 16)]
    server.delay = 0.05
    default = EmbeddingSettings().concurrency
    assert default >= 4

    serial = RemoteEmbedder(remote(server.url, concurrency=1), backoff=0.001).embed(texts)
    assert server.max_inflight == 1
    serial_requests = len(server.seen)
    server.max_inflight = 0
    parallel = RemoteEmbedder(remote(server.url), backoff=0.001).embed(texts)

    assert server.max_inflight == default
    assert len(server.seen) - serial_requests == serial_requests == 8
    np.testing.assert_array_equal(parallel, serial)
    np.testing.assert_allclose(parallel, expected(texts), atol=1e-6)


def test_few_texts_are_spread_over_every_request(server: EmbeddingServer) -> None:
    """A call of fewer texts than full batches for all requests splits them evenly, so a
    daemon slice keeps every request in flight instead of sending one full batch."""
    texts = [f"text {i}" for i in range(40)]
    server.gate = 4
    RemoteEmbedder(remote(server.url, concurrency=4), backoff=0.001).embed(texts)
    assert sorted(len(s.body["input"]) for s in server.seen) == [10, 10, 10, 10]
    assert server.max_inflight == 4


def test_api_key_is_sent_and_never_logged(
    server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key from the named variable is a bearer token; logs and errors never show it."""
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-very-secret")
    server.script.extend([error(503), error(500), error(500)])
    settings = remote(server.url, api_key_env="TEST_EMBED_KEY", retries=2)
    with capture_logs() as logs, pytest.raises(EmbeddingError) as raised:
        RemoteEmbedder(settings, backoff=0.001).embed(["x"])
    assert {"Bearer sk-very-secret"} == {s.headers["Authorization"] for s in server.seen}
    assert [entry["attempt"] + 1 for entry in logs] == [2, 3]
    assert "sk-very-secret" not in repr(logs) + str(raised.value)
    with pytest.raises(ConfigError, match="NOT_SET_KEY"):
        RemoteEmbedder(remote(server.url, api_key_env="NOT_SET_KEY"))


def test_refused_connection_is_retried_then_fails() -> None:
    """Nothing listening: every attempt is refused, then one clear error."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    embedder = RemoteEmbedder(remote(f"http://127.0.0.1:{port}/v1", retries=2), backoff=0.001)
    with capture_logs() as logs, pytest.raises(EmbeddingError, match=r"failed 3 times.*connection"):
        embedder.embed(["x"])
    assert len(logs) == 2


def test_429_honours_retry_after(server: EmbeddingServer) -> None:
    """A 429 with Retry-After: 1 delays the next attempt by at least a second."""
    server.script.append(error(429, "slow down", **{"Retry-After": "1"}))
    vectors = RemoteEmbedder(remote(server.url), backoff=0.001).embed(["a"])
    np.testing.assert_allclose(vectors, expected(["a"]), atol=1e-6)
    assert len(server.seen) == 2
    assert server.seen[1].at - server.seen[0].at >= 0.95


def test_429_without_retry_after_backs_off(server: EmbeddingServer) -> None:
    """A 429 without Retry-After is retried after the exponential back-off."""
    server.script.extend([error(429), error(429)])
    settings = remote(server.url, concurrency=1)  # one request for both texts
    vectors = RemoteEmbedder(settings, backoff=0.001).embed(["a", "b"])
    np.testing.assert_allclose(vectors, expected(["a", "b"]), atol=1e-6)
    assert len(server.seen) == 3


def test_500_is_retried_and_then_reported(server: EmbeddingServer) -> None:
    """A 5xx is retried; when it persists the error names the status and the attempts."""
    server.script.append(error(500))
    assert RemoteEmbedder(remote(server.url), backoff=0.001).embed(["a"]).shape == (1, 8)
    server.script.extend([error(500, "model crashed")] * 3)
    with pytest.raises(EmbeddingError, match=r"failed 3 times, last: HTTP 500 model crashed"):
        RemoteEmbedder(remote(server.url, retries=2), backoff=0.001).embed(["a"])
    assert len(server.seen) == 5


def test_client_error_is_not_retried(server: EmbeddingServer) -> None:
    """A 400 will not get better: it fails at once with the server's message."""
    server.script.append(error(400, "input is too long"))
    with pytest.raises(EmbeddingError, match="HTTP 400: input is too long"):
        RemoteEmbedder(remote(server.url), backoff=0.001).embed(["a"])
    assert len(server.seen) == 1


def test_timeout_is_retried(server: EmbeddingServer) -> None:
    """A request the server does not answer in time is retried, and reported if it persists."""
    server.script.append(Action(kind="hang"))
    settings = remote(server.url, timeout=0.3)
    vectors = RemoteEmbedder(settings, backoff=0.001).embed(["a"])
    np.testing.assert_allclose(vectors, expected(["a"]), atol=1e-6)
    server.script.extend([Action(kind="hang")] * 2)
    with pytest.raises(EmbeddingError, match="failed 2 times, last: timed out"):
        RemoteEmbedder(remote(server.url, timeout=0.3, retries=1), backoff=0.001).embed(["a"])


def test_wrong_dimension_is_a_mismatch(server: EmbeddingServer) -> None:
    """Vectors of another dimension than the index's are refused, not stored."""
    server.dimension = 5
    with pytest.raises(EndpointMismatch, match="dimension 5, expected 8") as raised:
        RemoteEmbedder(remote(server.url, remote_dimension=8)).embed(["a"])
    assert (raised.value.expected, raised.value.found) == (8, 5)

    learned = RemoteEmbedder(remote(server.url))
    assert learned.dimension == 5
    server.dimension = 6
    with pytest.raises(EndpointMismatch, match="dimension 6, expected 5"):
        learned.embed(["b"])


def test_wrong_model_is_a_mismatch(server: EmbeddingServer) -> None:
    """An answer from another model is refused; Ollama's ':latest' tag is the same model."""
    server.model = "other-model"
    with pytest.raises(EndpointMismatch, match="model 'other-model', expected 'test-embed'"):
        RemoteEmbedder(remote(server.url)).embed(["a"])
    server.model = f"{MODEL}:latest"
    assert RemoteEmbedder(remote(server.url)).embed(["a"]).shape == (1, 8)


def test_stop_cuts_a_back_off_short(server: EmbeddingServer) -> None:
    """Shutdown does not wait out a long Retry-After."""
    server.script.append(error(429, **{"Retry-After": "60"}))
    stop = threading.Event()
    embedder = RemoteEmbedder(remote(server.url), stop=stop)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            embedder.embed(["a"])
        except EmbeddingError as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    with capture_logs() as logs:
        worker.start()
        deadline = time.monotonic() + scaled(10)
        while not logs and time.monotonic() < deadline:  # until it is in its back-off
            stop.wait(0.01)
        assert logs[0]["delay_s"] >= 60
        stop.set()
        worker.join(timeout=scaled(10))
    assert not worker.is_alive()
    assert len(errors) == 1
    assert "cancelled" in str(errors[0])


def test_settings_are_checked() -> None:
    """A remote backend without URL or model, or with a non-http URL, is a config error."""
    with pytest.raises(ConfigError, match="remote_url"):
        make_embedder(EmbeddingSettings(backend="remote", remote_model=MODEL))
    with pytest.raises(ConfigError, match="remote_model"):
        make_embedder(EmbeddingSettings(backend="remote", remote_url="http://127.0.0.1:1/v1"))
    with pytest.raises(ConfigError, match="http"):
        make_embedder(remote("file:///etc/passwd"))
    embedder = make_embedder(remote("http://user:pw@127.0.0.1:1/v1"))
    assert isinstance(embedder, RemoteEmbedder)
    assert "pw" not in repr(embedder)
    assert embedder.model_id != TorchEmbedder(EmbeddingSettings()).model_id


def test_retry_after_forms() -> None:
    """Retry-After is delta-seconds or an HTTP date."""
    now = 1_700_000_000.0
    assert retry_after("3", now) == 3.0
    assert retry_after("Tue, 14 Nov 2023 22:13:30 GMT", now) == 10.0
    assert retry_after("soon", now) is None
    assert retry_after(None, now) is None


def _answer(vectors: list[list[float]], model: str = MODEL) -> Action:
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    body = json.dumps(
        {"object": "list", "model": model, "data": data}
    ).encode()  # NaN: as Python writes it
    return Action(kind="status", status=200, body=body)


def test_unusable_vectors_are_asked_again_then_an_error(server: EmbeddingServer) -> None:
    """An answer holding a NaN, an infinity (a number past float32) or an all-zero vector is
    never returned: the request is sent again, and when the server keeps answering so, the
    error says which vectors were unusable (nothing reaches the cache or the index)."""
    good = hash_vector("a", 8)
    server.script.append(_answer([[float("nan"), *good[1:]]]))
    vectors = RemoteEmbedder(remote(server.url), backoff=0.001).embed(["a"])
    np.testing.assert_allclose(vectors, expected(["a"]), atol=1e-6)
    assert len(server.seen) == 2

    server.script.extend([_answer([[0.0] * 8, [1e39, *good[1:]]])] * 2)
    with pytest.raises(
        EmbeddingError,
        match=r"failed 2 times, last: returned unusable vectors "
        r"for 2 of 2 texts \(1 not finite, 1 zero length\)",
    ):
        RemoteEmbedder(remote(server.url, retries=1, concurrency=1), backoff=0.001).embed(
            ["a", "b"]
        )
