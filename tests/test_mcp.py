"""`codechunkd mcp`, driven by the MCP SDK's own client over stdio and streamable HTTP.

The server is the real command in a subprocess, on a real index; searches are
checked against `codechunkd search --json` on the same index, and a real
daemon is started and stopped under a running server.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from codechunkd.config.settings import Settings
from tests.conftest import Deadline, Indexer, Repo, scaled, wait_for

EXE = str(Path(sys.executable).parent / "codechunkd")
GEO = '''"""Geometry helpers."""
import math

RADIUS = 6371.0


class Point:
    """A point on the sphere."""

    def __init__(self, lat, lon):
        self.lat = lat
        self.lon = lon

    def distance_to(self, other):
        """Great-circle distance in km."""
        return haversine(self, other)


def haversine(
    a,
    b,
):
    """Distance between two points on a sphere."""
    dlat = math.radians(b.lat - a.lat)
    return 2 * RADIUS * math.asin(math.sqrt(dlat))
'''
TEXT = 'def slugify(title):\n    """Lowercase, dashes for spaces."""\n    return title.lower()\n'


def _env() -> dict[str, str]:
    """The test's environment (HOME, XDG dirs, the shared ONNX export) for the server."""
    return dict(os.environ, LANCEDB_LOG="error")


@asynccontextmanager
async def stdio_session(
    index_dir: Path, log: Path, *extra: str, cwd: Path | None = None
) -> AsyncIterator[ClientSession]:
    """`codechunkd mcp --index-dir DIR` spawned by the SDK's stdio client (in ``cwd``, as an
    agent starts it in the checkout it works in), initialised."""
    params = StdioServerParameters(
        command=EXE, args=["mcp", "--index-dir", str(index_dir), *extra], env=_env(), cwd=cwd
    )
    with log.open("w") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def tool_text(index_dir: Path, log: Path, tool: str, **args: Any) -> str:
    """One tool's text answer from a server started for it (the SDK's stdio client)."""
    async with stdio_session(index_dir, log) as session:
        result = await session.call_tool(tool, args)
        assert not result.is_error, text(result)
        return text(result)


