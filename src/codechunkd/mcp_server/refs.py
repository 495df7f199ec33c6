"""The MCP tools over the reference graph: ``definition``, ``references`` and ``repo_map``.

Registered by server.py's ``build_server`` (``register(tool, backend)``), after tools.py's
four; they ask the backend (``Backend.definitions``, ``uses``, ``repo_map``), which reads
the index on disk, whose reference graph stays in memory between calls and is rebuilt when
a writer has committed (storage/refquery.py).
They must not reach the daemon, nor the index tools' rendering (render.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from codechunkd.display import printable
from codechunkd.mcp_server.backend import Answers
from codechunkd.mcp_server.tools import Repo
from codechunkd.storage.refviews import MAX_BUDGET, MAX_DEPTH, located

__all__ = ["MAX_NAME_CHARS", "MAX_USES", "register"]

MAX_NAME_CHARS = 400
MAX_USES = 500
"""At most this many uses in one ``references`` answer (the answer says how many more)."""


def _result(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_NAME_CHARS:
        raise ToolError(f"`name` must be 1 to {MAX_NAME_CHARS} characters, got {len(name)}")
    return name


def register(tool: Callable[[Any], Any], backend: Answers) -> None:
    """Add the three tools to the server ``tool`` registers with."""
    _definition(tool, backend)
    _references(tool, backend)
    _repo_map(tool, backend)


def _definition(tool: Callable[[Any], Any], backend: Answers) -> None:
    @tool
    def definition(
        name: Annotated[
            str, Field(description="A name (`request`) or a qualified one (`Session.request`).")
        ],
        repo: Repo = None,
    ) -> CallToolResult:
        """Find where a function, method, class or type is defined, or a constant, variable
        or field bound (`MAX_RETRIES`, `Color.RED`).

        Use it to jump from a name to its code (then `read_chunks` with the ids).
        Returns each definition's path, line, qualified symbol and chunk id.
        """
        defs = backend.definitions(_name(name), repo)
        where = located(defs)
        lines = [
            f"{printable(where(d))}:{d['line']}  {printable(d['symbol'])}  (id {d['id']})"
            for d in defs
        ]
        return _result(
            "\n".join(lines) or _none(f"no definition of {printable(name)}", backend, repo),
            {"via": "index", "definitions": defs},
        )


def _references(tool: Callable[[Any], Any], backend: Answers) -> None:
    @tool
    def references(
        name: Annotated[
            str, Field(description="A name (`request`) or a qualified one (`Session.request`).")
        ],
        calls_only: Annotated[
            bool, Field(description="Only calls: the callers (default: every use).")
        ] = False,
        callees: Annotated[bool, Field(description="Instead: what the definition calls.")] = False,
        depth: Annotated[
            int,
            Field(
                description="Callers of the callers too, this many levels up (implies "
                "calls_only): what a change can reach.",
                ge=1,
                le=MAX_DEPTH,
            ),
        ] = 1,
        repo: Repo = None,
    ) -> CallToolResult:
        """Find who uses a definition (callers, imports, subclasses, type uses), or what it calls.

        Use it for impact: what breaks if this changes (`depth` 2 or more: the callers'
        callers as well, each with its `depth`). Each use says how it was
        resolved: `exact` (same file), `imported` (through the file's imports) or
        `by-name` (only the name matches: a guess). Returns path, line, the
        enclosing symbol and its chunk id, for `read_chunks`.
        """
        if depth > 1 and callees:
            raise ToolError("`depth` follows callers: it goes with `calls_only`, not `callees`")
        shown, total = backend.uses(
            _name(name), repo, calls_only=calls_only, callees=callees, limit=MAX_USES, depth=depth
        )
        where = located(shown)
        lines = [
            "  "
            * (u.get("depth", 1) - 1)
            + f"{printable(where(u))}:{u['line']}  {u['kind']}  {printable(u['name'])}  in "
            f"{printable(u['symbol'] or '(module)')}  [{u['resolved'] or 'unresolved'}]"
            + (
                f" -> {printable(u['target']['symbol'])}"
                if (callees or depth > 1) and u["target"]
                else ""
            )
            + f"  (id {u['id']})"
            for u in shown
        ]
        if total > len(shown):
            lines.append(f"… {total - len(shown)} more")
        text = "\n".join(lines)
        if not text:  # say whether the name itself is unknown (a typo)
            known = backend.definitions(_name(name), repo)
            text = _none(
                f"no {'uses' if known else 'definition'} of {printable(name)}", backend, repo
            )
        return _result(
            text,
            {"via": "index", "uses": shown, "more": total - len(shown)},
        )


def _none(said: str, backend: Answers, repo: str | None) -> str:
    """An empty answer's text, and what was not read when the tool read only the
    repository the server runs in (``Backend.scope_note``)."""
    note = backend.scope_note(repo)
    return f"{said}; {printable(note)}" if note else said


def _repo_map(tool: Callable[[Any], Any], backend: Answers) -> None:
    @tool
    def repo_map(
        path: Annotated[
            str,
            Field(
                description="Only files under this folder: relative to the repository root, "
                "or absolute."
            ),
        ] = "",
        budget: Annotated[
            int, Field(ge=1, le=MAX_BUDGET, description="Size in tokens (default 1024).")
        ] = 1024,
        repo: Annotated[
            str | None,
            Field(
                description="This repository (default: the one the server runs in, "
                "else the only one indexed)."
            ),
        ] = None,
    ) -> CallToolResult:
        """Get a map of a repository: the files and signatures the rest of the code uses most.

        Use it for a first look at an unfamiliar repository. Files are ranked by a
        PageRank over the reference graph and listed with their most-referred-to
        signatures and line numbers, within the token budget.
        """
        text, files = backend.repo_map(path, budget, repo)
        text = "\n".join(printable(line) for line in text.splitlines())
        return _result(text or "no references indexed", {"via": "index", "files": files})
