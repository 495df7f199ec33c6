"""systemd integration without a dependency: the notify protocol and the unit files.

``Notifier`` speaks ``sd_notify(3)``: one datagram per message to the
``NOTIFY_SOCKET`` named in the environment, and nothing at all when it is
unset, so the daemon runs the same in a terminal.  It sends ``READY=1`` as soon
as the control socket serves status and search (a first index goes on after
it, with its progress in ``STATUS=…``), ``STATUS=…`` when the one-line state changes,
``WATCHDOG=1`` at half the ``WATCHDOG_USEC`` interval and ``STOPPING=1``.

The unit templates live here (so an installed wheel can write them); the
copies under ``systemd/`` in the repository are rendered from them and a test
keeps the two identical.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codechunkd import atomicfile, logs
from codechunkd.platform import is_linux

log = logs.get_logger("codechunkd.systemd")


class Notifier:
    """``sd_notify`` to ``$NOTIFY_SOCKET``; a no-op when it is unset or the OS is not Linux
    (systemd exists only there; a stray variable elsewhere is not its socket)."""

    def __init__(
        self, env: Mapping[str, str] | None = None, *, platform: str = sys.platform
    ) -> None:
        env = os.environ if env is None else env
        addr = env.get("NOTIFY_SOCKET", "") if is_linux(platform) else ""
        self.address = "\0" + addr[1:] if addr.startswith("@") else addr
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        mine = (not pid or pid == str(os.getpid())) and is_linux(platform)
        self.watchdog_interval: float | None = (
            int(usec) / 2e6 if usec.isdigit() and int(usec) > 0 and mine else None
        )
        self._last_status = ""

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def notify(self, message: str) -> bool:
        if not self.address:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:  # not inherited (PEP 446)
                s.connect(self.address)
                # never blocks: a reader that is behind (its queue holds ~10 datagrams) loses
                # this message rather than stopping the daemon's main loop on a send
                s.send(message.encode(), socket.MSG_DONTWAIT)
        except OSError as exc:
            log.debug("sd_notify_failed", error=str(exc))
            return False
        return True

    def ready(self, status: str) -> None:
        self._last_status = status
        self.notify(f"READY=1\nSTATUS={status}\nMAINPID={os.getpid()}")

    def status(self, status: str) -> None:
        if status != self._last_status:
            self._last_status = status
            self.notify(f"STATUS={status}")

    def ping(self) -> None:
        self.notify("WATCHDOG=1")

    def stopping(self) -> None:
        self.notify("STOPPING=1\nSTATUS=stopping")

    def reloading(self, why: str = "on a new index directory") -> None:
        """The daemon starts again in this process (its index directory was deleted, or it
        gives its memory back): systemd waits for the next ``READY=1`` rather than for the
        process to end."""
        self.notify(f"RELOADING=1\nSTATUS=starting again {why}")


# -- units --------------------------------------------------------------------

DEFAULT_EXEC = "/usr/local/bin/codechunkd"

USER_UNIT = """\
# codechunkd for one developer: `codechunkd service install --user`
# (or copy to ~/.config/systemd/user/ and `systemctl --user enable --now codechunkd`).
# Sources: `codechunkd add PATH`, or `[daemon] sources` in ~/.config/codechunkd/config.toml.
[Unit]
Description=codechunkd: keeps a code search index fresh
After=default.target

[Service]
Type=notify
NotifyAccess=main
ExecStart={exec} run
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
RestartSec=5
# 2: bad settings, 5: the index is locked by another writer, 8: the index is damaged
# (`codechunkd index --rebuild` repairs it): restarting will not help
RestartPreventExitStatus=2 5 8
# ready = serving status and search (seconds); a first index goes on after it, in STATUS=
TimeoutStartSec=90
TimeoutStopSec=30
WatchdogSec=120
Nice=10
IOSchedulingClass=idle
CPUSchedulingPolicy=batch
Environment=LANCEDB_LOG=error
UMask=0027
NoNewPrivileges=yes
PrivateTmp=yes
ProtectSystem=strict
ReadWritePaths=-%h/.local/share/codechunkd -%h/.local/state/codechunkd -%h/.cache -%t

[Install]
WantedBy=default.target
"""

SYSTEM_UNIT = """\
# codechunkd on a CI box, one instance per settings file:
#   /etc/codechunkd/%i.toml   ([index] dir, [daemon] sources)
#   `codechunkd service install --system` then `systemctl enable --now codechunkd@ci`
# The index is group-readable (UMask=0027) so readers in group `codechunkd` can open it.
# Status: `sudo -u codechunkd XDG_RUNTIME_DIR=/run/codechunkd-%i codechunkd status`.
[Unit]
Description=codechunkd indexer (%i)
After=network-online.target
Wants=network-online.target