async def call(session: ClientSession, tool: str, **args: Any) -> CallToolResult:
    return await session.call_tool(tool, args)


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured answer of a successful call."""
    assert not result.is_error, text(result)
    data = result.structured_content
    assert isinstance(data, dict)
    return dict(data)


def cli_search(
    index_dir: Path, query: str, *extra: str, cwd: Path | None = None
) -> list[dict[str, Any]]:
    done = subprocess.run(
        [EXE, "search", query, "--index-dir", str(index_dir), "--json", *extra],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    hits: list[dict[str, Any]] = json.loads(done.stdout)
    return hits


def same_hits(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    def key(h: dict[str, Any]) -> tuple[Any, ...]:
        return (h["id"], h["path"], h["start_line"], h["end_line"], h["symbol"])

    return [key(h) for h in a] == [key(h) for h in b]


def sync_once(path: Path, settings: Settings, embedder: Any) -> None:
    """Index ``path`` once with a real Syncer, as ``codechunkd index`` does."""
    ix = Indexer(settings, embedder)
    ix.sync(path)
    ix.close()


@pytest.fixture
def indexed(repo: Repo, settings: Settings, embedder) -> Repo:  # type: ignore[no-untyped-def]
    """A small repository, indexed once by a real Syncer."""
    repo.write("pkg/geo.py", GEO)
    repo.write("pkg/text.py", TEXT)
    repo.commit("init")
    sync_once(repo.path, settings, embedder)
    return repo


def test_stdio_tools_answer_like_the_cli(indexed: Repo, index_dir: Path, tmp_path: Path) -> None:
    """Over stdio: the four tools are listed with descriptions and schemas, each answers,
    search equals `codechunkd search --json` (ids, paths, order), an outline names the
    constants a chunk binds, and bad arguments are tool errors after which the server
    still answers."""
    queries = [("distance between two points on a sphere", ()), ("slugify", ("--lang", "python"))]
    expected = {q: cli_search(index_dir, q, *extra) for q, extra in queries}

    async def go() -> None:
        async with stdio_session(index_dir, tmp_path / "mcp.log") as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == {
                *("search", "outline", "read_chunks", "status"),
                *("definition", "references", "repo_map"),
            }
            for t in tools.values():
                assert t.description and len(t.description) > 80, t.name
                assert t.input_schema["type"] == "object"
            assert "query" in tools["search"].input_schema["required"]

            for q, extra in queries:
                args: dict[str, Any] = {"query": q, "k": 10}
                if extra:
                    args["language"] = extra[1]
                res = await s.call_tool("search", args)
                data = ok(res)
                assert data["via"] == "index"
                assert same_hits(data["hits"], expected[q]), (data["hits"], expected[q])
                assert all(h["stale"] is False for h in data["hits"])
            first = expected[queries[0][0]][0]
            assert first["symbol"] in text(await call(s, "search", query=queries[0][0], k=3))

            outline = ok(await call(s, "outline", path="pkg/geo.py"))
            symbols = [c["symbol"] for c in outline["chunks"]]
            assert {"Point", "Point.__init__", "Point.distance_to", "haversine"} <= set(symbols)
            module = next(c for c in outline["chunks"] if c["kind"] == "module")
            assert module["binds"] == ["RADIUS"]  # a constant, in the chunk that binds it
            shown = text(await call(s, "outline", path="pkg/geo.py"))
            assert "binds RADIUS" in shown
            assert "haversine  def haversine(a, b)  (id" in shown, shown  # one line, as written
            absolute = ok(await call(s, "outline", path=str(indexed.path / "pkg/geo.py")))
            assert absolute == outline

            method = next(c for c in outline["chunks"] if c["symbol"] == "Point.distance_to")
            read = ok(await call(s, "read_chunks", ids=[method["id"]]))["chunks"][0]
            assert "return haversine(self, other)" in read["content"]
            assert [p["kind"] for p in read["parents"]] == ["module", "class"]
            assert "import math" in read["parents"][0]["header"]
            assert "class Point" in read["parents"][1]["header"]
            by_line = ok(await call(s, "read_chunks", path="pkg/geo.py", line=16))
            assert by_line["chunks"][0]["id"] == method["id"]

            status = ok(await call(s, "status"))
            assert status["daemon"] == "stopped"
            (src,) = status["sources"]
            assert src["repo"] == str(indexed.path) and src["fresh"] and not src["partial"]
            assert src["head"] == indexed.head() == src["indexed"]

            bad: list[tuple[str, dict[str, Any], str]] = [
                ("search", {"query": "x", "k": 0}, "greater than or equal to 1"),
                ("search", {"query": "x", "mode": "fuzzy"}, "mode"),
                ("search", {"query": "   "}, "query is empty"),
                ("search", {"query": "x", "repo": "/no/such/repo"}, "is not indexed"),
                ("outline", {"path": "pkg/nope.py"}, "no chunks indexed for 'pkg/nope.py'"),
                ("outline", {"path": "/elsewhere/x.py"}, "not inside an indexed repository"),
                ("read_chunks", {}, "give `ids`, or both `path` and `line`"),
                ("read_chunks", {"ids": ["0" * 32]}, "no chunk with id"),
                ("read_chunks", {"path": "pkg/geo.py", "line": 999}, "covers line 999"),
            ]
            for tool, bad_args, message in bad:
                res = await s.call_tool(tool, bad_args)
                assert res.is_error, (tool, bad_args, text(res))
                assert message in text(res), (message, text(res))
            assert ok(await call(s, "status"))["sources"]  # still serving

    anyio.run(go)


def test_trimmed_search_says_so(
    indexed: Repo,
    index_dir: Path,
    tmp_path: Path,
    settings: Settings,
    embedder: Any,
) -> None:
    """A search over the size budget cuts chunk text, flags each cut hit, and says so."""
    body = "".join(
        f"    total += lat_{i} * lon_{i}  # point {i} on the sphere\n" for i in range(60)
    )
    indexed.write(
        "pkg/big.py", f"def sphere_points_sum():\n    total = 0\n{body}    return total\n"
    )
    indexed.commit("big")
    sync_once(indexed.path, settings, embedder)

    async def go() -> None:
        async with stdio_session(index_dir, tmp_path / "mcp.log") as s:
            full = ok(await call(s, "search", query="point on a sphere", k=5))
            small = await call(s, "search", query="point on a sphere", k=5, max_chars=500)
            data = ok(small)
            assert [h["id"] for h in data["hits"]] == [h["id"] for h in full["hits"]]
            assert data["trimmed"] and not full["trimmed"]
            assert sum(len(h["content"]) for h in data["hits"]) <= 500
            assert any(h["truncated"] for h in data["hits"])
            assert "Trimmed:" in text(small) and "read_chunks" in text(small)

    anyio.run(go)


def test_definition_and_references_give_ids_read_chunks_reads(
    indexed: Repo, index_dir: Path, tmp_path: Path
) -> None:
    """``definition`` finds haversine, ``references`` its caller (``exact``: same file) and
    what the caller calls, ``read_chunks`` reads the caller by the id given, ``repo_map``
    lists geo.py's signatures; no uses of a defined name and of a name the index does not
    define are said apart; a name too long, a budget of 0, a ``depth`` past 5 or with
    ``callees`` are tool errors (``depth`` itself: ``test_cli_refs.py``)."""

    async def go() -> None:
        async with stdio_session(index_dir, tmp_path / "mcp.log") as s:
            [d] = ok(await call(s, "definition", name="haversine"))["definitions"]
            assert d["path"] == "pkg/geo.py" and d["symbol"] == "haversine"
            uses = ok(await call(s, "references", name="haversine", calls_only=True))["uses"]
            assert [(u["symbol"], u["resolved"]) for u in uses] == [("Point.distance_to", "exact")]
            assert uses[0]["target"]["id"] == d["id"]
            read = ok(await call(s, "read_chunks", ids=[uses[0]["id"]]))
            assert "haversine(self, other)" in read["chunks"][0]["content"]
            callees = ok(await call(s, "references", name="Point.distance_to", callees=True))
            assert [(u["name"], u["resolved"]) for u in callees["uses"]] == [("haversine", "exact")]
            deep = ok(await call(s, "references", name="haversine", depth=3))["uses"]
            assert [(u["symbol"], u["depth"]) for u in deep] == [("Point.distance_to", 1)]
            assert (await call(s, "references", name="haversine", depth=2, callees=True)).is_error
            assert (await call(s, "references", name="haversine", depth=6)).is_error
            files = ok(await call(s, "repo_map", budget=200))["files"]
            assert files[0]["path"] == "pkg/geo.py"
            shown = text(await call(s, "repo_map", budget=200))
            assert "def haversine(a, b)" in shown, shown  # its signature, on one line
            for name, said in (("Point", "no uses of Point"), ("Pointe", "no definition of")):
                found = await call(s, "references", name=name)
                assert not found.is_error and ok(found)["uses"] == []
                assert said in text(found), text(found)
            assert (await call(s, "definition", name="x" * 401)).is_error
            assert (await call(s, "repo_map", budget=0)).is_error

    anyio.run(go)


def test_folders_given_as_an_agent_writes_them(
    repo: Repo,
    settings: Settings,
    embedder,
    index_dir: Path,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """``repo_map`` and ``outline`` take a path relative to the repository root, with ``./``
    or without (a dot-folder keeps its dot), or absolute; a folder holding nothing indexed
    says so and names the indexed repositories, and one outside them is a tool error; a
    ``repo`` may be any folder of the repository."""
    repo.write(".ci/check.py", "def check():\n    return run()\n\n\ndef run():\n    return 1\n")
    repo.write("pkg/geo.py", GEO)
    repo.commit("init")
    sync_once(repo.path, settings, embedder)

    async def go() -> None:
        async with stdio_session(index_dir, tmp_path / "mcp.log", cwd=repo.path / "pkg") as s:
            for folder in (".ci", "./.ci/", str(repo.path / ".ci")):
                files = ok(await call(s, "repo_map", path=folder))["files"]
                assert [f["path"] for f in files] == [".ci/check.py"], folder
            outline = ok(await call(s, "outline", path="./.ci/check.py"))["chunks"]
            assert {c["symbol"] for c in outline} >= {"check", "run"}
            everything = ok(await call(s, "repo_map", path=str(repo.path)))["files"]
            assert {f["path"] for f in everything} == {".ci/check.py", "pkg/geo.py"}
            empty = await call(s, "repo_map", path="nope")
            assert not empty.is_error and ok(empty)["files"] == []
            assert f"no indexed files under 'nope' in {repo.path}" in text(empty), text(empty)
            outside = await call(s, "repo_map", path=str(tmp_path))
            assert outside.is_error and "not inside an indexed repository" in text(outside)
            folder = str(repo.path / "pkg")
            assert ok(await call(s, "repo_map", repo=folder))["files"] == everything
            [found] = ok(await call(s, "definition", name="haversine", repo=folder))["definitions"]
            assert found["repo"] == str(repo.path)
            hits = ok(await call(s, "search", query="haversine", repo=folder))["hits"]
            assert hits and {h["repo"] for h in hits} == {str(repo.path)}
            elsewhere = await call(s, "search", query="haversine", repo=str(tmp_path))
            assert elsewhere.is_error and "is not indexed" in text(elsewhere)

    anyio.run(go)


WORKTREE_TEXT = (
    'def slugify(title):\n    """Dashes for spaces."""\n    return title.replace(" ", "-")\n'
    "\n\ndef titled(s):\n    return s.title()\n"
)


def test_a_server_started_in_a_worktree_reads_the_worktrees_files(
    indexed: Repo,
    settings: Settings,
    embedder,
    index_dir: Path,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """A repository and its worktree both indexed, a file changed in the worktree: a server
    started in the worktree outlines and reads the worktree's file when no ``repo`` is
    given (it outlined both, the main checkout's first, and read the main checkout's chunk
    at that line), one started in the main checkout its own; one started elsewhere lists
    both. ``definition``, ``references`` and ``search`` (and ``codechunkd search`` run in a
    checkout) give the copy in the server's checkout (its ``repo``, and a chunk id that
    reads the checkout's own code): search gave either, as its ids fell."""
    worktree = tmp_path / "worktree"
    indexed.git("worktree", "add", "-b", "other", str(worktree))
    (worktree / "pkg" / "text.py").write_text(WORKTREE_TEXT)
    sync_once(worktree, settings, embedder)

    async def outline_and_line_3(where: Path) -> tuple[str, str]:
        async with stdio_session(index_dir, tmp_path / "mcp.log", cwd=where) as s:
            outline = text(await call(s, "outline", path="pkg/text.py"))
            read = ok(await call(s, "read_chunks", path="pkg/text.py", line=3))
            return outline, read["chunks"][0]["content"]

    async def go() -> None:
        outline, chunk = await outline_and_line_3(worktree / "pkg")
        assert "titled" in outline and str(indexed.path) not in outline, outline
        assert 'title.replace(" ", "-")' in chunk, chunk
        outline, chunk = await outline_and_line_3(indexed.path)
        assert "titled" not in outline and str(worktree) not in outline, outline
        assert "title.lower()" in chunk, chunk
        outline, _ = await outline_and_line_3(tmp_path)
        assert str(indexed.path) in outline and str(worktree) in outline, outline
        for where, body in ((worktree, 'title.replace(" ", "-")'), (indexed.path, "lower()")):
            async with stdio_session(index_dir, tmp_path / "mcp.log", cwd=where) as s:
                [found] = ok(await call(s, "definition", name="slugify"))["definitions"]
                assert found["repo"] == str(where), found  # the copy in the server's checkout
                read = ok(await call(s, "read_chunks", ids=[found["id"]]))["chunks"]
                assert body in read[0]["content"], read
                uses = ok(await call(s, "references", name="haversine"))["uses"]  # in both
                assert uses and {u["repo"] for u in uses} == {str(where)}, uses
                hits = ok(await call(s, "search", query="haversine distance"))["hits"]
                assert _copy_of(hits, "haversine") == str(where), hits  # its file, to open
            hits = cli_search(index_dir, "haversine distance", cwd=where / "pkg")
            assert _copy_of(hits, "haversine") == str(where), hits

    anyio.run(go)


