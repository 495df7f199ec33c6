"""Which watcher backend runs: ``daemon.watcher``, or for ``auto`` what the OS does best.

Kept apart from ``watcher.py`` (the interface and the rules) because each backend module
imports that one; the inotify module is imported only when chosen (importing it needs a
libc with inotify).
"""

from __future__ import annotations

import sys

from codechunkd import platform as _platform
from codechunkd.daemon.watcher import POLL_INTERVAL_S, Sink, Watcher


def resolve_backend(choice: str, platform: str = sys.platform) -> str:
    """``auto`` → what this OS does best (``codechunkd.platform.default_watcher``)."""
    return _platform.default_watcher(platform) if choice == "auto" else choice


def make_watcher(
    sink: Sink,
    *,
    backend: str = "auto",
    max_watches: int = 0,
    poll_interval: float = POLL_INTERVAL_S,
    platform: str = sys.platform,
) -> Watcher:
    """The watcher ``daemon.watcher`` asks for (``auto``: inotify on Linux, native elsewhere)."""
    chosen = resolve_backend(backend, platform)
    if chosen == "inotify":
        from codechunkd.daemon.watch_inotify import InotifyWatcher  # Linux only: libc's inotify

        return InotifyWatcher(sink, max_watches=max_watches)
    from codechunkd.daemon.watch_observer import ObserverWatcher

    return ObserverWatcher(sink, polling=chosen == "polling", poll_interval=poll_interval)
