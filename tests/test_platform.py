"""The platform facts, asked for Linux, macOS and Windows on whatever machine runs the tests."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from codechunkd import heap, platform
from codechunkd.config.loader import load_settings
from codechunkd.daemon.systemd import Notifier
from codechunkd.daemon.watchers import make_watcher, resolve_backend
from codechunkd.errors import ConfigError

HOME = Path("/home/ann")


def test_macos_dirs_follow_library_conventions_unless_xdg_is_set() -> None:
    """macOS: Application Support for data, config and state, Caches for caches; XDG wins."""
    mac = {k: platform.user_dir(k, env={}, platform="darwin", home=HOME) for k in platform._XDG}
    assert mac == {
        "data": HOME / "Library/Application Support",
        "config": HOME / "Library/Application Support",
        "state": HOME / "Library/Application Support",
        "cache": HOME / "Library/Caches",
    }
    env = {"XDG_CACHE_HOME": "/x/cache"}
    assert platform.user_dir("cache", env=env, platform="darwin", home=HOME) == Path("/x/cache")


def test_linux_and_windows_dirs() -> None:
    """Linux: the XDG defaults below HOME; Windows: LOCALAPPDATA."""
    assert platform.user_dir("data", env={}, platform="linux", home=HOME) == HOME / ".local/share"
    assert platform.user_dir("state", env={}, platform="linux", home=HOME) == HOME / ".local/state"
    win = platform.user_dir("config", env={"LOCALAPPDATA": "C:/L"}, platform="win32", home=HOME)
    assert win == Path("C:/L")


def test_default_paths_come_from_the_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings' defaults (index dir, config file) use the platform's dirs."""
    monkeypatch.delenv("XDG_DATA_HOME")
    settings = load_settings(env={})
    assert settings.index.dir == str(platform.user_dir("data") / "codechunkd" / "index")
    if sys.platform.startswith("linux"):
        assert settings.index.dir == str(Path.home() / ".local/share/codechunkd/index")


def test_runtime_dir_avoids_socket_paths_past_the_platform_limit() -> None:
    """A runtime dir whose socket path would pass sun_path (103 bytes on macOS, 107 on
    Linux) is not used; /tmp/codechunkd-<uid> is (macOS's $TMPDIR is long too)."""
    assert platform.socket_path_limit("darwin") == 103
    assert platform.socket_path_limit("linux") == 107
    short = platform.runtime_dir(env={"XDG_RUNTIME_DIR": "/run/user/501"}, platform="darwin")
    assert short == Path("/run/user/501/codechunkd")
    long = "/" + "d" * 75  # 76 + len("/codechunkd/") + 17 = 105: fits Linux's 107, not 103
    assert platform.runtime_dir(env={"XDG_RUNTIME_DIR": long}, platform="linux") == Path(
        long, "codechunkd"
    )
    fallback = platform.runtime_dir(env={"XDG_RUNTIME_DIR": long}, platform="darwin")
    assert fallback == Path(f"/tmp/codechunkd-{os.getuid()}")
    assert platform.runtime_dir(env={}, platform="darwin") == fallback


def test_a_socket_at_the_longest_accepted_path_binds(tmp_path: Path) -> None:
    """The limit is the real one here: a path of exactly the limit binds, one byte more fails."""
    limit = platform.socket_path_limit()
    base = str(tmp_path)
    fits = base + "/" + "s" * (limit - len(base) - 1)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(fits)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s, pytest.raises(OSError):
        s.bind(fits + "x")


def test_glibc_calls_only_where_glibc_is() -> None:
    """glibc's heap calls are skipped on macOS and Windows; here they run only on glibc."""
    assert not platform.glibc("darwin")
    assert not platform.glibc("win32")
    here = platform.glibc()
    assert (heap._libc() is not None) == here
    heap.release_freed_memory()  # a no-op, or malloc_trim: never an error
    heap.limit_arenas()


def test_sd_notify_is_a_no_op_off_linux(tmp_path: Path) -> None:
    """A NOTIFY_SOCKET in the environment of a macOS process is not systemd's: nothing sent."""
    env = {"NOTIFY_SOCKET": str(tmp_path / "n.sock"), "WATCHDOG_USEC": "1000000"}
    mac = Notifier(env, platform="darwin")
    assert not mac.enabled
    assert not mac.notify("READY=1")
    assert mac.watchdog_interval is None
    assert Notifier(env, platform="linux").enabled


def test_watcher_choice_per_platform() -> None:
    """auto: inotify on Linux, watchdog's native observer on macOS, Windows and the BSDs."""
    assert resolve_backend("auto", "linux") == "inotify"
    for other in ("darwin", "win32", "freebsd14"):
        assert resolve_backend("auto", other) == "native"
    assert resolve_backend("polling", "linux") == "polling"
    w = make_watcher(lambda *_a, **_k: None, backend="auto", platform="darwin")
    try:
        assert w.backend == "native"
    finally:
        w.stop()


def test_service_manager_per_platform() -> None:
    """`service install` writes systemd units on Linux and a launchd agent on macOS."""
    assert platform.service_manager("linux") == "systemd"
    assert platform.service_manager("darwin") == "launchd"
    assert platform.service_manager("win32") is None


def test_daemon_watcher_setting_is_checked() -> None:
    """daemon.watcher takes auto|inotify|native|polling; anything else is a clear error."""
    assert load_settings(env={"CODECHUNKD_DAEMON_WATCHER": "polling"}).daemon.watcher == "polling"
    with pytest.raises(ConfigError, match=r"daemon\.watcher"):
        load_settings(env={"CODECHUNKD_DAEMON_WATCHER": "fsevents"})
