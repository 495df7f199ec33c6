"""sd_notify to a real datagram socket, and the unit files systemd would load."""

from __future__ import annotations

import os
import plistlib
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import scaled

from codechunkd.cli import main
from codechunkd.daemon.systemd import Notifier, plan, render

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).parent / "codechunkd")


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[socket.socket]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(tmp_path / "notify"))
    s.settimeout(2)
    yield s
    s.close()


def test_notifier_speaks_the_protocol(notify_socket: socket.socket) -> None:
    """READY=1 with a status, STATUS only when it changes, WATCHDOG=1, STOPPING=1."""
    n = Notifier({"NOTIFY_SOCKET": notify_socket.getsockname(), "WATCHDOG_USEC": "3000000"})
    assert n.watchdog_interval == 1.5
    n.ready("ready: 1 source(s)")
    msg = notify_socket.recv(4096).decode()
    assert "READY=1" in msg.splitlines()
    assert "STATUS=ready: 1 source(s)" in msg.splitlines()
    n.status("ready: 1 source(s)")  # unchanged: nothing sent
    n.ping()
    assert notify_socket.recv(4096) == b"WATCHDOG=1"
    n.stopping()
    assert notify_socket.recv(4096).startswith(b"STOPPING=1")


def test_a_reader_that_is_behind_never_blocks_the_notifier(tmp_path: Path) -> None:
    """A notify socket nobody reads fills after ~10 datagrams: later messages are dropped
    (``notify`` says False) instead of blocking the daemon's main loop on a send."""
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as unread:
        unread.bind(str(path))
        n = Notifier({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "1000000"})
        sent: list[bool] = []
        pinger = threading.Thread(
            target=lambda: sent.extend(n.notify("WATCHDOG=1") for _ in range(100))
        )
        pinger.start()
        pinger.join(scaled(10))
        assert not pinger.is_alive(), f"notify blocked after {len(sent)} messages"
        assert sent[0] and not sent[-1]


def test_notifier_is_a_no_op_without_a_socket() -> None:
    """In a terminal (no NOTIFY_SOCKET) nothing is sent and nothing fails."""
    n = Notifier({})
    assert not n.enabled
    assert not n.notify("READY=1")
    assert n.watchdog_interval is None
    other_pid = Notifier({"WATCHDOG_USEC": "1000", "WATCHDOG_PID": str(os.getpid() + 1)})
    assert other_pid.watchdog_interval is None


def test_abstract_socket_address(tmp_path: Path) -> None:
    """An address starting with @ is in the abstract namespace."""
    name = f"codechunkd-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind("\0" + name)
        s.settimeout(2)
        Notifier({"NOTIFY_SOCKET": "@" + name}).notify("READY=1")
        assert s.recv(100) == b"READY=1"


def test_checked_in_units_are_the_rendered_templates() -> None:
    """systemd/ holds exactly what `service install` writes (with the default path)."""
    assert (ROOT / "systemd/codechunkd.service").read_text() == render("user")
    assert (ROOT / "systemd/codechunkd@.service").read_text() == render("system")
    for kind in ("user", "system"):
        text = render(kind)
        for line in (
            "Type=notify",
            "WatchdogSec=",
            "Restart=on-failure",
            "Nice=",
            "IOSchedulingClass=idle",
            "ProtectSystem=strict",
            "ReadWritePaths=",
            "NoNewPrivileges=yes",
            "PrivateTmp=yes",
            "UMask=0027",
        ):
            assert line in text, (kind, line)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze missing")
@pytest.mark.parametrize(("kind", "name"), [("user", "codechunkd.service"), ("system", "x")])
def test_units_pass_systemd_analyze_verify(kind: str, name: str, tmp_path: Path) -> None:
    """systemd itself accepts the units (no warnings), with a real ExecStart path."""
    if kind == "system":
        unit = tmp_path / "codechunkd@.service"
        target = str(tmp_path / "codechunkd@ci.service")
        args = ["systemd-analyze", "verify", target]
    else:
        unit = tmp_path / name
        target = str(unit)
        args = ["systemd-analyze", "verify", "--user", target]
    unit.write_text(render(kind, EXE))
    done = subprocess.run(args, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ours = [line for line in done.stderr.splitlines() if "codechunkd" in line]
    assert ours == []


def test_service_install_print_and_write(capsys: pytest.CaptureFixture[str]) -> None:
    """--print writes nothing; --no-enable writes the user unit under XDG_CONFIG_HOME."""
    p = plan("user")
    with pytest.raises(SystemExit) as exc:
        main(["service", "install", "--user", "--print"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "Type=notify" in out
    assert "systemctl --user enable --now codechunkd.service" in out
    assert not p.path.exists()
    with pytest.raises(SystemExit) as exc:
        main(["service", "install", "--user", "--no-enable"])
    assert exc.value.code == 0
    assert p.path.read_text() == p.text
    assert str(Path(os.environ["XDG_CONFIG_HOME"])) in str(p.path)
    assert "systemctl --user daemon-reload" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["service", "install", "--system", "--print"])
    assert "codechunkd@.service" in capsys.readouterr().out


def _printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["service", "install", *argv, "--print"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_the_printed_unit_runs_with_the_given_index_and_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--index-dir` and `--config` reach the unit's ExecStart (absolute, quoted for systemd);
    an index outside the unit's writable paths, named on the command line or by the config
    file, gets a ReadWritePaths= line; systemd accepts the result; the launchd agent gets the
    same arguments."""
    index = tmp_path / "my index"
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[index]\ndir = "{tmp_path / "from-config"}"\n')
    out = _printed(["--user", "--index-dir", str(index), "--config", str(cfg)], capsys)
    start = next(x for x in out.splitlines() if x.startswith("ExecStart="))
    assert start.endswith(f' run --index-dir "{index}" --config {cfg}'), start
    assert f'ReadWritePaths="-{index}"' in out.splitlines()

    out = _printed(["--user", "--config", str(cfg)], capsys)
    assert f"ReadWritePaths=-{tmp_path / 'from-config'}" in out.splitlines()
    assert "--index-dir" not in out

    default = _printed(["--user"], capsys)  # the default index is writable already
    assert default.count("ReadWritePaths=") == 1
    assert next(x for x in default.splitlines() if x.startswith("ExecStart=")).endswith(" run")

    system = _printed(["--system", "--index-dir", str(index)], capsys)
    start = next(x for x in system.splitlines() if x.startswith("ExecStart="))
    assert start.endswith(f' run --index-dir "{index}" --config /etc/codechunkd/%i.toml'), start

    agent = _printed(
        ["--manager", "launchd", "--index-dir", str(index), "--config", str(cfg)], capsys
    )
    plist = plistlib.loads(agent.split("\n", 1)[1].split("# then run:")[0].encode())
    assert plist["ProgramArguments"][1:] == ["run", "--index-dir", str(index), "--config", str(cfg)]

    if shutil.which("systemd-analyze") is not None:
        unit = tmp_path / "codechunkd.service"
        unit.write_text(
            plan("user", EXE, run_args=["--index-dir", str(index)], index_dir=str(index)).text
        )
        done = subprocess.run(
            ["systemd-analyze", "verify", "--user", str(unit)],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
