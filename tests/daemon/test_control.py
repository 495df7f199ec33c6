"""The control socket, the sources list, the status contract and the CLI around them."""

from __future__ import annotations

import json
import socket
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Repo

from codechunkd.cli import main
from codechunkd.daemon.control import (
    ControlServer,
    DaemonUnavailable,
    SourceSpec,
    merge_sources,
    read_sources,
    request,
    write_sources,
)
from codechunkd.daemon.status import (
    EXIT_DEGRADED,
    EXIT_EMPTY,
    EXIT_FRESH,
    EXIT_STALE,
    EXIT_STALLED,
    EXIT_STOPPED,
    daemon_state,
    exit_code,
    render_text,
    source_state,
)


def fail(_req: Mapping[str, Any]) -> Any:
    raise RuntimeError("boom")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ControlServer]:
    srv = ControlServer(
        tmp_path / "run" / "d.sock",
        {"echo": lambda req: {"got": req.get("x")}, "fail": fail},
    )
    srv.start()
    yield srv
    srv.stop()


def test_socket_is_private_and_answers_json_lines(server: ControlServer) -> None:
    """Mode 0600 in a 0700 directory; one answer per request line; errors are answers."""
    assert stat.S_IMODE(server.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(server.path.parent.stat().st_mode) == 0o700
    assert request(server.path, {"cmd": "echo", "x": 1}) == {"got": 1}
    assert request(server.path, {"cmd": "fail"}) == {"error": "boom"}
    assert "unknown command" in request(server.path, {"cmd": "nope"})["error"]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(server.path))
        s.sendall(b'{"cmd": "echo", "x": 2}\n[1]\n{"cmd": "echo", "x": 3}\n')
        buf = b""
        while buf.count(b"\n") < 3:
            buf += s.recv(4096)
    answers = [json.loads(line) for line in buf.splitlines()]
    assert answers[0] == {"got": 2}
    assert "error" in answers[1]
    assert answers[2] == {"got": 3}


def test_request_without_a_daemon_or_with_a_silent_one(tmp_path: Path) -> None:
    """No socket: unavailable; a socket nobody serves: stalled after the timeout."""
    with pytest.raises(DaemonUnavailable) as exc:
        request(tmp_path / "missing.sock", {"cmd": "ping"})
    assert not exc.value.stalled
    path = tmp_path / "silent.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.bind(str(path))
        silent.listen(1)
        with pytest.raises(DaemonUnavailable) as exc:
            request(path, {"cmd": "status"}, timeout=0.2)
    assert exc.value.stalled


def test_sources_file_round_trip_and_merge(tmp_path: Path) -> None:
    """PATH and PATH#REF specs; the file survives a round trip; merge keeps the first."""
    a = SourceSpec.parse(str(tmp_path / "a"))
    b = SourceSpec.parse(f"{tmp_path / 'mirror.git'}#refs/heads/main")
    assert b.ref == "refs/heads/main"
    assert str(b).endswith("mirror.git#refs/heads/main")
    file = tmp_path / "meta" / "sources.json"
    assert read_sources(file) == []
    write_sources(file, [a, b])
    assert read_sources(file) == [a, b]
    assert merge_sources([a], [b, a]) == [a, b]


def test_status_contract() -> None:
    """States and exit codes in their documented order of precedence."""
    fresh = {"fresh": True, "watcher": {"degraded": None}}
    assert source_state(fresh, stall_after=60) == "ready"
    assert source_state({**fresh, "pending_paths": 2}, stall_after=60) == "indexing"
    assert source_state({**fresh, "waiting_s": 61}, stall_after=60) == "stalled"
    long_cold_index = {**fresh, "busy_s": 3600, "stuck_s": 2}
    assert source_state(long_cold_index, stall_after=60) == "indexing"
    assert source_state({**long_cold_index, "stuck_s": 61}, stall_after=60) == "stalled"
    degraded = {**fresh, "watcher": {"degraded": "inotify watch limit"}}
    assert source_state(degraded, stall_after=60) == "degraded"
    assert daemon_state(["ready", "indexing", "degraded"]) == "degraded"
    assert daemon_state([]) == "ready"

    def doc(state: str, *sources: dict[str, Any]) -> dict[str, Any]:
        return {"daemon": {"state": state}, "sources": list(sources)}

    assert exit_code(doc("ready", {"fresh": True})) == EXIT_FRESH
    assert exit_code(doc("indexing", {"fresh": True})) == EXIT_STALE
    assert exit_code(doc("ready", {"fresh": False})) == EXIT_STALE
    assert exit_code(doc("ready")) == EXIT_EMPTY
    assert exit_code(doc("degraded", {"fresh": True})) == EXIT_DEGRADED
    assert exit_code(doc("stalled", {"fresh": True})) == EXIT_STALLED
    assert exit_code(doc("stopped", {"fresh": True})) == EXIT_STOPPED
    assert "daemon: stopped" in render_text(doc("stopped"))


def test_status_without_a_daemon_reports_stopped(
    index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No daemon: state `stopped` in --json and exit code 13."""
    (index_dir / "_codechunkd").mkdir(parents=True)  # what a writer makes first
    with pytest.raises(SystemExit) as exc:
        main(["status", "--json", "--index-dir", str(index_dir)])
    assert exc.value.code == EXIT_STOPPED
    doc = json.loads(capsys.readouterr().out)
    assert doc["daemon"]["state"] == "stopped"
    assert doc["sources"] == []


def test_add_and_remove_edit_the_sources_list(
    repo: Repo, index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """add resolves the repository root; remove, given any folder of it, drops it; a
    non-repository is exit 3, a folder of no listed source exit 2."""
    repo.write("a.py", "A = 1\n")
    repo.commit()
    (repo.path / "sub").mkdir()
    common = ["--index-dir", str(index_dir)]
    with pytest.raises(SystemExit) as exc:
        main(["add", str(repo.path / "sub"), *common])
    assert exc.value.code == 0
    assert "no daemon is running" in capsys.readouterr().out
    listed = read_sources(index_dir / "_codechunkd" / "sources.json")
    assert listed == [SourceSpec(path=str(repo.path.resolve()))]
    with pytest.raises(SystemExit) as exc:
        main(["add", str(tmp_path / "nowhere"), *common])
    assert exc.value.code == 3
    with pytest.raises(SystemExit) as exc:
        main(["remove", str(tmp_path), *common])  # above the repository: not a folder of it
    assert exc.value.code == 2
    assert f"(listed: {repo.path.resolve()})" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["remove", str(repo.path / "sub"), *common])
    assert exc.value.code == 0
    assert read_sources(index_dir / "_codechunkd" / "sources.json") == []
    with pytest.raises(SystemExit) as exc:
        main(["remove", str(repo.path), *common])
    assert exc.value.code == 2


def test_run_without_sources_is_a_usage_error(
    index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`codechunkd run` with nothing to watch says how to add a source."""
    with pytest.raises(SystemExit) as exc:
        main(["run", "--index-dir", str(index_dir)])
    assert exc.value.code == 2
    assert "codechunkd add PATH" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["run"], ["add"], ["remove"], ["service"], ["service", "install"], ["status"]]
)
def test_daemon_commands_have_help_and_are_documented(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Every daemon command answers --help and appears in docs/operations.md."""
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    assert "usage: codechunkd" in capsys.readouterr().out
    doc = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    assert f"codechunkd {' '.join(argv)}" in doc
