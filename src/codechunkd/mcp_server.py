"""``codechunkd mcp``: the index, served to coding agents over the Model Context Protocol.

Built on the official MCP SDK (``mcp``): stdio (what agents spawn) or, with
``--http``, streamable HTTP bound to 127.0.0.1.  Four tools: ``search``,
``outline``, ``read_chunks`` and ``status``.

Searches go to the running daemon when there is one (its warm model, over the
control socket) and otherwise to the index on disk, opened read-only here; the
choice is made per call, so a daemon stopped or started under this server is
followed at once.  Nothing here takes the writer's lock.  Every failure a user
can cause (no index, a bad filter, a stopped daemon) comes back as an MCP tool
error with a one-line message; the server keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import inspect
import json
import os
import re
import secrets
import socket
import stat
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
import structlog
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    InputRequiredResult,
    JSONRPCError,
    TextContent,
    ToolAnnotations,
)
from pydantic import Field, ValidationError

from codechunkd import __version__, mcp_refs, platform
from codechunkd.chunking.snippet import dedent
from codechunkd.config import Settings
from codechunkd.daemon.control import DaemonUnavailable, request
from codechunkd.display import printable
from codechunkd.errors import CodechunkdError
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.request import (
    MAX_FILTER_CHARS,
    MAX_K,
    MAX_QUERY_CHARS,
    SearchRequest,
    shown,
)

log = structlog.get_logger("codechunkd.mcp")

BUDGET = 24_000
"""Characters of chunk text one answer carries by default (about 6k tokens)."""
HIT_CAP = 4_000
"""Characters of one hit's chunk before it is cut (the full chunk: ``read_chunks``)."""
PARENT_LINES = 40
"""Lines of each enclosing chunk ``read_chunks`` shows above the chunk."""
DAEMON_SEARCH_TIMEOUT = 60.0
"""The daemon's first search may load its model (seconds)."""
MIN_CHARS, MAX_CHARS = 500, 200_000
"""The range of ``max_chars``, the size budget of a ``search`` or ``outline`` answer."""

INSTRUCTIONS = """\
codechunkd keeps a live index of syntax-aware chunks (functions, methods, classes,
module code) of the user's git repositories, updated within a second of each save.
Use `search` to find code by meaning or by symbol name before grepping; `outline`
to see what a file defines; `read_chunks` to read a hit in full with its enclosing
class and module; `status` to check whether the index is fresh; `definition`,
`references` (callers, callees) and `repo_map` for what the code refers to."""