def _copy_of(hits: list[dict[str, Any]], symbol: str) -> str:
    """The checkout of the one hit that is ``symbol`` (a chunk in both is one hit)."""
    [repo] = [h["repo"] for h in hits if h["symbol"] == symbol]
    return str(repo)


def test_hostile_paths_and_repos_are_refused_in_one_line_and_repos_are_resolved(
    indexed: Repo, index_dir: Path, tmp_path: Path
) -> None:
    """A `path` or `repo` past the filter cap, or with a NUL, is refused before it reaches
    the filesystem (``Path.resolve`` of an 800 KB path held the reader for 30 s, and a NUL
    gave an error without a reason); an error repeats at most the start of a long value; the
    reference tools read `repo` as `search` does (a trailing slash, a relative path) and
    refuse one that is not indexed instead of answering nothing."""
    huge = "/" + "a/" * 400_000

    async def go() -> None:
        async with stdio_session(index_dir, tmp_path / "mcp.log") as s:
            for tool, args, what in [
                ("outline", {"path": huge}, "path is 800,001 characters"),
                ("read_chunks", {"path": huge, "line": 1}, "path is 800,001 characters"),
                ("search", {"query": "x", "repo": huge}, "repo is 800,001 characters"),
                ("outline", {"path": "pkg/geo.py", "repo": huge}, "repo is 800,001 characters"),
                ("definition", {"name": "haversine", "repo": huge}, "repo is 800,001"),
                ("repo_map", {"path": huge}, "path is 800,001 characters"),
                ("outline", {"path": "/tmp/a\x00b"}, "path holds a NUL character"),
                ("search", {"query": "x", "repo": "/a\x00b"}, "repo holds a NUL character"),
                ("references", {"name": "x", "repo": "/a\x00b"}, "repo holds a NUL"),
            ]:
                res = await s.call_tool(tool, args)
                message = text(res)
                assert res.is_error and what in message and "\n" not in message, (tool, message)
            res = await call(s, "read_chunks", ids=["f" * 100_000])
            assert res.is_error and len(text(res)) < 400, len(text(res))
            root = str(indexed.path)
            [d] = ok(await call(s, "definition", name="haversine", repo=root + "/"))["definitions"]
            assert d["path"] == "pkg/geo.py"
            res = await call(s, "definition", name="haversine", repo=str(tmp_path))
            assert res.is_error and "is not indexed" in text(res), text(res)

    anyio.run(go)


