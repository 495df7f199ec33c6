"""``codechunkd mcp``: serve the index to coding agents (Model Context Protocol).

Owns the command's parser (its own options: no ``--json``).  The server is
``mcp_server``, imported inside ``cmd_mcp`` alone, so ``--help`` never imports the MCP SDK;
its reader process starts before the SDK is imported.
"""

from __future__ import annotations

import argparse
import gc
import os
from pathlib import Path
from typing import Any

import codechunkd.cli.common as common


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("mcp", help="serve the index to coding agents (Model Context Protocol)")
    p.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 (not stdio)")
    p.add_argument("--port", type=port, default=8765, help="port for --http (default 8765; 0: any)")
    p.add_argument("--config", type=Path, help="settings file")
    p.add_argument("--index-dir", help="index directory or URI")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug details")


def port(text: str) -> int:
    """A TCP port (0: any free one), or argparse's one-line usage error (exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port: 0 to 65535 (0: any free one)")
    return value


def cmd_mcp(args: argparse.Namespace) -> int:
    """The MCP server.  Its reader process (the index and the query model) starts before the
    MCP SDK is imported, which costs most of a second of its own, so both load at once; the
    SDK is imported only here, so ``--help`` stays light."""
    from codechunkd.mcp_server.worker import BackendProcess

    os.environ.setdefault("LANCEDB_LOG", "error")  # stderr is the agent's log: no Rust WARN noise
    backend = BackendProcess(common.settings(args))
    try:
        # the SDK's import builds ~550 pydantic models that live as long as the process: the
        # collector, run meanwhile, finds nothing to free (0.92x of the import with it off),
        # and the first full collection after it would walk them all again (~0.1 s, the
        # server's build): frozen, no collection looks at them again (docs/operations.md)
        gc.disable()
        try:
            from codechunkd.mcp_server.server import serve
        finally:
            gc.freeze()
            gc.enable()
        return serve(backend, http=args.http, port=args.port)
    finally:
        backend.close()
