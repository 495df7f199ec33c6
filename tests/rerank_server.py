"""A real reranking server on 127.0.0.1: ``POST /v1/rerank`` in the shape of Cohere's API,
or text-embeddings-inference's when the request is (``texts``).

By default it scores each document by how often ``word`` occurs in it; ``answer`` (a
function of the request's body) replaces the whole answer, as (status, body bytes), and
``hang`` holds every answer until the server stops.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every handler thread

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out and left is part of the test, not an error."""


class RerankServer:
    def __init__(self, word: str = "zebra") -> None:
        self.word = word
        self.seen: list[tuple[dict[str, Any], dict[str, str]]] = []
        self.answer: Callable[[dict[str, Any]], tuple[int, bytes]] | None = None
        self.hang = threading.Event()
        self._stopping = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.seen.append((body, dict(self.headers)))
                if owner.hang.is_set():
                    owner._stopping.wait()
                    return
                status, out = owner.answer(body) if owner.answer else owner.scored(body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="rerank-server"
        )

    def scored(self, body: dict[str, Any]) -> tuple[int, bytes]:
        """Cohere's answer: every document, best first, scored by ``word``'s count."""
        if "texts" in body:  # text-embeddings-inference: a bare list of {index, score}
            scores = [doc.count(self.word) for doc in body["texts"]]
            out = [{"index": i, "score": float(x)} for i, x in enumerate(scores)]
            return 200, json.dumps(out).encode()
        scores = [doc.count(self.word) for doc in body["documents"]]
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        results = [{"index": i, "relevance_score": float(scores[i])} for i in order]
        return 200, json.dumps({"results": results}).encode()

    def __enter__(self) -> RerankServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()
