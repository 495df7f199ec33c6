"""A real HTTP embedding server on 127.0.0.1 that can hold its requests: what the tests of
text-first writes and of abandoned batches use as the model.

``POST /v1/embeddings`` is answered with hash vectors (``DIM`` wide), each text it is sent
recorded in ``inputs``; while ``stall`` is set each request is held (counted in ``held``)
until ``release`` is set; while ``gate`` is set each request is held until ``admit`` lets
one through (``admit_waiting``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIM = 8


class StallingServer(ThreadingHTTPServer):
    """The server; ``url`` is what ``embedding.remote_url`` takes."""

    daemon_threads = False  # server_close() joins every handler

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.stall = threading.Event()
        self.release = threading.Event()
        self.held = 0
        self.inputs: list[str] = []
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self._tickets = threading.Semaphore(0)
        self._admitted = 0

    def admit_waiting(self) -> bool:
        """Let through the gate a request that waits there and was not let through yet;
        whether there was one."""
        with self.lock:
            if self.held <= self._admitted:
                return False
            self._admitted += 1
        self._tickets.release()
        return True

    def open_gate(self) -> None:
        """No more gating: every request held at the gate, and every later one, goes on."""
        self.gate.clear()
        self._tickets.release(1_000_000)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that left (or was killed) while its request was held is the point of
        the tests that use this server."""


class _Handler(BaseHTTPRequestHandler):
    server: StallingServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.server.stall.is_set():
            with self.server.lock:
                self.server.held += 1
            self.server.release.wait()
        elif self.server.gate.is_set():
            with self.server.lock:
                self.server.held += 1
            self.server._tickets.acquire()
        texts = body["input"]
        with self.server.lock:
            self.server.inputs.extend(texts)
        data = [{"index": i, "embedding": vector(t)} for i, t in enumerate(texts)]
        answer = json.dumps({"model": body["model"], "data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def vector(text: str) -> list[float]:
    """The vector the server answers for ``text``: its hash, spread over ``DIM`` floats."""
    digest = hashlib.sha256(text.encode()).digest()
    return [(digest[i] - 127.5) / 128 for i in range(DIM)]


@contextlib.contextmanager
def serving() -> Iterator[StallingServer]:
    """A server running on its own thread; held requests are released and every handler
    joined on the way out."""
    srv = StallingServer()
    thread = threading.Thread(target=srv.serve_forever, name="embedding-server")
    thread.start()
    try:
        yield srv
    finally:
        srv.release.set()
        srv.open_gate()
        srv.shutdown()
        srv.server_close()
        thread.join()
