"""SIGKILL at random instants during big updates: the next run repairs the index."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import Indexer, Repo

from codechunkd.git.changes import GitSource
from codechunkd.pipeline.verify import verify


def _module(i: int, variant: str) -> str:
    return (
        f'"""Module {i} ({variant})."""\n\n\n'
        f"def compute_{i}(x):\n"
        f'    """Compute value {i} for x ({variant})."""\n'
        f"    return x * {i} + {len(variant)}\n\n\n"
        f"class Thing{i}:\n"
        f"    def method(self):\n"
        f"        return {i}\n"
    )


def _run_index(repo: Path, index: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, CODECHUNKD_INDEX_BATCH_FILES="4")
    return subprocess.Popen(
        [sys.executable, "-m", "codechunkd", "index", str(repo), "--index-dir", str(index)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_sigkill_during_updates_is_repaired(repo: Repo, indexer: Indexer) -> None:
    for i in range(60):
        repo.write(f"pkg{i % 7}/m{i}.py", _module(i, "a"))
    repo.commit("A")
    repo.git("checkout", "-q", "-b", "other")
    for i in range(0, 60, 2):
        repo.write(f"pkg{i % 7}/m{i}.py", _module(i, "bb"))
    for i in range(1, 60, 6):
        repo.remove(f"pkg{i % 7}/m{i}.py")
    for i in range(60, 75):
        repo.write(f"new/m{i}.py", _module(i, "c"))
    repo.commit("B")
    # warm the embedding cache with both states so the killed runs never load the model
    indexer.sync(repo.path)
    repo.git("checkout", "-q", "main")
    indexer.sync(repo.path)
    index = Path(indexer.paths.uri)

    t0 = time.monotonic()
    repo.git("checkout", "-q", "other")
    full = _run_index(repo.path, index)
    assert full.wait(timeout=120) == 0
    span = time.monotonic() - t0

    rng = random.Random(1234)
    branches = ["main", "other"]
    for trial in range(8):
        repo.git("checkout", "-q", branches[trial % 2])
        proc = _run_index(repo.path, index)
        deadline = time.monotonic() + rng.uniform(0.2, span)
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the kill instant itself is what is random here
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        indexer.sync(repo.path)  # the restart
        report = verify(indexer.syncer.settings, indexer.store, GitSource(repo.path))
        assert report.ok, (trial, report.as_dict())
        assert {r["path"] for r in indexer.rows()} == set(repo.git("ls-files").splitlines())
