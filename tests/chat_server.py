"""A real chat-completions server on 127.0.0.1, scripted request by request.

It answers ``POST /v1/chat/completions`` with a deterministic summary of the
chunk named in the prompt, or does what the next scripted :class:`Action`
says: an HTTP error (with or without ``Retry-After``), a body that is not
JSON, a body cut short, an answer cut short by ``max_tokens``, a hang past
the client's timeout, or any reply text.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "test-chat"
_CHUNK = re.compile(r"^Chunk: (.*)$", re.MULTILINE)


def reply_for(prompt: str) -> str:
    """The server's deterministic summary of a prompt: names the chunk, plus a marker word."""
    found = _CHUNK.search(prompt)
    what = found.group(1) if found else "code"
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:8]
    return f"Here is a summary:\nThe {what} does its job carefully; marker zq{digest}."


@dataclass
class Seen:
    """One request as the server received it."""

    at: float
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def prompt(self) -> str:
        return str(self.body["messages"][-1]["content"])


@dataclass
class Action:
    """What the server does with one request.

    ``kind``: ``ok`` (a summary; ``text`` replaces it), ``status`` (``status``,
    ``headers``, ``body``), ``raw`` (``body`` sent as is with 200), ``cut``
    (a Content-Length longer than the body, then the connection closes),
    ``length`` (``finish_reason: length``) or ``hang`` (no answer until the
    server stops or ``hang_s`` passes).
    """

    kind: str = "ok"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    text: str | None = None
    hang_s: float = 5.0


def error(status: int, message: str = "boom", **headers: str) -> Action:
    body = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
    return Action(kind="status", status=status, headers=headers, body=body)


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every handler thread

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out and left is part of the test, not an error."""


class ChatServer:
    """Speaks the chat-completions protocol; ``script`` overrides the next answers."""

    def __init__(self) -> None:
        self.script: deque[Action] = deque()
        self.seen: list[Seen] = []
        self.model = MODEL
        self.reply: Callable[[str], str] = reply_for
        self.inflight = 0
        self.max_inflight = 0
        self.gate = 0  # the first requests wait until this many are in flight at once
        self.gate_s = 5.0  # ... or this long
        self.cond = threading.Condition()
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.handle(self, body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="chat-server"
        )

    @property
    def requests(self) -> int:
        with self.cond:
            return len(self.seen)

    def handle(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        with self.cond:
            self.seen.append(Seen(time.monotonic(), body, dict(handler.headers)))
            action = self.script.popleft() if self.script else Action()
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            self.cond.notify_all()
            if self.gate:
                self.cond.wait_for(lambda: self.inflight >= self.gate, timeout=self.gate_s)
                self.gate = 0
        answered = False

        def answering() -> None:
            """Done before the answer leaves: the client may send its next request as soon
            as it has read this one's, before this thread runs again."""
            nonlocal answered
            with self.cond:
                if not answered:
                    self.inflight -= 1
                    answered = True

        try:
            self._answer(handler, body, action, answering)
        finally:
            answering()

    def _answer(
        self,
        handler: BaseHTTPRequestHandler,
        body: dict[str, Any],
        a: Action,
        answering: Callable[[], None],
    ) -> None:
        if a.kind == "hang":
            self.release.wait(a.hang_s)
            handler.close_connection = True
            return
        if a.kind in {"ok", "length", "cut"}:
            prompt = str(body["messages"][-1]["content"])
            text = a.text if a.text is not None else self.reply(prompt)
            payload = {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "length" if a.kind == "length" else "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": len(prompt) // 4,
                    "completion_tokens": len(text) // 4,
                    "total_tokens": len(prompt) // 4 + len(text) // 4,
                },
            }
            a.body = json.dumps(payload).encode()
        length = len(a.body)
        if a.kind == "cut":
            length, a.body = len(a.body), a.body[: len(a.body) // 2]
        answering()
        handler.send_response(a.status)
        for name, value in {"Content-Type": "application/json", **a.headers}.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(length))
        if a.kind == "cut":
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        handler.wfile.write(a.body)
        handler.wfile.flush()

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.seen) >= count, timeout=timeout)

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
