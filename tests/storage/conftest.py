"""What the damage tests share: one tiny repository and its healthy index, per module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import Repo


@pytest.fixture(scope="module")
def indexed(
    tmp_path_factory: pytest.TempPathFactory, module_isolated: None, exported_model: Path
) -> tuple[Repo, Path]:
    """A repository and its healthy index, made once by the real CLI.  The index names its
    repository by path, so every case's copy of the index shares this one repository (which
    no case changes)."""
    base = tmp_path_factory.mktemp("damage")
    repo = Repo(base / "repo")
    repo.write("geo.py", "def haversine(a, b):\n    return great_circle(a, b)\n")
    repo.write("text.py", "class Slug:\n    def make(self, t):\n        return t.lower()\n")
    repo.commit("init")
    exe = str(Path(sys.executable).parent / "codechunkd")
    done = subprocess.run(
        [exe, "index", str(repo.path), "--index-dir", str(base / "index")],
        capture_output=True,
        text=True,
        env=dict(os.environ, LANCEDB_LOG="error"),
    )
    assert done.returncode == 0, done.stderr
    return repo, base / "index"