[Service]
Type=notify
NotifyAccess=main
User=codechunkd
Group=codechunkd
ExecStart={exec} run --config /etc/codechunkd/%i.toml
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
RestartSec=5
RestartPreventExitStatus=2 5 8
# ready = serving status and search (seconds); a first index goes on after it, in STATUS=
TimeoutStartSec=90
TimeoutStopSec=30
WatchdogSec=120
Nice=10
IOSchedulingClass=idle
CPUSchedulingPolicy=batch
Environment=LANCEDB_LOG=error
Environment=HOME=/var/lib/codechunkd/%i
Environment=XDG_DATA_HOME=/var/lib/codechunkd/%i
Environment=XDG_STATE_HOME=/var/lib/codechunkd/%i/state
Environment=XDG_CACHE_HOME=/var/cache/codechunkd/%i
Environment=XDG_RUNTIME_DIR=/run/codechunkd-%i
StateDirectory=codechunkd/%i
StateDirectoryMode=0750
CacheDirectory=codechunkd/%i
RuntimeDirectory=codechunkd-%i
RuntimeDirectoryMode=0750
UMask=0027
NoNewPrivileges=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectSystem=strict
ProtectHome=read-only
ProtectKernelTunables=yes
ProtectControlGroups=yes
RestrictSUIDSGID=yes
ReadWritePaths=/var/lib/codechunkd/%i /var/cache/codechunkd/%i /run/codechunkd-%i

[Install]
WantedBy=multi-user.target
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitPlan:
    """Where a unit goes and the commands that enable it."""

    name: str
    path: Path
    text: str
    commands: tuple[tuple[str, ...], ...]


def own_executable() -> str:
    """The ``codechunkd`` script of this installation (absolute, as systemd needs)."""
    candidate = Path(sys.executable).parent / "codechunkd"
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("codechunkd")
    return str(Path(found).resolve()) if found else DEFAULT_EXEC


#: What each unit may write under ``ProtectSystem=strict`` (``ReadWritePaths=``), with
#: ``%h`` as the user's home: an index elsewhere gets a ``ReadWritePaths=`` line of its own.
WRITABLE = {
    "user": ("%h/.local/share/codechunkd", "%h/.local/state/codechunkd", "%h/.cache"),
    "system": ("/var/lib/codechunkd", "/var/cache/codechunkd"),
}


def unit_word(arg: str, *, command: bool = True) -> str:
    """One word of a unit's line: ``%`` (and, in a ``command``, ``$``) escaped, quoted when
    it has spaces or quotes."""
    arg = arg.replace("%", "%%")
    if command:
        arg = arg.replace("$", "$$")
    if any(c.isspace() or c in "\"'\\;" for c in arg):
        arg = '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return arg


def writable_by_default(kind: str, path: str, home: Path | None = None) -> bool:
    """Whether ``path`` is inside what the ``kind`` unit may write anyway."""
    home_dir = str(Path.home() if home is None else home)
    roots = [Path(r.replace("%h", home_dir)) for r in WRITABLE[kind]]
    return any(Path(path).is_relative_to(r) for r in roots)


def render(
    kind: str,
    exe: str = DEFAULT_EXEC,
    *,
    run_args: Sequence[str] = (),
    index_dir: str | None = None,
) -> str:
    """The unit: ``run_args`` (``--index-dir``, ``--config``) follow ``run`` in ``ExecStart=``,
    and a local ``index_dir`` the unit could not write is added to ``ReadWritePaths=``."""
    template = USER_UNIT if kind == "user" else SYSTEM_UNIT
    if kind == "system" and "--config" in run_args:  # one settings file instead of %i's
        template = template.replace(" --config /etc/codechunkd/%i.toml", "")
    text = template.replace("{exec}", exe)
    if run_args:
        start = f"ExecStart={exe} run"
        text = text.replace(start, " ".join([start, *map(unit_word, run_args)]), 1)
    if index_dir is not None and not writable_by_default(kind, index_dir):
        line = next(x for x in text.splitlines() if x.startswith("ReadWritePaths="))
        text = text.replace(
            line, f"{line}\nReadWritePaths={unit_word('-' + index_dir, command=False)}", 1
        )
    return text


def plan(
    kind: str,
    exe: str | None = None,
    *,
    run_args: Sequence[str] = (),
    index_dir: str | None = None,
) -> UnitPlan:
    exe = exe or own_executable()
    text = render(kind, exe, run_args=run_args, index_dir=index_dir)
    if kind == "user":
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        return UnitPlan(
            name="codechunkd.service",
            path=Path(base) / "systemd" / "user" / "codechunkd.service",
            text=text,
            commands=(
                ("systemctl", "--user", "daemon-reload"),
                ("systemctl", "--user", "enable", "--now", "codechunkd.service"),
            ),
        )
    return UnitPlan(
        name="codechunkd@.service",
        path=Path("/etc/systemd/system/codechunkd@.service"),
        text=text,
        commands=(
            ("useradd", "--system", "--home-dir", "/var/lib/codechunkd", "codechunkd"),
            ("systemctl", "daemon-reload"),
            ("systemctl", "enable", "--now", "codechunkd@ci.service"),
        ),
    )


def install(p: UnitPlan, *, enable: bool) -> list[str]:
    """Write the unit atomically; run the enable commands.  Returns the commands not run."""
    p.path.parent.mkdir(parents=True, exist_ok=True)
    atomicfile.write_text(p.path, p.text)
    left: list[str] = []
    for cmd in p.commands:
        line = " ".join(cmd)
        manual = cmd[0] == "useradd" or "codechunkd@ci.service" in cmd  # needs a config first
        if manual or not enable or shutil.which(cmd[0]) is None:
            left.append(line)
            continue
        with contextlib.suppress(OSError):
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode == 0:
                continue
        left.append(line)
    return left