class Backend:
    """Answers the tools: the daemon when one answers, else the index read-only."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.paths = IndexPaths.of(settings)
        self._index: Any = None  # storage.reader.Index, opened on first use
        self._lock = threading.Lock()

    # -- where answers come from -------------------------------------------------

    def daemon(self, doc: Mapping[str, Any], *, timeout: float) -> Any | None:
        """The daemon's answer, or None when no daemon answers (stopped or silent)."""
        try:
            return request(self.paths.socket, doc, timeout=timeout)
        except DaemonUnavailable:
            return None

    def index(self) -> Any:
        """The index on disk, opened read-only once (LanceDB is imported only here)."""
        with self._lock:
            if self._index is None:
                uri = self.paths.uri
                if "://" not in uri and not (Path(uri) / "chunks.lance").is_dir():
                    raise ToolError(
                        f"no index at {uri}: run `codechunkd run PATH` (or "
                        "`codechunkd index PATH`) first, or pass the right --index-dir"
                    )
                from codechunkd.storage.reader import open_index

                self._index = open_index(settings=self.settings)
            return self._index

    # -- the tools ---------------------------------------------------------------

    def search(self, req: SearchRequest) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
        """Hits as ``Hit.as_dict()`` (as ``codechunkd search --json`` prints), their origin,
        and what the answer says of itself: ``coverage`` (chunks answering by text and by
        vector) and a ``note`` when it went without its query vector."""
        if req.repo:
            self.check_repo(req.repo)
        answer = self.daemon({"cmd": "search", **req.to_json()}, timeout=DAEMON_SEARCH_TIMEOUT)
        if isinstance(answer, dict) and isinstance(answer.get("hits"), list):
            about = {k: answer[k] for k in ("coverage", "note") if answer.get(k)}
            return answer["hits"], "daemon", about
        if isinstance(answer, dict) and answer.get("error"):
            raise ToolError(f"the daemon could not search: {answer['error']}")
        index = self.index()
        hits = index.run(req)
        cov = index.coverage(repo=req.repo)
        return (
            [h.as_dict() for h in hits],
            "index",
            {"coverage": {**cov.as_dict(), "text": cov.text()}},
        )

    def check_repo(self, repo: str) -> None:
        """A repo filter names an indexed repository (state.json: no LanceDB import)."""
        from codechunkd.storage.statefile import read_state_file

        doc = read_state_file(self.paths.state_file)
        if doc is None:
            return  # nothing to check against: the search says what it finds
        roots = sorted({s["repo"] for s in doc.get("sources", []) if "repo" in s})
        if roots and repo not in roots:
            raise ToolError(f"repo {repo} is not indexed (indexed: {', '.join(roots)})")

    def locate(self, path: str, repo: str | None) -> tuple[str, str | None]:
        """(path inside its repository, repository root or None), from what an agent passes."""
        if repo:
            repo = str(Path(repo).expanduser().resolve())
        if os.path.isabs(path):
            full = str(Path(path).resolve())
            roots = sorted({s.source.repo for s in self.index().sources()}, key=len, reverse=True)
            for root in [repo] if repo else roots:
                if root and full.startswith(root.rstrip(os.sep) + os.sep):
                    return os.path.relpath(full, root), root
            raise ToolError(
                f"{path} is not inside an indexed repository "
                f"(indexed: {', '.join(roots) or 'none'})"
            )
        return path.lstrip("./") if path.startswith("./") else path, repo

    def outline(self, path: str, repo: str | None) -> list[Any]:
        rel, root = self.locate(path, repo)
        rows = self.index().file(rel, repo=root)
        if not rows:
            roots = ", ".join(sorted({s.source.repo for s in self.index().sources()})) or "none"
            raise ToolError(
                f"no chunks indexed for {rel!r}"
                + (f" in {root}" if root else "")
                + f"; paths are relative to the repository root (indexed: {roots})"
            )
        return list(rows)

    def chunk_at(self, path: str, line: int, repo: str | None) -> str:
        """The id of the innermost chunk of ``path`` that covers ``line``."""
        rows = [r for r in self.outline(path, repo) if r.start_line <= line <= r.end_line]
        if not rows:
            raise ToolError(f"no chunk of {path} covers line {line}")
        best = min(rows, key=lambda r: (r.end_line - r.start_line, r.synthetic))
        return str(best.id)

    def chunks(self, ids: Sequence[str]) -> list[tuple[Any, list[Any]]]:
        """Each chunk with its enclosing chunks, outermost first."""
        index = self.index()
        out = []
        for cid in ids:
            row = index.get(cid)
            if row is None:
                raise ToolError(
                    f"no chunk with id {cid!r} (ids come from `search` or `outline`; "
                    "an edit since then replaces a file's chunks and their ids)"
                )
            parents: list[Any] = []
            parent, seen = row.parent_id, {row.id}
            while parent and parent not in seen and len(parents) < 5:
                seen.add(parent)
                p = index.get(parent)
                if p is None:
                    break
                parents.append(p)
                parent = p.parent_id
            out.append((row, list(reversed(parents))))
        return out

    def status(self) -> tuple[dict[str, Any], str]:
        """The status document (the daemon's, or state.json and the live HEADs), and its origin."""
        doc = self.daemon({"cmd": "status"}, timeout=2.0)
        if isinstance(doc, dict) and "sources" in doc:
            return doc, "daemon"
        from codechunkd.daemon.offline import stopped_status

        return stopped_status(self.paths), "index"


# -- rendering (what the model reads) ---------------------------------------------


