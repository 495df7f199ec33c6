"""The stdio transport (what agents spawn): every frame gets an answer.

Owns ``AnsweredFrames``, the read stream that answers a frame the SDK cannot read with a
JSON-RPC error instead of dropping it, and ``serve_stdio``, which runs the SDK's low-level
server on it.  It must not know the tools (tools.py) nor the HTTP transport (http.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
)
from pydantic import ValidationError

from codechunkd import logs

log = logs.get_logger("codechunkd.mcp")


def _request_id(value: Any) -> str | int | None:
    """A request id that can be sent back (UTF-8 text or an integer), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and len(value) <= 200:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return value
    return None


def frame_error(exc: Exception) -> tuple[JSONRPCError, str]:
    """The JSON-RPC error that answers a frame the SDK could not read, and why (for the log).

    Not JSON, or JSON that is not Unicode text (a lone surrogate such as ``"\\ud800"``,
    which the SDK's parser refuses): ``-32700`` parse error.  JSON that is no JSON-RPC
    message: ``-32600`` invalid request.  The request's id is sent back when the frame has
    one, so the client's pending request ends with this error instead of waiting.
    """
    errors: list[Any] = exc.errors(include_url=False) if isinstance(exc, ValidationError) else []
    first: dict[str, Any] = dict(errors[0]) if errors else {}
    doc: Any = None
    if first.get("type") == "json_invalid":
        code, raw = PARSE_ERROR, first.get("input")
        why = str((first.get("ctx") or {}).get("error") or first.get("msg"))
        try:
            doc = json.loads(raw) if isinstance(raw, str) else None
        except (ValueError, RecursionError):  # nested past the parser's depth: no id to read
            doc = None
        if doc is not None and LONE_SURROGATE.search(raw or ""):
            why = "a string holds a lone surrogate escape (e.g. \\ud800), which is not Unicode"
    elif errors:
        code, why = INVALID_REQUEST, "not a JSON-RPC 2.0 request, notification or response"
        doc = next((e["input"] for e in errors if isinstance(e.get("input"), dict)), None)
    else:
        code, why = PARSE_ERROR, f"unreadable frame ({type(exc).__name__})"
    rid = _request_id(doc.get("id")) if isinstance(doc, dict) else None
    word = "Parse error" if code == PARSE_ERROR else "Invalid request"
    error = JSONRPCError(
        jsonrpc="2.0", id=rid, error=ErrorData(code=code, message=f"{word}: {why}")
    )
    return error, why


def request_without_id(item: Any) -> tuple[JSONRPCError, str] | None:
    """The ``-32600`` answer to a request the SDK read as a notification, else None.

    MCP's notifications are the ``notifications/…`` methods, and a request's id is a string
    or an integer.  A ``tools/call`` whose id is ``1.5``, ``null``, ``true`` or an object, or
    missing, the SDK reads as a notification and drops: the client would wait for ever.
    """
    message = getattr(item, "message", None)
    if not isinstance(message, JSONRPCNotification) or message.method.startswith("notifications/"):
        return None
    why = "a request needs a string or integer id (MCP notifications are notifications/…)"
    error = ErrorData(code=INVALID_REQUEST, message=f"Invalid request: {why}")
    return JSONRPCError(jsonrpc="2.0", id=None, error=error), why


LONE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A ``\\uD800``-``\\uDFFF`` escape: half of a pair, or alone (only then is the JSON refused)."""


class AnsweredFrames:
    """The stdio transport's read stream, with each unreadable frame answered and logged.

    The SDK passes a frame it cannot read on as an exception, which its dispatcher drops
    without a word: the client then waits for an answer that never comes.  This stream
    answers it with a JSON-RPC error (``frame_error``), logs a warning, and reads on.
    """

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if isinstance(item, Exception):
                error, why = frame_error(item)
            elif (message := request_without_id(item)) is not None:
                error, why = message
            else:
                return item
            log.warning("mcp_bad_frame", code=error.error.code, id=error.id, reason=why)
            await self._write.send(SessionMessage(error))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweredFrames:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweredFrames:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def serve_stdio(server: MCPServer) -> None:
    """``MCPServer.run_stdio_async``, with every frame answered (``AnsweredFrames``)."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # what run_stdio_async runs (SDK 2.3)
    async with stdio_server() as (read, write):
        await lowlevel.run(
            AnsweredFrames(read, write), write, lowlevel.create_initialization_options()
        )
