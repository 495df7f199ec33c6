"""Which repositories ``search``, ``defs``, ``refs`` and their MCP tools read: by default the
indexed repository the asker is in and the indexed ones inside it (a daemon following
several projects answers about the one you work in), ``--repo`` another, ``--all-repos``
(MCP: ``repo: "*"``) every one, and every one from a folder in none.

Three real git repositories, one of them inside another (as a submodule or a nested clone
is), indexed into one real index by a real Syncer; the CLI in subprocesses and the MCP
server through the SDK's own stdio client, each started in the folder under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from codechunkd.config import Settings
from tests.conftest import Repo, scaled
from tests.test_mcp import _env, call, ok, stdio_session, sync_once, text

EXE = str(Path(sys.executable).parent / "codechunkd")


@dataclass(frozen=True)
class Three:
    app: Path
    inner: Path
    """A repository inside ``app`` (``vendor/inner``, which ``app`` ignores)."""
    lib: Path


def _repository(path: Path, files: dict[str, str]) -> Path:
    repo = Repo(path)
    for name, body in files.items():
        repo.write(name, body)
    repo.commit("init")
    return path


def _three(tmp_path: Path, settings: Settings, embedder: Any) -> Three:
    app = _repository(
        tmp_path / "app",
        {
            ".gitignore": "vendor/\n",
            "settings.py": 'def read_settings(path):\n    """Read the token file."""\n'
            "    return open(path).read()\n",
        },
    )
    inner = _repository(
        app / "vendor" / "inner",
        {"tool.py": 'def inner_tool(token):\n    """Check a token."""\n    return bool(token)\n'},
    )
    lib = _repository(
        tmp_path / "lib",
        {
            "headers.py": 'def parse_header(line):\n    """Split a header line into its token '
            'and value."""\n    return line.partition(":")\n',
            "use.py": "from headers import parse_header\n\n\ndef first(lines):\n"
            "    return parse_header(lines[0])\n",
        },
    )
    for path in (app, inner, lib):
        sync_once(path, settings, embedder)
    return Three(app.resolve(), inner.resolve(), lib.resolve())


def _cli(index_dir: Path, cwd: Path, *argv: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [EXE, *argv, "--index-dir", str(index_dir)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=scaled(120),
        cwd=cwd,
        check=False,
    )
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return done


def _searched(index_dir: Path, cwd: Path, *extra: str) -> set[str]:
    """The repositories of the hits of a full-text search for ``token`` (in every file)."""
    done = _cli(index_dir, cwd, "search", "token", "--mode", "text", "--json", *extra)
    return {h["repo"] for h in json.loads(done.stdout)}


def test_the_cli_reads_the_repository_it_is_run_in_and_the_ones_inside_it(
    tmp_path: Path, index_dir: Path, settings: Settings, embedder: Any
) -> None:
    """In ``app``: ``app`` and the repository inside it, not ``lib``; in that inner
    repository: it alone; ``--all-repos``, or a folder in no repository: all three;
    ``--repo`` names another from anywhere. An empty answer in ``app`` says what was not
    read; ``defs`` and ``refs`` read the same repositories."""
    r = _three(tmp_path, settings, embedder)
    everything = {str(r.app), str(r.inner), str(r.lib)}
    assert _searched(index_dir, r.app) == {str(r.app), str(r.inner)}
    assert _searched(index_dir, r.app / "vendor") == {str(r.app), str(r.inner)}
    assert _searched(index_dir, r.inner) == {str(r.inner)}
    assert _searched(index_dir, r.app, "--all-repos") == everything
    assert _searched(index_dir, tmp_path) == everything
    assert _searched(index_dir, r.app, "--repo", str(r.lib)) == {str(r.lib)}

    done = _cli(index_dir, r.app, "search", "parse_header", "--mode", "text")
    assert done.stdout.splitlines() == [
        "no results",
        f"note: only {r.app} was read, the repository you are in "
        "(another indexed repository: --all-repos)",
    ]
    assert "headers.py" in _cli(index_dir, r.app, "search", "parse_header", "--all-repos").stdout

    missing = _cli(index_dir, r.app, "defs", "parse_header", code=1)
    assert f"no definition of 'parse_header' in {r.app}" in missing.stderr
    assert "another indexed repository: --all-repos" in missing.stderr
    found = _cli(index_dir, r.app, "defs", "parse_header", "--all-repos", "--json")
    assert [(d["repo"], d["path"]) for d in json.loads(found.stdout)] == [
        (str(r.lib), "headers.py")
    ]
    assert not json.loads(_cli(index_dir, r.app, "refs", "parse_header", "--json").stdout)
    uses = json.loads(_cli(index_dir, r.lib, "refs", "parse_header", "--json").stdout)
    assert {(u["path"], u["kind"]) for u in uses} == {("use.py", "import"), ("use.py", "call")}
    inner = _cli(index_dir, r.app, "defs", "inner_tool", "--json")  # inside app: read
    assert [d["path"] for d in json.loads(inner.stdout)] == ["tool.py"]

    both = _cli(index_dir, r.app, "search", "x", "--repo", ".", "--all-repos", code=2)
    assert "not allowed with argument" in both.stderr


def test_the_mcp_tools_read_the_repository_the_server_runs_in(
    tmp_path: Path, index_dir: Path, settings: Settings, embedder: Any
) -> None:
    """A server started in ``app``: ``search`` answers from ``app`` and the repository
    inside it and says so (``Scope:``), ``repo: "*"`` from all three; ``definition`` and
    ``references`` likewise."""
    r = _three(tmp_path, settings, embedder)

    async def go() -> None:
        async with stdio_session(index_dir, tmp_path / "mcp.log", cwd=r.app) as session:
            here = await call(session, "search", query="token", mode="text")
            assert {h["repo"] for h in ok(here)["hits"]} == {str(r.app), str(r.inner)}
            assert (
                f"Scope: only {r.app} was read, the repository the server runs in (1 other "
                'indexed repository: repo "*" for every one).'
            ) in text(here)
            every = await call(session, "search", query="token", mode="text", repo="*")
            assert {h["repo"] for h in ok(every)["hits"]} == {str(r.app), str(r.inner), str(r.lib)}
            assert "Scope:" not in text(every)
            named = await call(session, "search", query="token", mode="text", repo=str(r.lib))
            assert {h["repo"] for h in ok(named)["hits"]} == {str(r.lib)}
            assert "Scope:" not in text(named)

            none = await call(session, "definition", name="parse_header")
            assert not ok(none)["definitions"], text(none)
            assert text(none) == (
                f"no definition of parse_header; only {r.app} was read, the repository the "
                'server runs in (1 other indexed repository: repo "*" for every one)'
            )
            found = await call(session, "definition", name="parse_header", repo="*")
            assert [d["path"] for d in ok(found)["definitions"]] == ["headers.py"]
            uses = await call(session, "references", name="parse_header", repo="*")
            assert {u["kind"] for u in ok(uses)["uses"]} == {"import", "call"}
            assert not ok(await call(session, "references", name="parse_header"))["uses"]

    anyio.run(go)
