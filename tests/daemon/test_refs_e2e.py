"""A running daemon keeps the references as fresh as the chunks (#31, acceptance 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import Repo
from tests.daemon.test_service_e2e import Daemon

from codechunkd.config import load_settings
from codechunkd.storage.reader import open_index

pytestmark = pytest.mark.slow


def test_an_added_call_is_in_refs_by_the_time_the_edit_is_searchable(
    repo: Repo, tmp_path: Path, index_dir: Path, daemons: list[Daemon]
) -> None:
    """Save an edit that adds a call: the moment search finds the new text, ``callers``
    already has the call (the file's references are written with its chunks, first)."""
    repo.write("lib/core.py", "def helper(x):\n    return x\n")
    repo.write("app.py", "def main():\n    return 'alpha_marker'\n")
    repo.commit("init")
    d = Daemon(tmp_path, index_dir, repo.path)
    daemons.append(d)
    d.wait_notify("READY=1")
    d.searchable("main", "app.py", "alpha_marker")
    index = open_index(settings=load_settings(overrides={"index.dir": str(index_dir)}))
    assert index.callers("helper") == []
    repo.write(
        "app.py",
        "from lib.core import helper\n\n\ndef main():\n    return helper('okapi_marker')\n",
    )
    d.searchable("main", "app.py", "okapi_marker")
    assert [(c.symbol, c.path, c.how) for c in index.callers("helper")] == [
        ("main", "app.py", "imported")
    ]
    assert d.stop() == 0
