"""Facts about the platform, kept in one place: which OS, where its conventions put files.

codechunkd runs on Linux and macOS (the watcher also on Windows and the BSDs).  Whatever
differs between them is decided here, from the arguments: every function takes the
platform (``sys.platform``) and the environment, with the real ones as defaults, so a test
on Linux can ask what happens on macOS.  The callers stay free of ``sys.platform`` checks.

- Directories: ``$XDG_*`` when set, on any OS; otherwise the OS's own convention
  (``~/.local/share`` and friends on Linux, ``~/Library/Application Support`` and
  ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows).
- The control socket: ``AF_UNIX`` paths hold at most 107 bytes on Linux and 103 on macOS
  and the BSDs (``sun_path`` is 108 and 104 bytes there, with the NUL), so a runtime
  directory too long for the socket is not used.
- glibc: its heap calls (``mallopt``, ``malloc_trim``) only where glibc is.
- The watcher and the service manager each OS has.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

DirKind = Literal["data", "config", "state", "cache"]

#: The XDG variable of each kind of directory, and its Linux default below HOME.
_XDG: dict[DirKind, tuple[str, str]] = {
    "data": ("XDG_DATA_HOME", ".local/share"),
    "config": ("XDG_CONFIG_HOME", ".config"),
    "state": ("XDG_STATE_HOME", ".local/state"),
    "cache": ("XDG_CACHE_HOME", ".cache"),
}
_MACOS: dict[DirKind, str] = {
    "data": "Library/Application Support",
    "config": "Library/Application Support",
    "state": "Library/Application Support",
    "cache": "Library/Caches",
}
#: The socket file's name below the runtime dir: 12 hex digits + ``.sock`` (IndexPaths.socket).
SOCKET_NAME_LEN = 17


def is_linux(platform: str = sys.platform) -> bool:
    return platform.startswith("linux")


def is_macos(platform: str = sys.platform) -> bool:
    return platform == "darwin"


def is_windows(platform: str = sys.platform) -> bool:
    return platform in ("win32", "cygwin")


def glibc(platform: str = sys.platform) -> bool:
    """True where the C library is glibc (Linux with glibc; not musl, macOS or Windows)."""
    if not is_linux(platform):
        return False
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):  # no confstr, or a libc without the name
        return False
    return bool(version and version.startswith("glibc"))


def user_dir(
    kind: DirKind,
    *,
    env: Mapping[str, str] | None = None,
    platform: str = sys.platform,
    home: Path | None = None,
) -> Path:
    """The user's ``kind`` directory (codechunkd's own folder goes below it)."""
    env = os.environ if env is None else env
    var, linux_default = _XDG[kind]
    if env.get(var):
        return Path(env[var])
    home = Path.home() if home is None else home
    if is_macos(platform):
        return home / _MACOS[kind]
    if is_windows(platform):
        local = env.get("LOCALAPPDATA") or env.get("APPDATA")
        return Path(local) if local else home / "AppData" / "Local"
    return home / linux_default


def socket_path_limit(platform: str = sys.platform) -> int:
    """Longest ``AF_UNIX`` path in bytes (``sun_path`` less its NUL)."""
    return 107 if is_linux(platform) else 103


def runtime_dir(*, env: Mapping[str, str] | None = None, platform: str = sys.platform) -> Path:
    """Where the control socket goes: ``$XDG_RUNTIME_DIR/codechunkd``, else a per-user /tmp dir.

    macOS has no ``XDG_RUNTIME_DIR`` and its ``$TMPDIR`` is long (``/var/folders/…``), so
    ``/tmp/codechunkd-<uid>`` it is; a runtime dir whose socket path would pass the
    platform's limit is skipped the same way (binding there would fail).
    """
    env = os.environ if env is None else env
    value = env.get("XDG_RUNTIME_DIR")
    if value:
        candidate = Path(value) / "codechunkd"
        if len(os.fsencode(candidate)) + 1 + SOCKET_NAME_LEN <= socket_path_limit(platform):
            return candidate
    getuid = getattr(os, "getuid", None)
    owner = str(getuid()) if getuid is not None else env.get("USERNAME", "user")
    import tempfile  # (with shutil and random: not for every command's start)

    base = tempfile.gettempdir() if is_windows(platform) else "/tmp"  # noqa: S108 - made 0700
    return Path(base) / f"codechunkd-{owner}"


def default_watcher(platform: str = sys.platform) -> Literal["inotify", "native"]:
    """inotify on Linux (counted watches, ignored trees skipped); watchdog's observer elsewhere."""
    return "inotify" if is_linux(platform) else "native"


def service_manager(platform: str = sys.platform) -> Literal["systemd", "launchd"] | None:
    """What ``codechunkd service install`` writes for: systemd units or a launchd agent."""
    if is_macos(platform):
        return "launchd"
    if is_linux(platform):
        return "systemd"
    return None


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask where the OS has one (Linux; a
    container or ``taskset`` narrows it), else every CPU the OS reports (macOS, Windows)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        with contextlib.suppress(OSError):
            return max(1, len(affinity(0)))
    return os.cpu_count() or 1


def resolved(path: str | os.PathLike[str]) -> Path:
    """``path`` made absolute, ``~`` expanded and symbolic links resolved; ``ConfigError``
    (exit 2) naming it when a link on the way loops: ``Path.resolve`` raises
    ``RuntimeError`` for that before Python 3.13 and ``OSError`` from then on."""
    from codechunkd.errors import ConfigError

    try:
        return Path(path).expanduser().resolve()
    except (RuntimeError, OSError) as exc:
        raise ConfigError(f"cannot resolve {path}: {exc}") from None
