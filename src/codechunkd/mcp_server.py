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

import os
import socket
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from codechunkd import __version__
from codechunkd.config import Settings
from codechunkd.daemon.control import DaemonUnavailable, request
from codechunkd.errors import CodechunkdError
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.request import MAX_K, SearchRequest

BUDGET = 24_000
"""Characters of chunk text one answer carries by default (about 6k tokens)."""
HIT_CAP = 4_000
"""Characters of one hit's chunk before it is cut (the full chunk: ``read_chunks``)."""
PARENT_LINES = 40
"""Lines of each enclosing chunk ``read_chunks`` shows above the chunk."""
DAEMON_SEARCH_TIMEOUT = 60.0
"""The daemon's first search may load its model (seconds)."""

INSTRUCTIONS = """\
codechunkd keeps a live index of syntax-aware chunks (functions, methods, classes,
module code) of the user's git repositories, updated within a second of each save.
Use `search` to find code by meaning or by symbol name before grepping; `outline`
to see what a file defines; `read_chunks` to read a hit in full with its enclosing
class and module; `status` to check whether the index is fresh."""


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

    def search(self, req: SearchRequest) -> tuple[list[dict[str, Any]], str]:
        """Hits as ``Hit.as_dict()`` (as ``codechunkd search --json`` prints), and their origin."""
        if req.repo:
            self.check_repo(req.repo)
        answer = self.daemon({"cmd": "search", **req.to_json()}, timeout=DAEMON_SEARCH_TIMEOUT)
        if isinstance(answer, dict) and isinstance(answer.get("hits"), list):
            return answer["hits"], "daemon"
        if isinstance(answer, dict) and answer.get("error"):
            raise ToolError(f"the daemon could not search: {answer['error']}")
        hits = self.index().run(req)
        return [h.as_dict() for h in hits], "index"

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

    def status(self) -> dict[str, Any]:
        """The status document: the daemon's, or state.json and the live HEADs."""
        doc = self.daemon({"cmd": "status"}, timeout=2.0)
        if isinstance(doc, dict) and "sources" in doc:
            return doc
        from codechunkd.daemon.offline import stopped_status

        return stopped_status(self.paths)


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
    query: str, hits: Sequence[Mapping[str, Any]], via: str, notes: Sequence[str]
) -> str:
    where = "the running daemon" if via == "daemon" else "the index on disk (no daemon running)"
    lines = [f"{len(hits)} hit(s) for {query!r}, from {where}."]
    if notes:
        lines.append("Trimmed: " + "; ".join(notes) + ".")
    for n, h in enumerate(hits, 1):
        flags = " [STALE: the file changed on disk since it was indexed]" if h.get("stale") else ""
        lines.append(
            f"\n{n}. {h['path']}:{h['start_line']}-{h['end_line']}  {h.get('symbol') or '-'}"
            f"  ({h.get('kind')}, {h.get('language')}, score {h.get('score')},"
            f" repo {h.get('repo')},"
            f" id {h.get('id')}){flags}"
        )
        for ctx in h.get("context") or ():
            lines.append(f"   in: {str(ctx).splitlines()[0][:160]}")
        if h.get("content"):
            lines.append(_fence(str(h["content"]), str(h.get("language") or "")))
        elif h.get("truncated"):
            lines.append("   (text left out: over the size budget)")
    return "\n".join(lines)


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


# -- the server ------------------------------------------------------------------


def build_server(backend: Backend) -> MCPServer:
    """The MCP server with its four tools, answering from ``backend``."""
    server: MCPServer = MCPServer(
        "codechunkd", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only, structured_output=False)
    def search(
        query: Annotated[
            str,
            Field(
                description="What to find: a description in words, a code fragment, "
                "or a symbol name (e.g. `Parser.parse`)."
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
                "(e.g. `src/*.py`; `*` also matches `/`)."
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
                ge=500,
                le=200_000,
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
        hits, via = backend.search(req)
        trimmed, notes = trim_hits(hits, max_chars)
        data = {"query": query, "via": via, "trimmed": bool(notes), "notes": notes, "hits": trimmed}
        return _result(render_hits(query, trimmed, via, notes), data)

    @server.tool(annotations=read_only, structured_output=False)
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
    ) -> CallToolResult:
        """List what one file defines, as indexed: each chunk's kind, symbol, line range and id.

        Use it to get the shape of a file (its classes, methods, functions) before
        reading it, or to find the id of a chunk for `read_chunks`. Returns the
        chunks in file order; a class appears as one chunk spanning its body
        followed by its methods.
        """
        rows = backend.outline(path, repo)
        lines = []
        last_repo = None
        for r in rows:
            if r.repo != last_repo:
                lines.append(f"{r.repo}/{r.path}:")
                last_repo = r.repo
            indent = "  " if r.parent_id and r.kind not in ("module",) else ""
            sig = f"  {r.signature}" if r.signature else ""
            lines.append(
                f"  {indent}{r.start_line}-{r.end_line}  {r.kind}  {r.symbol or '-'}{sig}"
                f"  (id {r.id})"
            )
        data = {"path": rows[0].path, "chunks": [row_summary(r) for r in rows]}
        return _result("\n".join(lines), data)

    @server.tool(annotations=read_only, structured_output=False)
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
                f"{row.repo}/{row.path}:{row.start_line}-{row.end_line}  {row.kind}  "
                f"{row.symbol or '-'}  (id {row.id})"
            )
            child = row
            headers = []
            for p in reversed(parents):
                headers.append((p, header_above(p, child)))
                child = p
            for p, head in reversed(headers):
                parts.append(
                    f"in {p.kind} {p.symbol or '-'} ({p.start_line}-{p.end_line}, id {p.id}):"
                )
                parts.append(_fence(head, row.language))
            parts.append(_fence(text, row.language) + ("\n(cut short)" if cut else ""))
            data.append(
                dict(
                    row_summary(row),
                    content=text,
                    truncated=cut,
                    parents=[dict(row_summary(p), header=h) for p, h in reversed(headers)],
                )
            )
        return _result("\n".join(parts), {"chunks": data})

    @server.tool(annotations=read_only, structured_output=False)
    def status() -> CallToolResult:
        """Say how fresh the index is, per repository.

        Use it when results look out of date or a file seems missing. Returns
        whether the daemon keeps the index live, and for each indexed
        repository: its HEAD against the commit indexed, paths still pending,
        and whether an indexing pass was left partial.
        """
        doc = backend.status()
        return _result(render_status(doc), short_status(doc))

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
        anyio.run(server.run_stdio_async)
        return 0
    return anyio.run(_serve_http, server, port)


async def _serve_http(server: MCPServer, port: int) -> int:
    """Streamable HTTP on 127.0.0.1 only; the URL is printed on stderr once listening."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise CodechunkdError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from exc
    bound = sock.getsockname()[1]
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    sys.stderr.write(f"codechunkd mcp: serving on http://127.0.0.1:{bound}/mcp\n")
    sys.stderr.flush()
    await uvicorn.Server(config).serve(sockets=[sock])
    return 0


__all__ = ["Backend", "build_server", "serve", "trim_hits"]
