"""A sync killed at any write boundary leaves an index that the next sync repairs.

Every write of a sync is bracketed by a crash point (storage/crashpoints.py).  A
first run of the real ``codechunkd index`` records the crash points that one sync
crosses; then, for each of them, another run is killed (SIGKILL, sent by the
process to itself) exactly there, the next sync runs, and the index must equal a
clean build: ``verify`` clean, the same row ids (none lost, none twice), the same
manifest, the state no longer pending.  One more test kills from outside, on an
observed condition, as an operator or the OOM killer would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Indexer, Repo, scaled

from codechunkd.config import Settings, load_settings
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.verify import verify
from codechunkd.storage.crashpoints import AT_ENV, TRACE_ENV

ENV = {
    "CODECHUNKD_INDEX_BATCH_FILES": "2",
    "CODECHUNKD_INDEX_VECTOR_INDEX_ROWS": "4",  # the vector index is built during the sync
    "CODECHUNKD_INDEX_FOLD_ROWS": "4",  # and folded into during it
    "CODECHUNKD_EMBEDDING_THREADS": "1",  # no thread-count measurement in every process
}

BOUNDARIES = {
    f"{write}.{when}"
    for write, whens in {
        "put_state": ("before", "committed"),
        "state_file": ("before", "after"),
        "cache_put": ("before", "after"),
        "write_batch": ("before", "references_committed", "chunks_committed", "after"),
        "fts_index": ("before", "after"),
        "vector_index": ("before", "after"),
        "fold": ("before", "compacted", "indexed", "after"),
        "sync": ("pending", "applied", "state_written", "done"),
    }.items()
    for when in whens
}
"""Every crash point a sync can cross: the scenario below must cross them all."""


def _module(i: int) -> str:
    return (
        f'"""Module {i}."""\n\n\n'
        f"def compute_{i}(x):\n"
        f'    """Compute value {i} for x."""\n'
        f"    return x * {i}\n\n\n"
        f"class Thing{i}:\n"
        f"    def method(self):\n"
        f"        return {i}\n"
    )


def _settings(index: Path, extra: dict[str, str] | None = None) -> Settings:
    return load_settings(env={**ENV, **(extra or {})}, overrides={"index.dir": str(index)})


def _index(
    repo: Path, index: Path, extra: dict[str, str], *flags: str
) -> subprocess.CompletedProcess[str]:
    """One real ``codechunkd index`` process."""
    return subprocess.run(
        [sys.executable, "-m", "codechunkd", "index", str(repo), "--index-dir", str(index), *flags],
        env={**os.environ, **ENV, **extra},
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )


def _snapshot(ix: Indexer, repo: Path) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    """The chunk and reference rows (sorted, duplicates kept) and the file manifest."""
    rows = sorted((r["id"], *sorted(r.items())) for r in ix.rows())
    refs = ix.store.db.open_table("references").search().limit(None).to_arrow().to_pylist()
    rows += sorted(
        (r["id"], *sorted((k, v) for k, v in r.items() if k != "indexed_at")) for r in refs
    )
    return rows, dict(ix.store.manifest(GitSource(repo).source.id))


def _assert_repaired(ix: Indexer, settings: Settings, repo: Repo, clean: Any, where: str) -> None:
    """The index equals a clean build of the repository as it is, and says so."""
    report = verify(settings, ix.store, GitSource(repo.path))
    assert report.ok, (where, report.as_dict())
    rows, manifest = _snapshot(ix, repo.path)
    dupes = [i for i, n in Counter(r[0] for r in rows).items() if n > 1]
    assert not dupes, (where, dupes)
    assert (rows, manifest) == clean, where
    state = ix.store.state(GitSource(repo.path).source.id)
    assert state is not None and state.pending is None and state.commit == repo.head(), where


def _clean_build(repo: Repo, tmp_path: Path, embedder: Any) -> Any:
    settings = _settings(tmp_path / "clean")
    ix = Indexer(settings, embedder)
    try:
        ix.sync(repo.path)
        assert verify(settings, ix.store, GitSource(repo.path)).ok
        return _snapshot(ix, repo.path)
    finally:
        ix.close()


@pytest.mark.slow
def test_a_sync_killed_at_each_write_boundary_is_repaired_by_the_next(
    repo: Repo, tmp_path: Path, embedder: Any
) -> None:
    """Kill ``codechunkd index`` at every crash point of one sync: each time the next sync
    repairs the index to exactly a clean build's rows, manifest and state.

    The sync goes from an index whose files have no chunk rows (a binary file, an empty
    module) to a commit that changes the empty module, deletes the binary and adds three
    modules, in batches of two files: a replacing batch with a delete (``merge_insert``),
    an appending batch, the first full-text index, the vector index, a fold, the cache
    writes and the state before and after, so the run crosses every boundary in
    ``BOUNDARIES``, some of them more than once; each crossing is a kill.
    """
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00binary")
    repo.write("pkg/empty.py", "")
    repo.commit("A")
    base = tmp_path / "base"
    ix = Indexer(_settings(base), embedder)
    ix.sync(repo.path)
    assert ix.store.rows() == 0 and not ix.store.has_fts()  # nothing indexed for search yet
    ix.close()
    repo.write("pkg/empty.py", _module(0))
    repo.remove("logo.png")
    for i in (1, 2, 3):
        repo.write(f"pkg/m{i}.py", _module(i))
    repo.commit("B")
    clean = _clean_build(repo, tmp_path, embedder)

    trace = tmp_path / "trace"
    shutil.copytree(base, tmp_path / "traced")
    run = _index(repo.path, tmp_path / "traced", {TRACE_ENV: str(trace)})
    assert run.returncode == 0, run.stderr
    names = trace.read_text().split()
    assert set(names) == BOUNDARIES, set(names) ^ BOUNDARIES
    assert Counter(names)["write_batch.before"] == 2  # the Nth batch: every N is killed at

    seen: Counter[str] = Counter()
    started = time.monotonic()
    for name in names:
        seen[name] += 1
        point = f"{name}:{seen[name]}"
        index = tmp_path / f"kill-{len(seen)}-{name}-{seen[name]}"
        shutil.copytree(base, index)
        killed = _index(repo.path, index, {AT_ENV: point})
        assert killed.returncode == -signal.SIGKILL, (point, killed.returncode, killed.stderr)
        settings = _settings(index)
        ix = Indexer(settings, embedder)
        try:
            ix.sync(repo.path)  # the restart
            _assert_repaired(ix, settings, repo, clean, point)
        finally:
            ix.close()
        shutil.rmtree(index)
    print(f"{len(names)} kills in {time.monotonic() - started:.1f} s")


@pytest.mark.slow
def test_a_sync_killed_from_outside_after_the_second_batch_is_repaired(
    repo: Repo, tmp_path: Path, embedder: Any
) -> None:
    """SIGKILL from another process, once ``state.json`` says pending and the log says a
    second batch was committed (an observed condition, not a timer): the next sync repairs
    the index to exactly a clean build."""
    for i in range(16):  # one batch each: the kill lands with most of the work left
        repo.write(f"pkg{i % 3}/m{i}.py", _module(i))
    repo.commit("A")
    clean = _clean_build(repo, tmp_path, embedder)
    index = tmp_path / "killed"
    one_file = {"CODECHUNKD_INDEX_BATCH_FILES": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "codechunkd",
            "index",
            "-v",
            str(repo.path),
            "--index-dir",
            str(index),
        ],
        env={**os.environ, **ENV, **one_file},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    state_file = index / "_codechunkd" / "state.json"
    committed = 0
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # JSON log lines (-v: info included; stderr is not a tty)
            if line.startswith("{") and json.loads(line).get("event") == "batch_committed":
                committed += 1
            if committed == 2:
                break
        state = json.loads(state_file.read_text())
        assert state["sources"][0]["pending"] == repo.head()  # the mark a crash must leave
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=scaled(30))
        assert proc.stderr is not None
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL  # the kill landed before the sync ended
    settings = _settings(index, one_file)
    ix = Indexer(settings, embedder)
    try:
        assert json.loads(state_file.read_text())["sources"][0]["pending"]  # still marked
        report = ix.sync(repo.path)  # the restart
        assert report.full and report.added > 0  # it redid the files the kill cut off
        _assert_repaired(ix, settings, repo, clean, "outside kill")
    finally:
        ix.close()


@pytest.mark.slow
def test_a_rebuild_killed_part_way_is_redone_by_the_next_index(
    repo: Repo, tmp_path: Path, embedder: Any
) -> None:
    """``index --rebuild`` killed while it removes the source's rows, or before its sync wrote
    a state: the next plain ``codechunkd index`` indexes again, to exactly a clean build.

    It once said "unchanged" for every file over an emptied index, because ``state.json``
    still said the source was fresh (the plain ``index`` trusts it without opening LanceDB).
    """
    for i in range(4):
        repo.write(f"pkg/m{i}.py", _module(i))
    repo.commit("A")
    clean = _clean_build(repo, tmp_path, embedder)
    base = tmp_path / "base"
    assert _index(repo.path, base, {}).returncode == 0
    points = [f"remove_source.{t}:1" for t in ("repos", "chunks", "files", "references")]
    for point in [*points, "put_state.before:1"]:
        index = tmp_path / f"kill-{point.replace(':', '-')}"
        shutil.copytree(base, index)
        killed = _index(repo.path, index, {AT_ENV: point}, "--rebuild")
        assert killed.returncode == -signal.SIGKILL, (point, killed.returncode, killed.stderr)
        again = _index(repo.path, index, {})  # the restart, through the fast path's check
        assert again.returncode == 0, (point, again.stderr)
        settings = _settings(index)
        ix = Indexer(settings, embedder)
        try:
            _assert_repaired(ix, settings, repo, clean, point)
        finally:
            ix.close()
