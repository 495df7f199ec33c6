"""The launchd agent `service install` writes on macOS, checked against launchd.plist(5)."""

from __future__ import annotations

import os
import plistlib
import sys
from pathlib import Path
from typing import Any

import pytest

from codechunkd.cli import main
from codechunkd.daemon.launchd import LABEL, agent, plan, render

EXE = str(Path(sys.executable).parent / "codechunkd")

#: launchd.plist(5)'s keys that an agent like ours may use, with the plist type of each.
DOCUMENTED: dict[str, type | tuple[type, ...]] = {
    "Label": str,
    "Disabled": bool,
    "UserName": str,
    "GroupName": str,
    "Program": str,
    "ProgramArguments": list,
    "EnableGlobbing": bool,
    "KeepAlive": (bool, dict),
    "RunAtLoad": bool,
    "WorkingDirectory": str,
    "RootDirectory": str,
    "EnvironmentVariables": dict,
    "Umask": int,
    "TimeOut": int,
    "ExitTimeOut": int,
    "ThrottleInterval": int,
    "WatchPaths": list,
    "QueueDirectories": list,
    "StartOnMount": bool,
    "StartInterval": int,
    "StartCalendarInterval": (dict, list),
    "StandardInPath": str,
    "StandardOutPath": str,
    "StandardErrorPath": str,
    "Debug": bool,
    "WaitForDebugger": bool,
    "SoftResourceLimits": dict,
    "HardResourceLimits": dict,
    "Nice": int,
    "ProcessType": str,
    "AbandonProcessGroup": bool,
    "LowPriorityIO": bool,
    "LowPriorityBackgroundIO": bool,
    "MaterializeDatalessFiles": bool,
    "LaunchOnlyOnce": bool,
    "MachServices": dict,
    "Sockets": dict,
    "AssociatedBundleIdentifiers": (str, list),
}
KEEPALIVE_KEYS = {"SuccessfulExit", "NetworkState", "PathState", "OtherJobEnabled", "Crashed"}
PROCESS_TYPES = {"Background", "Standard", "Adaptive", "Interactive"}


def check_agent(doc: dict[str, Any]) -> None:
    """Every key is documented and of its documented type; what our agent needs is there."""
    for key, value in doc.items():
        assert key in DOCUMENTED, f"{key} is not a launchd.plist(5) key"
        assert isinstance(value, DOCUMENTED[key]), (key, value)
    assert doc["Label"] == LABEL
    args = doc["ProgramArguments"]
    assert all(isinstance(a, str) for a in args)
    assert Path(args[0]).is_absolute() and args[1:] == ["run"]
    assert doc["RunAtLoad"] is True
    assert isinstance(doc["KeepAlive"], dict) and set(doc["KeepAlive"]) <= KEEPALIVE_KEYS
    assert doc["KeepAlive"]["SuccessfulExit"] is False  # restarted when it fails
    assert doc["ProcessType"] in PROCESS_TYPES and doc["ProcessType"] == "Background"
    assert doc["LowPriorityIO"] is True
    assert -20 <= doc["Nice"] <= 20 and doc["Nice"] > 0
    for key in ("StandardOutPath", "StandardErrorPath"):
        assert Path(doc[key]).is_absolute()
        assert doc[key].endswith(".log")
    assert all(isinstance(v, str) for v in doc["EnvironmentVariables"].values())
    assert 0 <= doc["Umask"] <= 0o777


def test_rendered_agent_is_a_valid_plist_of_documented_keys(tmp_path: Path) -> None:
    """The XML parses with plistlib into exactly the agent, and passes the key/type check."""
    text = render(EXE, home=tmp_path)
    assert text.startswith("<?xml")
    doc = plistlib.loads(text.encode())
    assert doc == agent(EXE, home=tmp_path)
    check_agent(doc)
    assert doc["StandardErrorPath"] == str(tmp_path / "Library/Logs/codechunkd/codechunkd.log")


def test_the_check_rejects_an_undocumented_key_or_a_wrong_type() -> None:
    """The validation itself can fail: a typo'd key or a string where launchd wants a bool."""
    good = agent(EXE)
    with pytest.raises(AssertionError):
        check_agent({**good, "KeepAlives": True})
    with pytest.raises(AssertionError):
        check_agent({**good, "RunAtLoad": "yes"})


def test_plan_loads_the_agent_in_the_gui_domain(tmp_path: Path) -> None:
    """The agent goes to ~/Library/LaunchAgents and is bootstrapped into gui/<uid>."""
    p = plan(EXE, home=tmp_path, uid=501)
    assert p.path == tmp_path / "Library/LaunchAgents" / f"{LABEL}.plist"
    assert ("launchctl", "bootstrap", "gui/501", str(p.path)) in p.commands


def test_service_install_print_and_write_launchd(capsys: pytest.CaptureFixture[str]) -> None:
    """--manager launchd --print works on any OS and writes nothing; --no-enable writes a
    valid agent under HOME and the log folder, and says which launchctl command is left."""
    home = Path(os.environ["HOME"])
    target = home / "Library/LaunchAgents" / f"{LABEL}.plist"
    with pytest.raises(SystemExit) as exc:
        main(["service", "install", "--manager", "launchd", "--print"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "<key>ProcessType</key>" in out
    assert f"launchctl bootstrap gui/{os.getuid()} {target}" in out
    assert not target.exists()
    with pytest.raises(SystemExit) as exc:
        main(["service", "install", "--manager", "launchd", "--no-enable"])
    assert exc.value.code == 0
    check_agent(plistlib.loads(target.read_bytes()))
    assert (home / "Library/Logs/codechunkd").is_dir()
    assert "launchctl bootstrap" in capsys.readouterr().out


def test_launchd_system_agent_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Only a user agent exists: --system with launchd is a one-line error, exit 2."""
    with pytest.raises(SystemExit) as exc:
        main(["service", "install", "--manager", "launchd", "--system", "--print"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "user agent" in err
