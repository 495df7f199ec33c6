"""A source's repository moved away, deleted, put back or cloned again under a running
daemon: what was indexed stays searchable, ``status`` says the repository is gone, and the
daemon takes it up again once it is back, watching the folder now at the path."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Repo, wait_for
from tests.daemon.test_service_e2e import Daemon, cli
from tests.test_mcp import tool_text

pytestmark = pytest.mark.slow


def _source(d: Daemon) -> dict[str, Any]:
    (only,) = d.status()["sources"]
    return dict(only)


def _gone(d: Daemon) -> str | None:
    failing = _source(d).get("failing") or ""
    return failing if "the repository is gone" in failing else None


def test_a_repository_moved_away_and_back_then_cloned_again(
    repo: Repo, tmp_path: Path, index_dir: Path, daemons: list[Daemon]
) -> None:
    """Moved away: said gone (it failed with "head reference does not exist"), by
    ``status`` and the MCP ``status`` tool, its rows kept; moved back: its edit made while
    away is indexed; deleted and cloned again at the same place: indexed, and the new
    folder's edits heard."""
    repo.write("app.py", "def handle_request():\n    return 'alpha_marker'\n")
    repo.commit("init")
    d = Daemon(tmp_path, index_dir, repo.path)
    daemons.append(d)
    d.wait_notify("READY=1")
    d.searchable("handle request", "app.py", "alpha_marker")

    away = tmp_path / "away"
    repo.path.rename(away)
    # an edit there: the watches followed the folder, so the daemon hears of it at once
    (away / "app.py").write_text("def handle_request():\n    return 'moved_marker'\n")
    said = wait_for(lambda: _gone(d), "the repository said gone", 60)
    assert f"{repo.path}: the repository is gone (moved or deleted?)" in said
    assert f"`codechunkd remove {repo.path}`" in said
    assert d.status()["daemon"]["state"] == "degraded"
    status = cli("status", "--index-dir", str(index_dir))
    assert "branch ?, HEAD ?," in status.stdout, status.stdout  # not "HEAD unborn"
    mcp = asyncio.run(tool_text(index_dir, tmp_path / "mcp.log", "status"))  # an agent is told too
    assert "branch ?, HEAD ?, indexed " in mcp and f"FAILING: {said}" in mcp, mcp
    assert "alpha_marker" in "".join(h["content"] for h in d.hits("handle request"))

    away.rename(repo.path)  # put back: its edit (made while away) is indexed
    d.searchable("handle request", "app.py", "moved_marker", 60)
    wait_for(lambda: not _source(d).get("failing"), "the failure cleared", 60)
    assert d.events("source_back")

    clone = tmp_path / "clone"
    repo.git("clone", "-q", str(repo.path), str(clone))
    shutil.rmtree(repo.path)
    wait_for(lambda: _gone(d), "the deleted repository said gone", 60)
    clone.rename(repo.path)  # cloned again at the same place: a new folder to watch
    again = Repo(repo.path)
    again.write("b.py", "def beta_marker_ocelot():\n    return 2\n")
    again.commit("b")
    d.searchable("beta marker ocelot", "b.py", "beta_marker_ocelot", 120)
    again.write("c.py", "def gamma_marker_heron():\n    return 3\n")  # heard by the new watch
    d.searchable("gamma marker heron", "c.py", "gamma_marker_heron", 60)
    assert d.stop() == 0


def test_a_listed_repository_missing_at_start_is_said_and_taken_up_when_back(
    repo: Repo, tmp_path: Path, index_dir: Path, daemons: list[Daemon]
) -> None:
    """A source of ``sources.json`` not there when the daemon starts (a disk not mounted
    yet): ``status`` lists it, gone, with what the index holds of it (it said "nothing
    indexed yet" and forgot it until a reload), and it is indexed and watched once back."""
    repo.write("app.py", "def handle_request():\n    return 'alpha_marker'\n")
    repo.commit("init")
    added = cli("add", str(repo.path), "--index-dir", str(index_dir))
    assert added.returncode == 0, added.stdout + added.stderr
    indexed = cli("index", str(repo.path), "--index-dir", str(index_dir))
    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    away = tmp_path / "away"
    repo.path.rename(away)
    d = Daemon(tmp_path, index_dir)
    daemons.append(d)
    d.wait_notify("READY=1")
    said = wait_for(lambda: _gone(d), "the missing source said gone", 60)
    assert f"{repo.path}: the repository is gone" in said
    status = cli("status", "--index-dir", str(index_dir))
    assert status.returncode == 11, status.stdout + status.stderr  # degraded
    assert f"{repo.path}  [" in status.stdout and "1 files, " in status.stdout, status.stdout

    away.rename(repo.path)
    d.searchable("handle request", "app.py", "alpha_marker", 60)
    wait_for(lambda: not _source(d).get("failing"), "the failure cleared", 60)
    repo.write("b.py", "def beta_marker_ocelot():\n    return 2\n")  # heard: it is watched
    d.searchable("beta marker ocelot", "b.py", "beta_marker_ocelot", 60)
    assert d.stop() == 0
