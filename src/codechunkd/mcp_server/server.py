"""The MCP server: the SDK's ``MCPServer`` with codechunkd's seven tools, and ``serve``.

Owns the server's name, version and instructions, the one-line argument errors
(``CodechunkdMCP``), how a tool's docstring becomes its description (``_tool_of``), the
order the tools are registered in (tools.py's four, then refs.py's three) and the choice of
transport.  It must not hold a tool's body (tools.py, refs.py) nor a transport's details
(stdio.py, http.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import ValidationError

from codechunkd import __version__
from codechunkd.mcp_server.backend import Answers, ToolFailure
from codechunkd.mcp_server.http import http_token, serve_http
from codechunkd.mcp_server.refs import register as register_refs
from codechunkd.mcp_server.stdio import serve_stdio
from codechunkd.mcp_server.tools import register as register_tools

INSTRUCTIONS = """\
codechunkd keeps a live index of syntax-aware chunks (functions, methods, classes,
module code) of the user's git repositories, updated within a second of each save.
Use `search` to find code by meaning or by symbol name before grepping; `outline`
to see what a file defines; `read_chunks` to read a hit in full with its enclosing
class and module; `status` to check whether the index is fresh; `definition`,
`references` (callers, callees) and `repo_map` for what the code refers to."""


def argument_problems(exc: ValidationError) -> str:
    """Pydantic's errors as one line: each argument named with what is wrong with it.

    Pydantic's own text takes three lines per error, repeats the value and ends in a web
    address; this names the argument and the problem, never the value (it may be large).
    """
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        problems.append(f"argument `{where}`: {err['msg']}")
    return "; ".join(dict.fromkeys(problems)) or "invalid arguments"


class CodechunkdMCP(MCPServer):
    """The SDK's server, with argument errors in one line (docs/mcp.md promises one), and the
    backend's ``ToolFailure`` as the tool error the agent reads."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ToolFailure):  # the backend's one line, for the agent
                raise ToolError(f"Error executing tool {name}: {cause}") from cause
            if not isinstance(cause, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {argument_problems(cause)}") from cause


_Tool = TypeVar("_Tool", bound=Callable[..., CallToolResult])


def _tool_of(server: MCPServer, annotations: ToolAnnotations) -> Callable[[_Tool], _Tool]:
    """``server.tool``, with the docstring dedented (its source indentation is not meant for
    the agent) as the description."""

    def register(fn: _Tool) -> _Tool:
        description = inspect.cleandoc(fn.__doc__ or "")
        server.tool(annotations=annotations, structured_output=False, description=description)(fn)
        return fn

    return register


def build_server(backend: Answers) -> MCPServer:
    """The MCP server with its seven tools, answering from ``backend``."""
    server: MCPServer = CodechunkdMCP(
        "codechunkd", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    tool = _tool_of(server, ToolAnnotations(read_only_hint=True, open_world_hint=False))
    register_tools(tool, backend)  # search, outline, read_chunks, status
    register_refs(tool, backend)  # definition, references, repo_map
    return server


def serve(backend: Answers, *, http: bool = False, port: int = 8765) -> int:
    """Serve until the client goes (stdio) or the process is stopped (HTTP)."""
    server = build_server(backend)
    token = http_token() if http else ""  # before listening: a bad token file stops the start
    if not http:
        anyio.run(serve_stdio, server)
        return 0
    return anyio.run(serve_http, server, port, token)
