"""The real daemon with the portable watcher forced on Linux: edits and checkouts still land.

macOS, Windows and the BSDs run watchdog's observers, not inotify; the polling backend is
the one of them that runs the same everywhere, so this is the daemon as it runs off Linux
(less FSEvents itself), end to end: a subprocess, real events, the socket's search.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import Repo
from tests.daemon.test_service_e2e import Daemon

pytestmark = pytest.mark.slow


def test_daemon_on_the_polling_watcher_follows_edits_and_checkouts(
    repo: Repo, tmp_path: Path, index_dir: Path
) -> None:
    """CODECHUNKD_DAEMON_WATCHER=polling: an edit, a new file and a branch switch are searchable."""
    repo.write("app.py", "def handle_request():\n    return 'alpha_marker'\n")
    repo.commit("init")
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("feature.py", "def feature_only_walrus():\n    return 'walrus'\n")
    repo.commit("feature")
    repo.git("checkout", "-q", "main")
    d = Daemon(tmp_path, index_dir, repo.path, watcher="polling")
    try:
        d.wait_notify("READY=1")
        d.searchable("handle request", "app.py", "alpha_marker")
        watcher = d.status()["sources"][0]["watcher"]
        assert watcher["backend"] == "polling"
        assert watcher["degraded"] is None
        repo.write("app.py", "def handle_request():\n    return 'beta_pangolin'\n")
        d.searchable("handle request", "app.py", "beta_pangolin")
        repo.write("lib/new_mod.py", "def brand_new_okapi():\n    return 'okapi'\n")
        d.searchable("brand new", "lib/new_mod.py", "okapi")
        repo.git("checkout", "-q", "feature")  # HEAD.lock renamed over HEAD: a HEAD move
        d.searchable("feature only", "feature.py", "walrus")
        assert d.stop() == 0
    finally:
        d.kill()
