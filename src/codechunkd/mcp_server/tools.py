"""The four index tools: ``search``, ``outline``, ``read_chunks`` and ``status``.

Owns each tool's schema (its arguments' types, bounds and descriptions, which the agent reads
in ``tools/list``), its docstring (the tool's description) and its body, one registering
function per tool; ``register`` adds them in the order ``tools/list`` shows them.  The bodies
ask ``Backend`` (backend.py) and render with render.py; they must not reach the daemon or
the index themselves, nor build the server (server.py).  The reference tools are refs.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from codechunkd.errors import CodechunkdError
from codechunkd.mcp_server.backend import EVERY, Answers, repo_root
from codechunkd.mcp_server.render import (
    BUDGET,
    chunk_answer,
    outline_lines,
    render_hits,
    render_status,
    row_summary,
    short_status,
    trim_hits,
)
from codechunkd.storage.request import (
    MAX_FILTER_CHARS,
    MAX_K,
    MAX_QUERY_CHARS,
    SearchRequest,
)

MIN_CHARS, MAX_CHARS = 500, 200_000
"""The range of ``max_chars``, the size budget of a ``search`` or ``outline`` answer."""

# -- the arguments of ``search`` whose schema takes more than a line ---------------

Query = Annotated[
    str,
    Field(
        description="What to find: a description in words, a code fragment, "
        f"or a symbol name (e.g. `Parser.parse`); at most {MAX_QUERY_CHARS:,} characters."
    ),
]
Mode = Annotated[
    Literal["hybrid", "vector", "text"],
    Field(
        description="Ranking: `hybrid` (default; meaning + words), "
        "`vector` (meaning only), `text` (words only)."
    ),
]
PathGlob = Annotated[
    str | None,
    Field(
        description="Only paths matching this glob, relative to the repository root "
        f"(e.g. `src/*.py`; `*` also matches `/`); each filter at most "
        f"{MAX_FILTER_CHARS:,} characters."
    ),
]
Repo = Annotated[
    str | None,
    Field(
        description="Only this repository (its root, or any folder in it) and the indexed ones "
        f'inside it; `"{EVERY}"` for every indexed repository. By default the repository the '
        "server runs in, if it is indexed, else every one."
    ),
]
Kind = Annotated[
    str | None,
    Field(
        description="Only this kind of chunk: `function`, `method`, `class`, `module`, `block`, …."
    ),
]
HitChars = Annotated[
    int,
    Field(
        ge=MIN_CHARS,
        le=MAX_CHARS,
        description="Size budget for the chunk text in the answer (characters).",
    ),
]


def _result(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _request(**values: Any) -> SearchRequest:
    try:
        return SearchRequest.from_json(values)
    except CodechunkdError as exc:
        raise ToolError(str(exc)) from exc


def register(tool: Callable[[Any], Any], backend: Answers) -> None:
    """Add the four tools to the server ``tool`` registers with, in ``tools/list`` order."""
    _search(tool, backend)
    _outline(tool, backend)
    _read_chunks(tool, backend)
    _status(tool, backend)


def _search(tool: Callable[[Any], Any], backend: Answers) -> None:
    @tool
    def search(
        query: Query,
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many hits (default 10).")] = 10,
        mode: Mode = "hybrid",
        repo: Repo = None,
        path: PathGlob = None,
        language: Annotated[
            str | None, Field(description="Only this language (e.g. `python`, `typescript`, `go`).")
        ] = None,
        kind: Kind = None,
        branch: Annotated[
            str | None, Field(description="Only rows indexed on this branch.")
        ] = None,
        commit: Annotated[
            str | None, Field(description="Only rows indexed at this commit.")
        ] = None,
        context: Annotated[
            bool, Field(description="Add the signatures of the enclosing class/module to each hit.")
        ] = False,
        max_chars: HitChars = BUDGET,
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
            repo=repo_root(repo) if repo and repo != EVERY else None,
            path=path,
            language=language,
            kind=kind,
            branch=branch,
            commit=commit,
            context=context,
            stale=True,
        )
        hits, via, about = backend.search(req, every=repo == EVERY)
        trimmed, notes = trim_hits(hits, max_chars)
        data = {"query": query, "via": via, "trimmed": bool(notes), "notes": notes, "hits": trimmed}
        data.update(about)
        return _result(render_hits(query, trimmed, via, notes, about), data)


def _outline(tool: Callable[[Any], Any], backend: Answers) -> None:
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
                description="The repository root, when several indexed repositories have this "
                "path (by default the one the server runs in, if it is one of them; else all)."
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
        """List what one file defines, as indexed: each chunk's kind, symbol, line range and id,
        and the constants, variables and fields it binds.

        Use it to get the shape of a file (its classes, methods, functions) before
        reading it, or to find the id of a chunk for `read_chunks`. Returns the
        chunks in file order; a class appears as one chunk spanning its body
        followed by its methods. A long outline is cut at `max_chars` and says
        how many chunks it leaves out.
        """
        rows = backend.outline(path, repo)
        values = backend.values(rows[0].path, [r.id for r in rows])
        lines, listed = outline_lines(rows, max_chars, values)
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
            "chunks": [row_summary(r) | {"binds": values.get(r.id, [])} for r in rows[:listed]],
        }
        return _result("\n".join(lines), data)


def _read_chunks(tool: Callable[[Any], Any], backend: Answers) -> None:
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
                description="The repository root, with `path`, when several repositories "
                "have that path (by default the one the server runs in, if it is one of them)."
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
            lines, doc = chunk_answer(row, parents)
            parts += lines
            data.append(doc)
        return _result("\n".join(parts), {"via": "index", "chunks": data})


def _status(tool: Callable[[Any], Any], backend: Answers) -> None:
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
