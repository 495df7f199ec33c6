"""``--engine ray``: a cold build on a real local Ray cluster equals the local build, and the
local ``Syncer`` (the daemon's) carries on incrementally from it."""

from __future__ import annotations

import os
import signal
import sysconfig
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Indexer, Repo

from codechunkd.config import Settings, load_settings
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.verify import verify

ray = pytest.importorskip("ray", reason="needs the ray extra")

pytestmark = pytest.mark.slow

FILES = 24
"""Real files (the smallest stdlib modules): a few dozen chunks, several Ray tasks."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A real two-CPU Ray cluster on this machine, small enough for CI's 2 cores."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024 * 1024,
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()


def _stdlib_repo(repo: Repo) -> int:
    lib = Path(sysconfig.get_path("stdlib"))
    small = sorted((p for p in lib.glob("*.py") if 300 < p.stat().st_size < 5000), key=str)
    for p in small[:FILES]:
        repo.write(f"lib/{p.name}", p.read_text(encoding="utf-8", errors="replace"))
    repo.commit("stdlib")
    assert len(small[:FILES]) >= 12, "too few small stdlib modules for a multi-task build"
    return len(small[:FILES])


def _settings(tmp_path: Path, name: str, onnx_dir: Path) -> Settings:
    return load_settings(
        env={},
        overrides={
            "index.dir": str(tmp_path / name),
            "index.batch_files": 4,  # several tasks in flight on two workers
            "embedding.onnx_dir": str(onnx_dir),
        },
    )


def _ray_build(settings: Settings, path: Path, embedder: Any) -> tuple[Indexer, Any]:
    from codechunkd.pipeline.distributed import RaySyncer

    ix = Indexer(settings, embedder)
    ix.syncer = RaySyncer(settings, ix.store, embedder, ix.cache)
    try:
        return ix, ix.syncer.sync(GitSource(path))
    except BaseException:
        ix.close()
        raise


def _keys(ix: Indexer) -> set[tuple[str, str, str, int, int]]:
    return {
        (r["id"], r["path"], r["content_hash"], r["start_byte"], r["end_byte"]) for r in ix.rows()
    }


def test_ray_build_equals_local_and_daemon_continues(
    cluster: None,
    repo: Repo,
    tmp_path: Path,
    embedder: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The Ray engine writes the rows the local path writes (same ids, content hashes and
    spans), ``verify`` finds nothing missing, extra or stale, and a local sync after an
    edit re-embeds only the edited file's new chunks."""
    onnx_dir = tmp_path_factory.getbasetemp() / "onnx-models"
    files = _stdlib_repo(repo)
    ray_settings = _settings(tmp_path, "ray-index", onnx_dir)
    rix, report = _ray_build(ray_settings, repo.path, embedder)
    try:
        assert report.added == files
        assert report.chunks > files
        assert report.embedded + report.reused == report.chunks
        assert verify(ray_settings, rix.store, GitSource(repo.path)).ok
        state = rix.store.state(GitSource(repo.path).source.id)
        assert state is not None
        assert state.pending is None

        local_settings = _settings(tmp_path, "local-index", onnx_dir)
        lix = Indexer(local_settings, embedder)
        try:
            local = lix.sync(repo.path)
            assert local.chunks == report.chunks
            assert _keys(lix) == _keys(rix)
        finally:
            lix.close()

        # the daemon's path carries on from the Ray build: one edited file, nothing else
        from codechunkd.pipeline.sync import Syncer

        target = sorted((repo.path / "lib").glob("*.py"))[0]
        target.write_text(target.read_text() + "\n\ndef added_here():\n    return 42\n")
        repo.commit("edit")
        daemon = Syncer(ray_settings, rix.store, embedder, rix.cache)
        again = daemon.sync(GitSource(repo.path))
        assert (again.changed, again.added, again.deleted) == (1, 0, 0)
        assert 1 <= again.embedded <= 2  # the new function (and a module chunk it joins)
        assert verify(ray_settings, rix.store, GitSource(repo.path)).ok
    finally:
        rix.close()


def _task_pid() -> int | None:
    """The pid of a Ray worker running a batch now (Ray titles it ``ray::index_slice``)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(b"ray::index_slice"):
            return int(entry.name)
    return None


def test_worker_killed_mid_build_is_retried(
    cluster: None,
    repo: Repo,
    tmp_path: Path,
    embedder: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A Ray worker SIGKILLed while it runs a batch is replaced and the batch rerun: the
    build still indexes every file and ``verify`` is clean."""
    onnx_dir = tmp_path_factory.getbasetemp() / "onnx-models"
    files = _stdlib_repo(repo)
    settings = _settings(tmp_path, "ray-index", onnx_dir)
    outcome: list[Any] = []

    def build() -> None:
        try:
            outcome.append(_ray_build(settings, repo.path, embedder))
        except BaseException as exc:  # re-raised on the test thread
            outcome.append(exc)

    builder = threading.Thread(target=build)
    builder.start()
    killed = None
    deadline = time.monotonic() + 60
    while killed is None and builder.is_alive() and time.monotonic() < deadline:
        killed = _task_pid()
        if killed is None:
            time.sleep(0.01)  # polling /proc: no event to wait on
    assert killed is not None, "no Ray task seen running"
    os.kill(killed, signal.SIGKILL)
    builder.join(120)
    assert not builder.is_alive()
    (got,) = outcome
    if isinstance(got, BaseException):
        raise got
    ix, report = got
    try:
        assert report.added == files
        assert verify(settings, ix.store, GitSource(repo.path)).ok
    finally:
        ix.close()