def test_no_index_is_a_tool_error(tmp_path: Path) -> None:
    """On a directory with no index, search is a clear tool error and status says so (the
    warm-up found nothing to load, and said so in the log, not to the agent)."""
    log = tmp_path / "mcp.log"

    async def go() -> None:
        async with stdio_session(tmp_path / "empty", log, "-v") as s:
            res = await call(s, "search", query="anything")
            assert res.is_error
            assert "no index at" in text(res) and "codechunkd run" in text(res)
            status = await call(s, "status")
            assert ok(status)["sources"] == []
            assert "nothing indexed yet" in text(status)
        assert "mcp_warm_skipped" in log.read_text() and '"mcp_warm"' not in log.read_text()

    anyio.run(go)


def test_with_no_daemon_the_first_search_finds_the_index_and_model_loaded(
    indexed: Repo, index_dir: Path, tmp_path: Path
) -> None:
    """With no daemon, the server opens the index, loads the query model and runs one search
    of its own while the agent is still starting (``Backend.warm``): its log says so before
    the agent's first search is sent, and that search answers as usual."""
    log = tmp_path / "mcp.log"

    def warmed() -> bool:
        return '"mcp_warm"' in log.read_text()

    async def go() -> None:
        async with stdio_session(index_dir, log, "-v") as s:
            await anyio.to_thread.run_sync(wait_for, warmed, "the server's warm-up", 30.0)
            got = ok(await call(s, "search", query="distance between two points on a sphere"))
            assert got["via"] == "index"
            assert got["hits"][0]["path"] == "pkg/geo.py", got["hits"][0]
        assert "mcp_warm_skipped" not in log.read_text()

    anyio.run(go)


