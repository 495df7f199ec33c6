"""The streamable HTTP transport (``mcp --http``): a bearer token, loopback only, bounded waits.

Owns the token file (made on first use, refused unless private), ``BearerToken`` (401 before
any MCP code or index is reached), the connection limits (``HEADER_TIMEOUT_S``,
``KEEP_ALIVE_S``, ``MAX_HEAD_BYTES``) and ``serve_http``, which binds 127.0.0.1 and runs
uvicorn (imported only here, when serving).  The SDK's own Host/Origin checks and its 4 MiB
body limit apply within.  It must not know the tools (tools.py) nor stdio (stdio.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import re
import secrets
import socket
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

from codechunkd import platform
from codechunkd.errors import CodechunkdError

TOKEN_NAME = "mcp-token"  # noqa: S105 - a file name, not a secret
"""The HTTP transport's token file, in codechunkd's config folder."""
HEADER_TIMEOUT_S = 10.0
"""A connection that has not sent a whole request head this long after connecting (or
after its last answer's first new byte) is closed: partial headers hold nothing for long."""
KEEP_ALIVE_S = 5
"""An idle kept-alive connection is closed this long after its last answer (uvicorn's)."""
MAX_HEAD_BYTES = 16 * 1024
"""The largest request head (request line and headers) read (h11's default)."""


def token_path() -> Path:
    return platform.user_dir("config") / "codechunkd" / TOKEN_NAME


def _read_token(path: Path) -> str:
    """The token in ``path``, which must be a regular file of ours that only we can read."""
    try:  # non-blocking: a FIFO in its place must not hold the start
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise CodechunkdError(
            f"cannot read the MCP token file {path}: {exc.strerror} "
            "(delete it and a new token is made)"
        ) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            problem = "is not a regular file"
        elif info.st_uid != os.geteuid():
            problem = f"is owned by uid {info.st_uid}, not by you (uid {os.geteuid()})"
        elif info.st_mode & 0o077:
            problem = (
                f"has mode {stat.S_IMODE(info.st_mode):04o}: others may read it "
                f"(`chmod 600 {path}`, or delete it for a new token)"
            )
        else:
            problem = ""
        if problem:
            raise CodechunkdError(f"refusing the MCP token file {path}: it {problem}")
        token = os.read(fd, 1024).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if not re.fullmatch(r"[A-Za-z0-9_-]{32,}", token):
        raise CodechunkdError(
            f"the MCP token file {path} holds no token (delete it and a new one is made)"
        )
    return token


def http_token(path: Path | None = None) -> str:
    """The bearer token of ``mcp --http``: the one in the token file, made on first use.

    Made with ``secrets.token_urlsafe`` in a private temporary file linked into place, so
    the file appears whole and 0600, and two servers starting at once end up with one token
    (the second ``link`` fails and that server reads the first's).
    """
    path = path or token_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not os.path.lexists(path):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32) + "\n")
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return _read_token(path)


class BearerToken:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` gets 401.

    Outermost, so no MCP code (and no index) is reached by anyone without the token; the
    SDK's Host/Origin checks and its 4 MiB body limit still apply within.  The token is
    compared in constant time.
    """

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def allowed(self, headers: Sequence[tuple[bytes, bytes]]) -> bool:
        for name, value in headers:
            if name.lower() == b"authorization":
                scheme, _, given = value.strip().partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(
                    given.strip(), self._token
                )
        return False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.allowed(scope.get("headers") or ()):
            await self.app(scope, receive, send)
            return
        body = b"401 Unauthorized: send `Authorization: Bearer <token>` (docs/mcp.md)\n"
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="codechunkd"'),
                    # closed once answered: a body still trickling in holds nothing
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _protocol() -> type[Any]:
    """uvicorn's h11 protocol, closing connections whose request head does not come."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadTimeout(H11Protocol):
        """Closes a connection that connected (or began a request) and sent no whole head
        within ``HEADER_TIMEOUT_S``; uvicorn itself waits for one forever."""

        _head_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._head_late)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            self._head_timer = None
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting and self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._arm()  # a head begun: it has until the deadline to end
            else:
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeadTimeout


async def serve_http(server: MCPServer, port: int, token: str) -> int:
    """Streamable HTTP on 127.0.0.1 only, behind the bearer token; the URL and the token are
    printed on stderr once listening."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        # listening before the URL is printed: a client that connects on reading it is
        # queued, not refused (uvicorn's own listen comes later, once its startup has run)
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        raise CodechunkdError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from exc
    bound = sock.getsockname()[1]
    app = BearerToken(server.streamable_http_app(host="127.0.0.1"), token)
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        http=_protocol(),
        timeout_keep_alive=KEEP_ALIVE_S,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
    )
    sys.stderr.write(
        f"codechunkd mcp: serving on http://127.0.0.1:{bound}/mcp\n"
        f"codechunkd mcp: send the header `Authorization: Bearer {token}` "
        f"(the token is kept in {token_path()})\n"
    )
    sys.stderr.flush()
    await uvicorn.Server(config).serve(sockets=[sock])
    return 0