def _cut(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    cut = text[:limit]
    return cut[: cut.rfind("\n")] if "\n" in cut else cut, True


def _fence(text: str, language: str) -> str:
    ticks = "````" if "```" in text else "```"
    return f"{ticks}{language}\n{text}\n{ticks}"


def trim_hits(
    hits: Sequence[Mapping[str, Any]], budget: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """Hits whose chunk text fits ``budget`` characters in all, in rank order.

    Each hit keeps at most ``HIT_CAP`` characters; once the budget is spent the
    remaining hits keep their location but no text.  Returns the hits (with
    ``truncated``: the text was cut or left out) and notes saying what was cut.
    """
    left = budget
    out: list[dict[str, Any]] = []
    cut = omitted = 0
    for h in hits:
        text, was_cut = _cut(str(h.get("content") or ""), min(HIT_CAP, max(left, 0)))
        if not text and h.get("content"):
            omitted += 1
        elif was_cut:
            cut += 1
        left -= len(text)
        out.append(dict(h, content=text, truncated=was_cut))
    notes = []
    if cut:
        notes.append(f"{cut} chunk(s) cut short")
    if omitted:
        notes.append(f"{omitted} hit(s) shown without their text")
    if notes:
        notes.append(
            f"answer limited to {budget} characters; `read_chunks` with an id gives a chunk in full"
        )
    return out, notes


def render_hits(
    query: str,
    hits: Sequence[Mapping[str, Any]],
    via: str,
    notes: Sequence[str],
    about: Mapping[str, Any] | None = None,
) -> str:
    where = "the running daemon" if via == "daemon" else "the index on disk (no daemon running)"
    lines = [f"{len(hits)} hit(s) for {shown(query)}, from {where}."]
    about = about or {}
    if about.get("note"):
        lines.append(f"Note: {about['note']}.")
    cov = about.get("coverage") or {}
    if cov.get("vector_chunks", 0) < cov.get("text_chunks", 0):
        lines.append(f"Coverage: {cov.get('text')} (a first index is filling in vectors).")
    if notes:
        lines.append("Trimmed: " + "; ".join(notes) + ".")
    for n, h in enumerate(hits, 1):
        flags = " [STALE: the file changed on disk since it was indexed]" if h.get("stale") else ""
        lines.append(
            f"\n{n}. {printable(str(h['path']))}:{h['start_line']}-{h['end_line']}"
            f"  {printable(str(h.get('symbol') or '-'))}"
            f"  ({h.get('kind')}, {h.get('language')}, score {h.get('score')},"
            f" repo {h.get('repo')},"
            f" id {h.get('id')}){flags}"
        )
        for ctx in h.get("context") or ():
            lines.append(
                f"   in: {printable((str(ctx).splitlines() or [''])[0][:160], keep_tab=True)}"
            )
        if h.get("content"):
            lines.append(_fence(dedent(str(h["content"])), str(h.get("language") or "")))
        elif h.get("truncated"):
            lines.append("   (text left out: over the size budget)")
    return "\n".join(lines)


def outline_lines(rows: Sequence[Any], budget: int) -> tuple[list[str], int]:
    """The outline's text lines for as many of ``rows`` as fit ``budget`` characters, and
    how many rows that is (at least one: an answer always shows something)."""
    lines: list[str] = []
    used = count = 0
    last_repo = None
    for r in rows:
        row_lines = []
        if r.repo != last_repo:
            row_lines.append(f"{printable(r.repo)}/{printable(r.path)}:")
        indent = "  " if r.parent_id and r.kind not in ("module",) else ""
        sig = f"  {printable(r.signature, keep_tab=True)}" if r.signature else ""
        row_lines.append(
            f"  {indent}{r.start_line}-{r.end_line}  {r.kind}  {printable(r.symbol or '-')}{sig}"
            f"  (id {r.id})"
        )
        size = sum(len(line) + 1 for line in row_lines)
        if count and used + size > budget:
            break
        lines += row_lines
        used += size
        count += 1
        last_repo = r.repo
    return lines, count


def row_summary(r: Any) -> dict[str, Any]:
    return {
        "id": r.id,
        "repo": r.repo,
        "path": r.path,
        "kind": r.kind,
        "symbol": r.symbol,
        "start_line": r.start_line,
        "end_line": r.end_line,
        "parent_id": r.parent_id,
        "signature": r.signature,
        "synthetic": r.synthetic,
    }


def header_above(parent: Any, child: Any) -> str:
    """The lines of ``parent`` above ``child`` (a class header, module imports), capped."""
    lines = parent.content.splitlines()
    above = lines[: max(0, child.start_line - parent.start_line)] or lines[:1]
    if len(above) > PARENT_LINES:
        above = [*above[:PARENT_LINES], "…"]
    return "\n".join(above).rstrip()


def _result(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _request(**values: Any) -> SearchRequest:
    try:
        return SearchRequest.from_json(values)
    except CodechunkdError as exc:
        raise ToolError(str(exc)) from exc


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
    """The SDK's server, with argument errors in one line (docs/mcp.md promises one)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            cause = exc.__cause__
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


# -- the server ------------------------------------------------------------------


def build_server(backend: Backend) -> MCPServer:
    """The MCP server with its seven tools, answering from ``backend``."""
    server: MCPServer = CodechunkdMCP(
        "codechunkd", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    tool = _tool_of(server, ToolAnnotations(read_only_hint=True, open_world_hint=False))

    @tool
    def search(
        query: Annotated[
            str,
            Field(
                description="What to find: a description in words, a code fragment, "
                f"or a symbol name (e.g. `Parser.parse`); at most {MAX_QUERY_CHARS:,} characters."
            ),
        ],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many hits (default 10).")] = 10,
        mode: Annotated[
            Literal["hybrid", "vector", "text"],
            Field(
                description="Ranking: `hybrid` (default; meaning + words), "
                "`vector` (meaning only), `text` (words only)."
            ),
        ] = "hybrid",
        repo: Annotated[
            str | None, Field(description="Only this repository (its root folder).")
        ] = None,
        path: Annotated[
            str | None,
            Field(
                description="Only paths matching this glob, relative to the repository root "
                f"(e.g. `src/*.py`; `*` also matches `/`); each filter at most "
                f"{MAX_FILTER_CHARS:,} characters."
            ),
        ] = None,
        language: Annotated[
            str | None, Field(description="Only this language (e.g. `python`, `typescript`, `go`).")
        ] = None,
        kind: Annotated[
            str | None,
            Field(
                description="Only this kind of chunk: "
                "`function`, `method`, `class`, `module`, `block`, …."
            ),
        ] = None,
        branch: Annotated[
            str | None, Field(description="Only rows indexed on this branch.")
        ] = None,
        commit: Annotated[
            str | None, Field(description="Only rows indexed at this commit.")
        ] = None,
        context: Annotated[
            bool, Field(description="Add the signatures of the enclosing class/module to each hit.")
        ] = False,
        max_chars: Annotated[
            int,
            Field(
                ge=MIN_CHARS,
                le=MAX_CHARS,
                description="Size budget for the chunk text in the answer (characters).",
            ),
        ] = BUDGET,
    ) -> CallToolResult:
        """Search the user's indexed code by meaning or by symbol name.

        Use it first when looking for where something is implemented, defined or
        used, instead of reading files one by one or grepping. Returns the best
        matching chunks (functions, methods, classes, module code), best first:
        repository, path, line range, symbol, kind, score, chunk id, the chunk's
        text, and a STALE flag when the file changed on disk since it was
        indexed. Long answers are trimmed to `max_chars` and say so; read a
        trimmed hit in full with `read_chunks` and its id.
        """
        req = _request(
            query=query,
            k=k,
            mode=mode,
            repo=str(Path(repo).expanduser().resolve()) if repo else None,
            path=path,
            language=language,
            kind=kind,
            branch=branch,
            commit=commit,
            context=context,
            stale=True,
        )
        hits, via, about = backend.search(req)
        trimmed, notes = trim_hits(hits, max_chars)
        data = {"query": query, "via": via, "trimmed": bool(notes), "notes": notes, "hits": trimmed}
        data.update(about)
        return _result(render_hits(query, trimmed, via, notes, about), data)

    @tool
    def outline(
        path: Annotated[
            str,
            Field(
                description="The file: relative to its repository root "
                "(e.g. `src/app.py`), or absolute."
            ),
        ],
        repo: Annotated[
            str | None,
            Field(
                description="The repository root, when several indexed repositories have this path."
            ),
        ] = None,
        max_chars: Annotated[
            int,
            Field(
                ge=MIN_CHARS,
                le=MAX_CHARS,
                description="Size budget for the answer's text (characters); "
                "the chunks past it are counted, not listed.",
            ),
        ] = BUDGET,
    ) -> CallToolResult:
        """List what one file defines, as indexed: each chunk's kind, symbol, line range and id.

        Use it to get the shape of a file (its classes, methods, functions) before
        reading it, or to find the id of a chunk for `read_chunks`. Returns the
        chunks in file order; a class appears as one chunk spanning its body
        followed by its methods. A long outline is cut at `max_chars` and says
        how many chunks it leaves out.
        """
        rows = backend.outline(path, repo)
        lines, listed = outline_lines(rows, max_chars)
        left = len(rows) - listed
        notes = []
        if left:
            last = rows[listed - 1].end_line
            notes.append(
                f"{left} more chunk(s) after line {last} left out: answer limited to "
                f"{max_chars} characters (a larger `max_chars`, or `read_chunks` with a path "
                "and line, gives them)"
            )
            lines.append(f"Trimmed: {notes[0]}.")
        data = {
            "path": rows[0].path,
            "via": "index",
            "trimmed": bool(left),
            "notes": notes,
            "chunks": [row_summary(r) for r in rows[:listed]],
        }
        return _result("\n".join(lines), data)

    @tool
    def read_chunks(
        ids: Annotated[
            list[str] | None, Field(description="Chunk ids, as `search` and `outline` give them.")
        ] = None,
        path: Annotated[
            str | None,
            Field(
                description="Instead of ids: a file (relative to its repository root, or absolute)…"
            ),
        ] = None,
        line: Annotated[
            int | None,
            Field(ge=1, description="…and a line in it: the innermost chunk covering that line."),
        ] = None,
        repo: Annotated[
            str | None,
            Field(
                description="The repository root, with `path`, "
                "when several repositories have that path."
            ),
        ] = None,
    ) -> CallToolResult:
        """Read chunks in full, each with the code that encloses it (class header, module imports).

        Use it after `search` or `outline` to read a hit completely (a search
        answer may cut long chunks), or to see which class and module a method
        belongs to. Give `ids`, or a `path` and `line`. Returns, per chunk, its
        location and text, preceded by the header lines of each enclosing chunk,
        outermost first.
        """
        if ids:
            wanted = list(dict.fromkeys(ids))
        elif path and line:
            wanted = [backend.chunk_at(path, line, repo)]
        else:
            raise ToolError("give `ids`, or both `path` and `line`")
        if len(wanted) > 50:
            raise ToolError(f"at most 50 ids at a time, got {len(wanted)}")
        parts, data = [], []
        for row, parents in backend.chunks(wanted):
            text, cut = _cut(row.content, BUDGET)
            parts.append(
                f"{printable(row.repo)}/{printable(row.path)}:{row.start_line}-{row.end_line}"
                f"  {row.kind}  {printable(row.symbol or '-')}  (id {row.id})"
            )
            child = row
            headers = []
            for p in reversed(parents):
                headers.append((p, header_above(p, child)))
                child = p
            for p, head in reversed(headers):
                parts.append(
                    f"in {p.kind} {printable(p.symbol or '-')} ({p.start_line}-{p.end_line},"
                    f" id {p.id}):"
                )
                parts.append(_fence(head, row.language))
            parts.append(_fence(dedent(text), row.language) + ("\n(cut short)" if cut else ""))
            data.append(
                dict(
                    row_summary(row),
                    content=text,
                    truncated=cut,
                    parents=[dict(row_summary(p), header=h) for p, h in reversed(headers)],
                )
            )
        return _result("\n".join(parts), {"via": "index", "chunks": data})

    @tool
    def status() -> CallToolResult:
        """Say how fresh the index is, per repository.

        Use it when results look out of date or a file seems missing. Returns
        whether the daemon keeps the index live, and for each indexed
        repository: its HEAD against the commit indexed, paths still pending,
        and whether an indexing pass was left partial.
        """
        doc, via = backend.status()
        return _result(render_status(doc), dict(short_status(doc), via=via))

    mcp_refs.register(tool, backend)  # definition, references, repo_map
    return server


def short_status(doc: Mapping[str, Any]) -> dict[str, Any]:
    d = doc.get("daemon") or {}
    sources = []
    for s in doc.get("sources") or ():
        sources.append(
            {
                "repo": s.get("repo"),
                "ref": s.get("ref"),
                "branch": s.get("head_branch") or s.get("branch"),
                "head": s.get("head"),
                "indexed": s.get("commit"),
                "fresh": bool(s.get("fresh")),
                "pending_paths": s.get("pending_paths", 0) or 0,
                "partial": bool(s.get("pending")),
                "dirty_files": len(s.get("dirty") or {}),
                "files": s.get("files", 0),
                "chunks": s.get("chunks", 0),
                "state": s.get("state"),
            }
        )
    return {"daemon": d.get("state", "stopped"), "index": doc.get("index"), "sources": sources}


def render_status(doc: Mapping[str, Any]) -> str:
    short = short_status(doc)
    if short["daemon"] == "stopped":
        lines = [
            "daemon: stopped; answers come from the index on disk, and edits made since "
            "it was written are not in it (`codechunkd run` keeps it live)"
        ]
    else:
        lines = [f"daemon: {short['daemon']} (the index follows edits and commits live)"]
    if not short["sources"]:
        lines.append("nothing indexed yet: run `codechunkd run PATH`")
    for s in short["sources"]:
        head = (s["head"] or "unborn")[:10]
        indexed = (s["indexed"] or "unborn")[:10]
        word = "fresh" if s["fresh"] else "STALE"
        line = f"{s['repo']}: {word}; branch {s['branch']}, HEAD {head}, indexed {indexed}"
        if s["pending_paths"]:
            line += f"; {s['pending_paths']} changed paths pending"
        if s["partial"]:
            line += "; PARTIAL: an indexing pass was interrupted, some files may be missing or old"
        line += f"; {s['files']} files, {s['chunks']} chunks"
        lines.append(line)
    return "\n".join(lines)


# -- running it ------------------------------------------------------------------


def serve(settings: Settings, *, http: bool = False, port: int = 8765) -> int:
    """Serve until the client goes (stdio) or the process is stopped (HTTP)."""
    server = build_server(Backend(settings))
    if not http:
        anyio.run(_serve_stdio, server)
        return 0
    token = http_token()  # before listening: a bad token file stops the start
    return anyio.run(_serve_http, server, port, token)


# -- stdio: every frame gets an answer ----------------------------------------------


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
        except ValueError:
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
            if not isinstance(item, Exception):
                return item
            error, why = frame_error(item)
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


async def _serve_stdio(server: MCPServer) -> None:
    """``MCPServer.run_stdio_async``, with every frame answered (``AnsweredFrames``)."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # what run_stdio_async runs (SDK 2.3)
    async with stdio_server() as (read, write):
        await lowlevel.run(
            AnsweredFrames(read, write), write, lowlevel.create_initialization_options()
        )


# -- HTTP: a bearer token, loopback only, bounded waits ---------------------------------

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
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise CodechunkdError(
            f"cannot read the MCP token file {path}: {exc.strerror} "
            "(delete it and a new token is made)"
        ) from exc
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
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
        token = f.read(1024).decode("ascii", "replace").strip()
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


async def _serve_http(server: MCPServer, port: int, token: str) -> int:
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


__all__ = ["Backend", "build_server", "http_token", "serve", "trim_hits"]
