"""The macOS service: a launchd user agent, written with ``plistlib`` and loaded with launchctl.

``codechunkd service install`` on macOS writes ``~/Library/LaunchAgents/<LABEL>.plist`` and
runs ``launchctl bootstrap gui/<uid> <plist>``; ``--print`` shows both on any OS.  The
agent is the user unit's counterpart (``systemd.py``):

- ``RunAtLoad`` and ``KeepAlive`` {``SuccessfulExit``: false}: started at login, restarted
  when it fails (launchd cannot spare exit codes 2 and 5 as ``RestartPreventExitStatus``
  does, so ``ThrottleInterval`` keeps a daemon that cannot start from spinning);
- ``ProcessType`` Background, ``LowPriorityIO``, ``Nice`` 10: background work, as the
  unit's ``Nice=10`` / ``IOSchedulingClass=idle``;
- logs to ``~/Library/Logs/codechunkd/codechunkd.log`` (launchd has no journal);
- ``Umask`` 0027 and ``LANCEDB_LOG=error`` as in the unit.  There is no ``sd_notify``:
  ``codechunkd status`` says whether it is ready.
"""

from __future__ import annotations

import contextlib
import os
import plistlib
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codechunkd import atomicfile
from codechunkd.daemon.systemd import UnitPlan, own_executable

LABEL = "io.codechunkd.agent"
THROTTLE_S = 30
"""Fewest seconds between two starts (launchd's own default is 10)."""


def log_path(home: Path | None = None) -> Path:
    return (
        (Path.home() if home is None else home)
        / "Library"
        / "Logs"
        / "codechunkd"
        / "codechunkd.log"
    )


def agent(exe: str, *, home: Path | None = None, run_args: Sequence[str] = ()) -> dict[str, Any]:
    """The agent's property list (launchd.plist(5) keys only); ``run_args`` (``--index-dir``,
    ``--config``) follow ``run``."""
    log = str(log_path(home))
    return {
        "Label": LABEL,
        "ProgramArguments": [exe, "run", *run_args],
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": THROTTLE_S,
        "ExitTimeOut": 30,
        "ProcessType": "Background",
        "LowPriorityIO": True,
        "Nice": 10,
        "Umask": 0o027,
        "StandardOutPath": log,
        "StandardErrorPath": log,
        "EnvironmentVariables": {"LANCEDB_LOG": "error"},
    }


def render(exe: str, *, home: Path | None = None, run_args: Sequence[str] = ()) -> str:
    return plistlib.dumps(agent(exe, home=home, run_args=run_args), sort_keys=False).decode()


def plan(
    exe: str | None = None,
    *,
    home: Path | None = None,
    uid: int | None = None,
    run_args: Sequence[str] = (),
) -> UnitPlan:
    """Where the agent goes and the launchctl commands that load it."""
    home = Path.home() if home is None else home
    uid = os.getuid() if uid is None else uid
    path = home / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    domain = f"gui/{uid}"
    return UnitPlan(
        name=f"{LABEL}.plist",
        path=path,
        text=render(exe or own_executable(), home=home, run_args=run_args),
        commands=(
            ("launchctl", "bootout", f"{domain}/{LABEL}"),
            ("launchctl", "bootstrap", domain, str(path)),
        ),
    )


def install(p: UnitPlan, *, enable: bool) -> list[str]:
    """Write the agent (and its log folder); load it.  Returns the commands not run."""
    p.path.parent.mkdir(parents=True, exist_ok=True)
    log_dir = Path(plistlib.loads(p.text.encode())["StandardErrorPath"]).parent
    log_dir.mkdir(parents=True, exist_ok=True)
    atomicfile.write_text(p.path, p.text)
    if not enable or shutil.which("launchctl") is None:
        return [" ".join(cmd) for cmd in p.commands if cmd[1] != "bootout"]
    left: list[str] = []
    for cmd in p.commands:
        with contextlib.suppress(OSError):
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode == 0 or cmd[1] == "bootout":  # not loaded yet: nothing to unload
                continue
        left.append(" ".join(cmd))
    return left