@contextmanager
def http_server(index_dir: Path, log: Path) -> Iterator[tuple[str, str]]:
    """`codechunkd mcp --http --port 0` in a subprocess: its URL and bearer token, from what
    it prints on stderr once listening."""
    with log.open("w") as err:
        proc = subprocess.Popen(
            [EXE, "mcp", "--http", "--port", "0", "--index-dir", str(index_dir)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=_env(),
        )
    try:

        def printed() -> tuple[str, str] | None:
            assert proc.poll() is None, log.read_text()
            url = re.search(r"serving on (http://127\.0\.0\.1:\d+/mcp)", log.read_text())
            token = re.search(r"Authorization: Bearer ([\w-]+)", log.read_text())
            return (url.group(1), token.group(1)) if url and token else None

        yield wait_for(printed, "the server's URL and token on stderr")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def authorized(token: str) -> Any:
    """The SDK's own HTTP client, sending the bearer token."""
    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300)
    )


def post_initialize(url: str, headers: dict[str, str]) -> int:
    """The HTTP status of a bare `initialize` POST (no MCP client: only the status matters)."""
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    }
    answer = httpx2.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        headers={"Accept": "application/json, text/event-stream", **headers},
        timeout=60,
    )
    return int(answer.status_code)


def test_streamable_http_on_localhost(indexed: Repo, index_dir: Path, tmp_path: Path) -> None:
    """With --http the server listens on 127.0.0.1 only and answers the SDK's HTTP client."""
    with http_server(index_dir, tmp_path / "http.log") as (url, token):

        async def go() -> None:
            async with (
                authorized(token) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                names = {t.name for t in (await s.list_tools()).tools}
                assert {"search", "outline", "read_chunks", "status", "references"} <= names
                data = ok(await call(s, "search", query="slugify", k=3))
                assert data["hits"][0]["symbol"] == "slugify"
                assert (await call(s, "outline", path="nope.py")).is_error

        anyio.run(go)


def test_http_needs_the_bearer_token(indexed: Repo, index_dir: Path, tmp_path: Path) -> None:
    """Over HTTP, no request is served without `Authorization: Bearer <token>`: no header and
    a wrong token get 401 (the SDK's client then fails to initialise), the token works; the
    token file is 0600 and reused by the next start; one that others can read is refused."""
    token_file = Path(os.environ["XDG_CONFIG_HOME"]) / "codechunkd" / "mcp-token"
    with http_server(index_dir, tmp_path / "http.log") as (url, token):
        assert token_file.read_text().strip() == token
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert post_initialize(url, {}) == 401
        assert post_initialize(url, {"Authorization": f"Bearer {token[:-1]}x"}) == 401
        assert post_initialize(url, {"Authorization": token}) == 401
        assert post_initialize(url, {"Authorization": f"bearer {token}"}) == 200

        async def refused(client: httpx2.AsyncClient) -> None:
            with anyio.fail_after(120):
                async with (
                    client as http,
                    streamable_http_client(url, http_client=http) as (read, write),
                    ClientSession(read, write) as s,
                ):
                    await s.initialize()

        for client in (httpx2.AsyncClient(), authorized("wrong-" + token)):
            with pytest.raises(Exception) as caught:
                anyio.run(refused, client)
            assert "Server returned an error response" in repr(caught.value)

        async def works() -> None:
            async with (
                authorized(token) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                assert ok(await call(s, "search", query="slugify", k=3))["hits"]

        anyio.run(works)

    with http_server(index_dir, tmp_path / "http2.log") as (_, again):
        assert again == token  # reused: agents configured once keep working

    token_file.chmod(0o640)
    done = subprocess.run(
        [EXE, "mcp", "--http", "--port", "0", "--index-dir", str(index_dir)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "refusing the MCP token file" in done.stderr and "0640" in done.stderr, done.stderr
    for make in (os.mkfifo, os.mkdir):
        # a FIFO held the start for good, a directory gave "unexpected: Is a directory"
        if token_file.is_dir():
            token_file.rmdir()
        else:
            token_file.unlink(missing_ok=True)
        make(token_file, 0o600)
        done = subprocess.run(
            [EXE, "mcp", "--http", "--port", "0", "--index-dir", str(index_dir)],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=scaled(120),  # a hang detector: the start reads nothing that blocks
            check=False,
        )
        assert done.returncode != 0 and "it is not a regular file" in done.stderr, done.stderr


def test_http_closes_silent_and_half_sent_connections(
    indexed: Repo, index_dir: Path, tmp_path: Path
) -> None:
    """A connection that sends nothing, one that stops in the middle of its headers, and one
    left idle after an answer are each closed by the server within a bounded time; so is one
    without the token that keeps trickling a body after its 401 (each byte once restarted
    uvicorn's idle timer, so another user could hold connections open for ever)."""
    with http_server(index_dir, tmp_path / "http.log") as (url, token):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        trickle = socket.create_connection(("127.0.0.1", port))
        trickle.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n" % port
        )
        trickle.settimeout(0.5)
        answer, deadline = b"", time.monotonic() + scaled(120)  # a hang detector
        try:
            while time.monotonic() < deadline:
                try:
                    chunk = trickle.recv(4096)
                except TimeoutError:
                    trickle.sendall(b" ")  # one more byte of the body
                    continue
                if not chunk:
                    break  # closed by the server
                answer += chunk
            else:
                pytest.fail("a connection trickling a body after its 401 was never closed")
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed by the server while a byte was on its way
        finally:
            trickle.close()
        assert answer.startswith(b"HTTP/1.1 401"), answer[:40]
        silent, partial, idle = (socket.create_connection(("127.0.0.1", port)) for _ in "abc")
        try:
            partial.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
            idle.sendall(
                b"GET /nothing HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                b"Authorization: Bearer %s\r\n\r\n" % (port, token.encode())
            )
            for conn in (silent, partial, idle):
                conn.settimeout(120)  # a hang detector: the server's limits are 5 and 10 s
                received = b""
                while chunk := conn.recv(4096):
                    received += chunk
                assert conn in (silent, partial) or received.startswith(b"HTTP/1.1 404")
        finally:
            for conn in (silent, partial, idle):
                conn.close()


def test_stdio_answers_every_frame(index_dir: Path, tmp_path: Path) -> None:
    """Over stdio, a request whose query holds a lone surrogate gets an error answer with its
    id, a frame that is not JSON (or nested deeper than the parser goes) a -32700 parse error,
    JSON that is no JSON-RPC message, or a request whose id is no string or integer, a -32600;
    each is logged, and the server answers the next request.

    Raw frames on the server's stdin: the SDK's client cannot send a lone surrogate (pydantic
    refuses to encode it), other clients (JavaScript's JSON.stringify) send it escaped."""
    err = (tmp_path / "mcp.log").open("w")
    proc = subprocess.Popen(
        [EXE, "mcp", "--index-dir", str(tmp_path / "empty")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        env=_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    answers: list[dict[str, Any]] = []

    def send(frame: str) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(frame.encode() + b"\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, f"no answer to {frame[:80]!r}"
        answers.append(json.loads(proc.stdout.readline()))
        return answers[-1]

    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        first = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
        assert send(json.dumps(first))["id"] == 1
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        surrogate = (
            '{"jsonrpc": "2.0", "id": 7, "method": "tools/call",'
            ' "params": {"name": "search", "arguments": {"query": "a \\ud800 b"}}}'
        )
        answer = send(surrogate)
        assert answer["id"] == 7 and answer["error"]["code"] == -32700
        assert "lone surrogate" in answer["error"]["message"]
        answer = send("this is not json")
        assert answer["id"] is None and answer["error"]["code"] == -32700
        answer = send('{"jsonrpc": "2.0", "id": 8, "method": 42}')
        assert answer["id"] == 8 and answer["error"]["code"] == -32600
        answer = send("[" * 100_000 + "]" * 100_000)  # past the parser's depth: the answer
        assert answer["id"] is None and answer["error"]["code"] == -32700  # once killed it
        for bad_id in ("1.5", "null", "true", '{"a": 1}'):  # the SDK reads a notification
            frame = f'{{"jsonrpc": "2.0", "id": {bad_id}, "method": "tools/call", "params": {{}}}}'
            answer = send(frame)
            assert answer["id"] is None and answer["error"]["code"] == -32600, bad_id
            assert "string or integer id" in answer["error"]["message"]
        answer = send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        assert answer["id"] == 9 and {t["name"] for t in answer["result"]["tools"]} >= {
            *("search", "outline", "read_chunks", "status", "definition", "references")
        }
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
        err.close()
    log = (tmp_path / "mcp.log").read_text()
    assert log.count("mcp_bad_frame") == 8, log


def test_descriptions_errors_via_outline_budget_and_snippets(
    indexed: Repo, index_dir: Path, tmp_path: Path, settings: Settings, embedder: Any
) -> None:
    """Tool descriptions carry no source indentation; an argument error is one line naming
    the argument; every answer says `via`; `outline` keeps to `max_chars` and says what it
    left out; chunk text in answers is dedented as a block (a method's body one level in)."""
    defs = "".join(
        f"def helper_number_{i}(alpha, beta, gamma):\n    return alpha + {i}\n\n\n"
        for i in range(12)
    )
    indexed.write("pkg/many.py", defs)
    indexed.commit("many")
    sync_once(indexed.path, settings, embedder)

    async def go() -> None:
        async with stdio_session(index_dir, tmp_path / "mcp.log") as s:
            for t in (await s.list_tools()).tools:
                assert t.description
                assert not [ln for ln in t.description.splitlines() if ln.startswith(" ")], t.name

            for args, argument in [
                ({"query": "x", "k": 0}, "`k`"),
                ({"k": 3}, "`query`"),
                ({"query": "x", "mode": "fuzzy", "k": "many"}, "`mode`"),
            ]:
                res = await s.call_tool("search", args)
                assert res.is_error
                message = text(res)
                assert "\n" not in message and "pydantic" not in message, message
                assert argument in message, message
            res = await s.call_tool("outline", {"path": "pkg/geo.py", "max_chars": 10})
            assert res.is_error and "`max_chars`" in text(res) and "\n" not in text(res)

            hits = ok(await call(s, "search", query="Great-circle distance in km", k=3))
            method = next(h for h in hits["hits"] if h["symbol"] == "Point.distance_to")
            outline = ok(await call(s, "outline", path="pkg/geo.py"))
            read = ok(await call(s, "read_chunks", ids=[method["id"]]))
            status = ok(await call(s, "status"))
            assert [d["via"] for d in (hits, outline, read, status)] == ["index"] * 4

            shown = text(await call(s, "search", query="Great-circle distance in km", k=1))
            assert 'def distance_to(self, other):\n    """Great-circle' in shown, shown
            full = text(await call(s, "read_chunks", ids=[method["id"]]))
            assert "def distance_to(self, other):\n    return haversine" in full.replace(
                '    """Great-circle distance in km."""\n', ""
            ), full

            whole = await call(s, "outline", path="pkg/many.py")
            cut = await call(s, "outline", path="pkg/many.py", max_chars=500)
            assert not ok(whole)["trimmed"] and ok(cut)["trimmed"]
            listed = ok(cut)["chunks"]
            assert 0 < len(listed) < len(ok(whole)["chunks"])
            assert listed == ok(whole)["chunks"][: len(listed)]
            body = text(cut).rsplit("\nTrimmed: ", 1)
            assert len(body) == 2 and len(body[0]) <= 500, text(cut)
            left = len(ok(whole)["chunks"]) - len(listed)
            assert f"{left} more chunk(s)" in body[1]

    anyio.run(go)


async def until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 60.0) -> Any:
    """Poll an async condition up to a ``Deadline`` (``timeout`` seconds on an idle machine)."""
    deadline = Deadline(timeout)
    while True:
        last = await check()
        if last:
            return last
        if deadline.passed():
            raise deadline.failure(what, last)
        await anyio.sleep(0.1)


@pytest.mark.slow
def test_daemon_started_and_stopped_under_the_server(
    indexed: Repo, index_dir: Path, tmp_path: Path
) -> None:
    """One server throughout: no daemon (the index on disk), a daemon started (its answers,
    and an edit becomes searchable), the daemon stopped (back to the disk, no crash)."""
    from tests.daemon.test_service_e2e import Daemon

    daemons: list[Daemon] = []

    async def go() -> None:
        async with stdio_session(index_dir, tmp_path / "mcp.log") as s:
            before = ok(await call(s, "search", query="slugify", k=3))
            assert before["via"] == "index"

            d = Daemon(tmp_path, index_dir, indexed.path)
            daemons.append(d)
            await anyio.to_thread.run_sync(d.wait_notify, "READY=1")

            async def caught_up() -> bool:
                return bool(ok(await call(s, "status"))["daemon"] == "ready")

            await until(caught_up, "the daemon caught up")

            # a search that reaches the daemon while its model still loads is answered from
            # the full text and says so (a busy machine: the load takes past its 2 s wait);
            # the hybrid answer to compare comes once the model is there
            async def with_vectors() -> CallToolResult | None:
                res = await call(s, "search", query="slugify", k=3)
                return None if "full text only" in text(res) else res

            via = ok(await until(with_vectors, "a daemon answer with its query vector"))
            assert via["via"] == "daemon"
            assert same_hits(via["hits"], before["hits"]), (via["hits"], before["hits"])

            indexed.write("pkg/text.py", TEXT + "\n\ndef wombat_marker():\n    return 1\n")

            async def visible() -> bool:
                hits = ok(await call(s, "search", query="wombat_marker", k=3))["hits"]
                return any("wombat_marker" in h["content"] for h in hits)

            await until(visible, "the edit searchable through the daemon")

            assert await anyio.to_thread.run_sync(d.stop) == 0
            after = ok(await call(s, "search", query="wombat_marker", k=3))
            assert after["via"] == "index"
            assert any("wombat_marker" in h["content"] for h in after["hits"])
            assert ok(await call(s, "status"))["daemon"] == "stopped"

    try:
        anyio.run(go)
    finally:
        for d in daemons:
            d.kill()


def test_hit_text_escapes_control_characters_in_names() -> None:
    """A file name holding a newline cannot forge a hit of its own in the text an agent
    reads: paths and symbols are escaped (``display.printable``); the content stays fenced."""
    from codechunkd.mcp_server.render import render_hits

    forged = "2. x.py:1-2  forged"
    hit = {
        "path": f"evil\n{forged}.py",
        "symbol": "f\x1b[2J",
        "start_line": 1,
        "end_line": 2,
        "content": "def f():\n    return 1\n",
        "language": "python",
    }
    text = render_hits("f", [hit], "index", [])
    assert not any(line.startswith(forged) for line in text.splitlines()), text
    assert "evil\\n2. x.py" in text and "\x1b" not in text


def test_the_warm_up_loads_nothing_for_a_daemon_or_a_remote_model(
    indexed: Repo, index_dir: Path, tmp_path: Path
) -> None:
    """``Backend.warm`` opens the index only where it is the one to answer with a local
    model: not beside a daemon's socket, not for the ``remote`` backend (a server that does
    not answer would hold the index behind its retries)."""
    from codechunkd.config import load_settings
    from codechunkd.mcp_server.backend import Backend

    base = {"index.dir": str(index_dir)}
    remote = load_settings(
        env={},
        overrides={
            **base,
            "embedding.backend": "remote",
            "embedding.remote_url": "http://127.0.0.1:9/v1",
            "embedding.remote_model": "m",
        },
    )
    backend = Backend(remote)
    backend.warm()
    assert backend._index is None
    local = Backend(load_settings(env={}, overrides=base))
    local.paths.socket.parent.mkdir(parents=True, exist_ok=True)
    local.paths.socket.touch()  # a daemon's socket: its model answers
    try:
        local.warm()
        assert local._index is None
    finally:
        local.paths.socket.unlink()
    local.warm()
    assert local._index is not None


def test_a_daemon_starting_is_waited_for_not_answered_for(index_dir: Path) -> None:
    """A daemon that holds the index but has no socket yet (starting, or starting again on
    a deleted index directory): the tools wait for it, as ``codechunkd search`` does, and
    get its answer. They answered "no index" at once. The instant is made on purpose: the
    socket comes only once the backend has asked who holds the lock (its read of the lock
    file, seen by inotify), so the request was refused before."""
    from watchdog.observers.inotify_c import InotifyConstants, inotify_add_watch, inotify_init

    from codechunkd.config import load_settings
    from codechunkd.daemon.control import ControlServer
    from codechunkd.mcp_server.backend import Backend
    from codechunkd.storage.lease import writer_lock
    from codechunkd.storage.request import SearchRequest

    backend = Backend(load_settings(env={}, overrides={"index.dir": str(index_dir)}))
    paths = backend.paths
    answered: list[Any] = []
    with writer_lock(paths, what="codechunkd run"):  # as a daemon that is starting holds it
        fd = inotify_init()
        try:
            inotify_add_watch(fd, str(paths.runtime_lock).encode(), InotifyConstants.IN_OPEN)
            asker = threading.Thread(
                target=lambda: answered.append(backend.search(SearchRequest(query="x")))
            )
            asker.start()
            ready, _, _ = select.select([fd], [], [], scaled(60))
            assert ready, "the backend never asked who holds the index"
        finally:
            os.close(fd)
        hits = [{"path": "a.py", "start_line": 1, "end_line": 2}]
        server = ControlServer(paths.socket, {"search": lambda _req: {"hits": hits}})
        server.start()
        try:
            asker.join(scaled(60))
        finally:
            server.stop()
    assert answered and answered[0][:2] == (hits, "daemon"), answered


def _server_and_reader(index_dir: Path) -> tuple[int, int] | None:
    """The pids of ``codechunkd mcp --index-dir index_dir`` and of its reader process (a
    forked child runs the same command line; a spawned one runs Python's ``spawn_main``)."""
    ours: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state, ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if state != "Z":  # a dead child not reaped yet is no reader
            ours[int(entry.name)] = (int(ppid), cmd)
    servers = [p for p, (_, cmd) in ours.items() if f"mcp --index-dir {index_dir}" in cmd]
    for server in servers:
        if ours[server][0] in servers:
            continue  # a forked reader: its parent is the server
        readers = [  # not multiprocessing's resource tracker, which a spawn starts too
            p
            for p, (ppid, cmd) in ours.items()
            if ppid == server and ("spawn_main" in cmd or f"mcp --index-dir {index_dir}" in cmd)
        ]
        if len(readers) == 1:
            return server, readers[0]
    return None


def _state(pid: int) -> str | None:
    """A process's state letter (``R``, ``S``, ``Z``, ...), or None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _reapable(pid: int) -> bool:
    """Whether a killed process is dead as its parent sees it: a zombie whose threads have
    all ended (its first thread turns ``Z`` while the others still hold its files open,
    and its parent cannot reap it yet), or gone."""
    try:
        return _state(pid) in ("Z", None) and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc (Linux)")
def test_the_server_loads_neither_lance_nor_the_model_its_reader_does(
    indexed: Repo, index_dir: Path, tmp_path: Path
) -> None:
    """``codechunkd mcp`` answers from a reader process (``worker.BackendProcess``), forked
    before the server imports the MCP SDK: after every kind of tool call, Lance's and
    onnxruntime's libraries are mapped in the reader and not in the server, so what crashes
    in native code cannot take the agent's connection down."""
    log = tmp_path / "mcp.log"

    async def go() -> None:
        async with stdio_session(index_dir, log) as s:
            ok(await call(s, "search", query="distance between two points on a sphere"))
            ok(await call(s, "outline", path="pkg/geo.py"))
            ok(await call(s, "definition", name="slugify"))
            ok(await call(s, "references", name="slugify"))
            ok(await call(s, "repo_map"))
            found = _server_and_reader(index_dir)
            assert found is not None, "no server with one reader child"
            server, reader = found
            for lib in ("lance", "onnxruntime"):
                assert lib not in _maps(server), lib
                assert lib in _maps(reader), lib

    anyio.run(go)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc (Linux)")
def test_a_reader_that_dies_is_replaced_and_the_server_goes_on(
    indexed: Repo, index_dir: Path, tmp_path: Path
) -> None:
    """When the reader process dies (killed here; a segfault or the OOM killer alike), the
    server is not taken with it: the next call starts a new reader (spawned), which answers
    as the first did, and the log says what happened."""
    log = tmp_path / "mcp.log"
    query = "distance between two points on a sphere"

    async def go() -> None:
        async with stdio_session(index_dir, log) as s:
            first = ok(await call(s, "search", query=query))
            found = _server_and_reader(index_dir)
            assert found is not None
            server, reader = found
            os.kill(reader, signal.SIGKILL)
            wait_for(lambda: _reapable(reader), "the reader's death")
            again = ok(await call(s, "search", query=query))
            assert [h["id"] for h in again["hits"]] == [h["id"] for h in first["hits"]]
            now = _server_and_reader(index_dir)
            assert now is not None and now[0] == server and now[1] != reader

    anyio.run(go)
    text = log.read_text()
    assert "mcp_reader_died" in text and "signal 9" in text
