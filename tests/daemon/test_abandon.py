"""A batch that outlives the shutdown: the real daemon, in a child process, abandons it.

The writer is held inside a batch on purpose: the embedding server (real HTTP on
127.0.0.1) stops answering once the first index is done, and the signal is sent only once
the edit's request has reached it. Only ``codechunkd run``'s entry point may end the
process there (``os._exit``); ``Service.run`` returns (see test_service.py), and the next
start repairs what the abandoned batch left pending.
"""

from __future__ import annotations

import ast
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import Repo, run_service, scaled, wait_for
from tests.daemon.test_service_e2e import Daemon, cli, main_source
from tests.stalling_server import DIM, StallingServer, serving

from codechunkd.config import load_settings
from codechunkd.daemon.control import SourceSpec
from codechunkd.daemon.service import Service

pytestmark = pytest.mark.slow


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[StallingServer]:
    """The server, and the daemon's settings pointing at it (in the environment)."""
    with serving() as srv:
        env = {
            "BACKEND": "remote",
            "REMOTE_URL": srv.url,
            "REMOTE_MODEL": "stall-test",
            "REMOTE_DIMENSION": str(DIM),
            "TIMEOUT": "3600",  # a held request would wait that long: only the shutdown ends it
            "RETRIES": "0",
        }
        for key, value in env.items():
            monkeypatch.setenv(f"CODECHUNKD_EMBEDDING_{key}", value)
        yield srv


def _hold_a_batch(repo: Repo, d: Daemon, server: StallingServer) -> None:
    """Index the repository, then start a batch the server will not answer, and return
    once its request has reached the server: the writer is inside the batch."""
    d.wait_notify("READY=1")
    wait_for(lambda: main_source(d)["fresh"], "the first index")
    server.stall.set()
    repo.write("app.py", "def serve_requests():\n    return 'edited_pangolin'\n")
    wait_for(lambda: server.held >= 1, "the edit's embedding request held by the server")


@pytest.mark.parametrize(
    ("how", "timeout_s", "code"),
    [("SIGTERM past the shutdown timeout", "0.5", 0), ("a second Ctrl-C", "3600", 130)],
)
def test_an_abandoned_batch_ends_the_process_and_the_next_start_repairs(
    repo: Repo,
    tmp_path: Path,
    index_dir: Path,
    server: StallingServer,
    how: str,
    timeout_s: str,
    code: int,
) -> None:
    """A batch held past the shutdown is abandoned (the wait for it said first, with the way
    out: a second Ctrl-C), the process ends with the lock, and the next start repairs it."""
    repo.write("app.py", "def serve_requests():\n    return 'first'\n")
    repo.write("lib/util.py", "def helper_util():\n    return 1\n")
    repo.commit("init")
    d = Daemon(tmp_path, index_dir, repo.path, shutdown_timeout_s=timeout_s)
    try:
        _hold_a_batch(repo, d, server)
        if code == 0:
            d.proc.send_signal(signal.SIGTERM)
        else:
            d.proc.send_signal(signal.SIGINT)
            wait_for(lambda: d.events("waiting_for_batch"), "the wait for the batch said")
            d.proc.send_signal(signal.SIGINT)
        assert d.stop(timeout=60) == code, d.log.read_text()[-3000:]
    finally:
        d.kill()
    (waiting,) = d.events("waiting_for_batch")  # what the shutdown waits for, and the way out
    assert waiting["repos"] == [str(repo.path)]
    assert waiting["timeout_s"] == float(timeout_s)
    assert "Ctrl-C again to stop now" in waiting["hint"]
    (abandoned,) = d.events("batch_abandoned")
    assert abandoned["forced"] is (code == 130)
    assert d.events("daemon_stopped")[-1]["abandoned"] is True
    state = json.loads((index_dir / "_codechunkd" / "state.json").read_text())
    assert state["sources"][0]["pending"] is not None  # what the next start must repair

    server.stall.clear()
    server.release.set()  # the held request is answered to nobody
    again = Daemon(tmp_path, index_dir, repo.path)
    try:
        again.wait_notify("READY=1")
        wait_for(lambda: main_source(again)["fresh"], "fresh again after the restart")
        hits = again.hits("serve requests", "app.py")
        assert any("edited_pangolin" in h["content"] for h in hits), hits
        assert again.stop() == 0
    finally:
        again.kill()
    checked = cli("verify", str(repo.path), "--index-dir", str(index_dir))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_service_in_process_returns_from_an_abandoned_batch(
    repo: Repo, index_dir: Path, server: StallingServer
) -> None:
    """In a test's own process the abandon path returns (with ``abandoned`` set) instead of
    ending the process: were it to call ``os._exit``, pytest would end here, and
    ``scripts/run_tests.py`` would fail the run as incomplete."""
    repo.write("app.py", "def serve_requests():\n    return 'first'\n")
    repo.commit("init")
    overrides = {
        "index.dir": str(index_dir),
        "daemon.shutdown_timeout_s": 0.2,
        "daemon.debounce_ms": 50,
        "daemon.nice": 0,
    }
    service = Service(load_settings(overrides=overrides), specs=[SourceSpec.parse(str(repo.path))])

    def drive() -> None:
        wait_for(service.ready.is_set, "ready")
        server.stall.set()
        repo.write("app.py", "def serve_requests():\n    return 'edited_pangolin'\n")
        wait_for(lambda: server.held >= 1, "the edit's embedding request held by the server")

    assert run_service(service, drive) == 0
    assert service.abandoned
    assert service.writer is not None and service.writer.is_alive()  # still in the batch
    server.release.set()
    service.writer.join(timeout=scaled(60))  # it finishes the batch it was in, then ends
    assert not service.writer.is_alive()
    service.lock.release()  # what the process's end would have done


SRC = Path(__file__).resolve().parents[2] / "src" / "codechunkd"


def _process_enders(tree: ast.Module) -> list[int]:
    """Lines of ``os._exit``/``sys.exit``/``os.abort`` calls outside an
    ``if __name__ == "__main__":`` block (a child process's own entry point)."""
    main_blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
    ]
    inside = {id(n) for block in main_blocks for n in ast.walk(block)}
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) in ("os._exit", "sys.exit", "os.abort")
        and id(node) not in inside
    ]


def test_only_the_command_entry_point_ends_the_process() -> None:
    """``os._exit`` and ``sys.exit`` are called in ``cli/__init__.py`` (``codechunkd``'s
    entry point, ``main``) and ``cli/daemon.py`` (``cmd_run``), and under
    ``if __name__ == "__main__":`` of child-process modules alone: everything
    else returns or raises, so nothing a test runs in-process can end pytest."""
    entry = {Path("cli/__init__.py"), Path("cli/daemon.py")}
    found = {
        str(p.relative_to(SRC)): lines
        for p in SRC.rglob("*.py")
        if p.relative_to(SRC) not in entry and (lines := _process_enders(ast.parse(p.read_text())))
    }
    assert found == {}, found
