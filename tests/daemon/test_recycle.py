"""A daemon that gives its memory back by starting again in a new process image.

Lance keeps some of what each commit allocates (docs/operations.md, Measured), so the
idle daemon, its memory grown past ``daemon.recycle_growth_mb`` over what it was when first
idle, execs ``codechunkd run`` again: the same pid for systemd (``RELOADING=1``, then
``READY=1``), its sources and index, the writer lock waited for if another writer took it
in between. The real command in a subprocess, a real repository and index, systemd's notify
socket read as systemd reads it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from tests.conftest import Repo, scaled, wait_for
from tests.daemon.test_service_e2e import EXE, Daemon, cli

from codechunkd.config import load_settings
from codechunkd.daemon.control import DaemonUnavailable
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.lease import writer_lock


def _readies(d: Daemon) -> int:
    return "".join(d.messages).count("READY=1")


@pytest.mark.slow
def test_a_daemon_asked_to_start_again_execs_itself_and_goes_on(
    repo: Repo, tmp_path: Path, index_dir: Path, daemons: list[Daemon]
) -> None:
    """``recycle`` on the control socket: the daemon stops and execs itself, the same
    process (pid) says ``RELOADING=1`` then ``READY=1`` again, and the new image follows the
    repository (a commit made after it is searchable) and stops on SIGTERM with 0."""
    repo.write("app.py", "def handle_request():\n    return 'alpha_marker'\n")
    repo.commit("init")
    d = Daemon(tmp_path, index_dir, repo.path)
    daemons.append(d)
    d.wait_notify("READY=1")
    wait_for(lambda: d.status()["daemon"]["state"] == "ready", "the first index", 300)

    assert d.call({"cmd": "recycle"}) == {"ok": True}
    wait_for(lambda: _readies(d) == 2, "READY=1 from the new image", 120)
    said = "".join(d.messages)
    assert said.index("RELOADING=1") < said.rindex("READY=1"), d.messages
    assert "STOPPING=1" not in said, d.messages
    assert d.proc.poll() is None
    assert [e["times"] for e in d.events("daemon_recycled")] == [1]
    assert [e["why"] for e in d.events("daemon_recycling")] == ["asked to"]

    repo.write("b.py", "def beta_marker_ocelot():\n    return 2\n")
    repo.commit("b")
    d.searchable("beta marker ocelot", "b.py", "beta_marker_ocelot", 120)
    assert d.status()["daemon"]["pid"] == d.proc.pid
    assert d.stop() == 0
    assert "".join(d.messages).count("STOPPING=1") == 1, d.messages


@pytest.mark.slow
def test_memory_grown_past_the_limit_while_idle_starts_the_daemon_again(
    repo: Repo, tmp_path: Path, index_dir: Path, daemons: list[Daemon]
) -> None:
    """With ``daemon.recycle_growth_mb`` at 1 MiB, the batches of a few commits grow the
    idle daemon's memory past it: it says how much (``daemon_recycling``) and starts again,
    the same process, ready."""
    repo.write("app.py", "def handle_request():\n    return 'alpha_marker'\n")
    repo.commit("init")
    d = Daemon(tmp_path, index_dir, repo.path, recycle_growth_mb="1")
    daemons.append(d)
    d.wait_notify("READY=1")
    wait_for(lambda: d.status()["daemon"]["state"] == "ready", "the first index", 300)

    def grown() -> bool:
        """The recycling said; else a commit of 40 more functions once the last is indexed."""
        if d.events("daemon_recycling"):
            return True
        try:
            source = d.status()["sources"][0]
        except DaemonUnavailable:  # stopping, to start again: the log says so next turn
            return False
        if source["commit"] != source["head"] or source["pending_paths"]:
            return False
        n = len(list(repo.path.glob("mod*.py")))
        body = "".join(f"def step_{n}_{i}(x):\n    return x + {i}\n\n\n" for i in range(40))
        repo.write(f"mod{n}.py", body)
        repo.commit(f"mod{n}")
        return False

    wait_for(grown, "the daemon starting again on its grown memory", 240)
    [event] = d.events("daemon_recycling")[:1]
    assert event["why"].startswith("grown from "), event
    wait_for(lambda: _readies(d) >= 2, "READY=1 from the new image", 120)
    assert d.proc.poll() is None
    d.wait_notify("RELOADING=1")


def test_a_daemon_started_again_waits_for_a_writer_that_took_the_lock(
    repo: Repo, tmp_path: Path, index_dir: Path
) -> None:
    """The new image of a daemon that let go of its lock a moment ago (``CODECHUNKD_RECYCLED``
    set) finds another writer holding it: it waits (``waiting_for_writer_lock``), where a
    daemon started by hand stops with exit 5, and starts once the lock is free."""
    repo.write("app.py", "def handle_request():\n    return 'alpha_marker'\n")
    repo.commit("init")
    paths = IndexPaths.of(load_settings(env={}, overrides={"index.dir": str(index_dir)}))
    with writer_lock(paths, what="codechunkd index"):
        refused = cli("run", str(repo.path), "--index-dir", str(index_dir))
        assert refused.returncode == 5, refused.stderr
        d = Daemon(tmp_path, index_dir, repo.path, env={"CODECHUNKD_RECYCLED": "1"})
        try:
            wait_for(lambda: d.events("waiting_for_writer_lock"), "the daemon waiting", 60)
            assert d.proc.poll() is None
        except BaseException:
            d.kill()
            raise
    try:
        d.wait_notify("READY=1")
        assert [e["times"] for e in d.events("daemon_recycled")] == [1]
        assert d.stop() == 0
    finally:
        d.kill()


def test_the_growth_limit_is_a_setting_with_bounds(tmp_path: Path) -> None:
    """``daemon.recycle_growth_mb`` past its bounds is refused by name (exit 2)."""
    done = subprocess.run(
        [EXE, "status", "--index-dir", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        env={**os.environ, "CODECHUNKD_DAEMON_RECYCLE_GROWTH_MB": "-1"},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "daemon.recycle_growth_mb" in done.stderr
