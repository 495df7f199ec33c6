"""``--engine ray``: a cold build on a real local Ray cluster equals the local build, its rows
arrive as data files the workers wrote and the driver committed once, the daemon carries on
incrementally from it, and the faults (a lost worker, a killed driver, an unreachable
cluster) end cleanly."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from structlog.testing import capture_logs
from tests.conftest import Indexer, Repo, S3Server, run_service, scaled, wait_for

from codechunkd.config import Settings, load_settings
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.distributed import COMMIT_EVERY_S, RayEngineError, placement
from codechunkd.pipeline.verify import verify
from codechunkd.storage.crashpoints import AT_ENV

ray = pytest.importorskip("ray", reason="needs the ray extra")

pytestmark = pytest.mark.slow

FILES = 24
"""Real files (the smallest stdlib modules): a few dozen chunks, several Ray tasks."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real two-CPU Ray cluster on this machine, small enough for CI's 2 cores, shared by
    the module; yields its address (for a ``codechunkd index`` in another process, which
    gets the cluster's token through the environment, as Ray documents).  Its workers get a
    home and XDG directories of their own: a worker that works a path out of its own
    environment must not write into the developer's home.  They run at the tests' own
    priority (nice 0, not Ray's 15), as the daemon tests' daemons do (``daemon.nice``)."""
    home = tmp_path_factory.mktemp("ray-home")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(home))
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
            env.setenv(name, str(home / name.lower()))
        # token auth (Ray's default for a local cluster) with a token of this module's, not
        # one Ray would save in the home directory; ray.init sets RAY_AUTH_MODE, undone after
        env.delenv("RAY_AUTH_MODE", raising=False)
        env.setenv("RAY_AUTH_TOKEN", secrets.token_hex(16))
        # Ray runs its workers at nice 15: beside busy processes at nice 0 a worker gets
        # ~1/30 of their share (seen: a task slice 8 CPU-s in 8 min beside 8 busy loops), so
        # a deadline scaled by this process's measured slowness never fits it
        env.setenv("RAY_worker_niceness", "0")
        # the node's sessions (logs, sockets) in a folder of its own, removed after: by
        # default Ray keeps them in /tmp/ray, one more on every run of the suite; a short
        # path, as the node's unix sockets live under it (where Ray's own would be: /tmp)
        temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
        try:
            _start_ray(temp)
            yield ray.get_runtime_context().gcs_address
            ray.shutdown()
        finally:
            shutil.rmtree(temp, ignore_errors=True)


RAY_STARTS = 3


def _start_ray(temp: str) -> None:
    """Start the local cluster, again if Ray's own start-up deadline struck.

    Ray's raylet waits a fixed 15 s for its dashboard agent (a Python process it starts) to
    write a port file, then aborts; ``ray.init`` reports it ~30 s later as "The current node
    timed out during startup" (raylet.out: "Timed out waiting for file
    …/dashboard_agent_listen_port_…").  Seen under load (8 busy loops beside the suite on 2
    cores); reproduced at will by an agent that sleeps 20 s before starting.  Ray 2.60 has
    no setting for that wait (``RAY_agent_register_timeout_ms`` does not reach it, and an
    explicit listen port is not passed to the raylet), so a start that failed so is tried
    again, a bounded number of times, after a clean shutdown: anything else is raised."""
    for attempt in range(1, RAY_STARTS + 1):
        try:
            ray.init(
                num_cpus=2,
                _node_ip_address="127.0.0.1",  # the cluster listens on loopback only
                include_dashboard=False,
                object_store_memory=100 * 1024 * 1024,
                log_to_driver=False,
                configure_logging=False,
                _temp_dir=temp,
            )
            return
        except Exception as e:  # Ray raises a bare Exception for this
            _kill_the_half_started_node(e)
            ray.shutdown()
            if "timed out during startup" not in str(e) or attempt == RAY_STARTS:
                raise


def _kill_the_half_started_node(e: BaseException) -> None:
    """End the processes of a node whose start failed: ``ray.init`` had not kept the node,
    so ``ray.shutdown`` does not know them; the node is the ``self`` of a frame of the
    failure's traceback, and Ray's own ``kill_all_processes`` ends and reaps them."""
    from ray._private.node import Node

    tb = e.__traceback__
    while tb is not None:
        node = tb.tb_frame.f_locals.get("self")
        if isinstance(node, Node):
            node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
            return
        tb = tb.tb_next


def _stdlib_repo(repo: Repo) -> int:
    lib = Path(sysconfig.get_path("stdlib"))
    small = sorted((p for p in lib.glob("*.py") if 300 < p.stat().st_size < 5000), key=str)
    for p in small[:FILES]:
        repo.write(f"lib/{p.name}", p.read_text(encoding="utf-8", errors="replace"))
    repo.commit("stdlib")
    assert len(small[:FILES]) >= 12, "too few small stdlib modules for a multi-task build"
    return len(small[:FILES])


def _overrides(tmp_path: Path, name: str, onnx_dir: Path) -> dict[str, object]:
    return {
        "index.dir": str(tmp_path / name),
        "index.batch_files": 4,  # several tasks in flight on two workers
        "embedding.onnx_dir": str(onnx_dir),
    }


def _settings(tmp_path: Path, name: str, onnx_dir: Path) -> Settings:
    return load_settings(env={}, overrides=_overrides(tmp_path, name, onnx_dir))


def _ray_build(settings: Settings, path: Path, embedder: Any) -> tuple[Indexer, Any]:
    from codechunkd.pipeline.distributed import RaySyncer

    ix = Indexer(settings, embedder)
    ix.syncer = RaySyncer(settings, ix.store, embedder, ix.cache)
    try:
        return ix, ix.syncer.sync(GitSource(path))
    except BaseException:
        ix.close()
        raise


ROW_COLUMNS = [
    "id",
    "source",
    "branch",
    "commit",
    "blob",
    "path",
    "language",
    "kind",
    "symbol",
    "parent_id",
    "start_line",
    "end_line",
    "start_byte",
    "end_byte",
    "content",
    "content_hash",
    "embed_text",
    "embed_hash",
    "fts_text",
    "token_count",
    "embedded_tokens",
    "signature",
    "docstring",
    "summary",
    "summary_source",
    "summary_of",
    "embedding_model",
    "synthetic",
    "dirty",
]
"""Every column but ``vector`` (compared apart, as floats) and ``indexed_at`` (a time)."""


def _rows(ix: Indexer) -> dict[str, dict[str, Any]]:
    table = ix.store.scan_chunks(None, [*ROW_COLUMNS, "vector"]).to_pylist()
    return {r["id"]: r for r in table}


def test_ray_build_equals_local_and_daemon_continues(
    cluster: str,
    repo: Repo,
    tmp_path: Path,
    embedder: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The Ray engine's rows are the local engine's, column for column; the workers wrote
    them as data files that the driver added in one commit; the full-text index covers them
    and the driver's embedding cache holds their vectors; ``verify`` is clean; and a real
    daemon started on the index finds nothing to do, then re-embeds only an edited file."""
    from codechunkd.daemon.control import SourceSpec, request
    from codechunkd.daemon.service import Service

    onnx_dir = tmp_path_factory.getbasetemp() / "onnx-models"
    files = _stdlib_repo(repo)
    ray_settings = _settings(tmp_path, "ray-index", onnx_dir)
    started = time.monotonic()
    with capture_logs() as logs:
        rix, report = _ray_build(ray_settings, repo.path, embedder)
    took = time.monotonic() - started
    try:
        assert report.added == files
        assert report.chunks > files
        assert report.embedded + report.reused == report.chunks
        commits = [e for e in logs if e["event"] == "batch_committed"]
        # the batches' data files in few commits: one at the end, and one more for each
        # COMMIT_EVERY_S the build lasted (a loaded machine's build passes that mark)
        assert 1 <= len(commits) <= 1 + int(took // COMMIT_EVERY_S), (took, commits)
        assert sum(c["files"] for c in commits) == files
        assert sum(c["fragments"] for c in commits) >= files // 4
        assert rix.store.has_fts()
        assert rix.store.unindexed() == (0, 0)  # the full-text index covers every row
        assert verify(ray_settings, rix.store, GitSource(repo.path)).ok
        state = rix.store.state(GitSource(repo.path).source.id)
        assert state is not None
        assert state.pending is None
        got = _rows(rix)
        hashes = {r["embed_hash"] for r in got.values()}
        cached = rix.cache.get_many(embedder.model_id, hashes, embedder.dimension)
        assert set(cached) == hashes

        local_settings = _settings(tmp_path, "local-index", onnx_dir)
        lix = Indexer(local_settings, embedder)
        try:
            local = lix.sync(repo.path)
            want = _rows(lix)
        finally:
            lix.close()
        assert local.chunks == report.chunks
        assert set(got) == set(want)
        for rid, row in want.items():
            mine = got[rid]
            assert {k: mine[k] for k in ROW_COLUMNS} == {k: row[k] for k in ROW_COLUMNS}
            np.testing.assert_allclose(mine["vector"], row["vector"], atol=1e-5)
    finally:
        rix.close()

    # a real daemon carries on from the Ray build: nothing at start-up, then one file
    target = sorted((repo.path / "lib").glob("*.py"))[0]
    overrides = {**_overrides(tmp_path, "ray-index", onnx_dir), "daemon.debounce_ms": 50}
    overrides["daemon.nice"] = 0
    service = Service(
        load_settings(env={}, overrides=overrides),
        specs=[SourceSpec.parse(str(repo.path))],
        load_settings=lambda: load_settings(env={}, overrides=overrides),
    )

    def drive() -> None:
        wait_for(service.ready.is_set, "ready", timeout=120)
        target.write_text(target.read_text() + "\n\ndef added_here_wombat():\n    return 42\n")
        sock = service.paths.socket
        wait_for(
            lambda: any(
                "added_here_wombat" in h["content"]
                for h in request(
                    sock, {"cmd": "search", "query": "wombat", "k": 5}, timeout=scaled(30)
                )["hits"]
            ),
            "the edit searchable",
        )

    with capture_logs() as logs:
        assert run_service(service, drive) == 0
    syncs = [e for e in logs if e["event"] == "sync_done"]
    assert syncs, [e["event"] for e in logs]
    assert syncs[0]["embedded"] == 0 and syncs[0]["chunks"] == 0  # the build was complete
    edits = [e for e in syncs if e["changed"]]
    assert sum(e["changed"] for e in edits) == 1
    assert 1 <= sum(e["embedded"] for e in syncs) <= 2  # the new function (and its module)


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
    cluster: str,
    repo: Repo,
    tmp_path: Path,
    embedder: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A Ray worker SIGKILLed while it runs a batch is replaced and the batch rerun: the
    build still indexes every file and ``verify`` is clean (no duplicate rows from a batch
    written twice)."""
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
    deadline = time.monotonic() + scaled(60)
    while killed is None and builder.is_alive() and time.monotonic() < deadline:
        killed = _task_pid()
        if killed is None:
            time.sleep(0.01)  # polling /proc: no event to wait on
    assert killed is not None, "no Ray task seen running"
    os.kill(killed, signal.SIGKILL)
    builder.join(scaled(120))
    assert not builder.is_alive()
    (got,) = outcome
    if isinstance(got, BaseException):
        raise got
    ix, report = got
    try:
        assert report.added == files
        check = verify(settings, ix.store, GitSource(repo.path))
        assert check.ok and check.duplicate_ids == 0, check
    finally:
        ix.close()


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codechunkd", *args],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        env={**os.environ, **(env or {})},
        check=False,
    )


def _data_files(index: Path) -> set[str]:
    return {p.name for p in (index / "chunks.lance" / "data").glob("*.lance")}


def _referenced(ix: Indexer) -> set[str]:
    ds = ix.store.chunks_table().to_lance()
    return {f.path for frag in ds.get_fragments() for f in frag.data_files()}


@pytest.mark.parametrize("next_engine", ["ray", "local"])
def test_driver_killed_before_the_commit_leaves_files_the_next_build_removes(
    next_engine: str,
    cluster: str,
    repo: Repo,
    tmp_path: Path,
    embedder: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A ``codechunkd index --engine ray`` killed (SIGKILL) after its workers wrote their
    data files and before it committed them leaves the state pending and data files no
    version references; the next build, Ray or local (the daemon's engine), deletes them
    before it writes, indexes every file, and ``verify`` is clean."""
    onnx_dir = tmp_path_factory.getbasetemp() / "onnx-models"
    files = _stdlib_repo(repo)
    index = tmp_path / "ray-index"
    killed = _cli(
        "index",
        str(repo.path),
        "--engine",
        "ray",
        "--address",
        cluster,
        "--index-dir",
        str(index),
        env={
            AT_ENV: "commit_fragments.before:1",
            "CODECHUNKD_INDEX_BATCH_FILES": "4",
            "CODECHUNKD_EMBEDDING_ONNX_DIR": str(onnx_dir),
        },
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    settings = _settings(tmp_path, "ray-index", onnx_dir)
    ix = Indexer(settings, embedder)
    try:
        orphans = _data_files(index) - _referenced(ix)
        assert len(orphans) >= files // 4  # one per batch at least
        state = ix.store.state(GitSource(repo.path).source.id)
        assert state is not None and state.pending is not None
    finally:
        ix.close()

    if next_engine == "ray":
        ix, report = _ray_build(settings, repo.path, embedder)
    else:
        ix = Indexer(settings, embedder)
        report = ix.sync(repo.path)
    try:
        assert report.added == files
        assert not orphans & _data_files(index)
        assert _data_files(index) == _referenced(ix)
        check = verify(settings, ix.store, GitSource(repo.path))
        assert check.ok and check.duplicate_ids == 0, check
    finally:
        ix.close()


def _s3_data_files(server: S3Server, prefix: str) -> set[str]:
    """The names of the objects under ``chunks``' ``data/`` on ``s3://idx/<prefix>``, as the
    server lists them (pyarrow's S3 client: ours signs single-object requests only)."""
    from pyarrow import fs

    client = fs.S3FileSystem(
        access_key=server.KEY_ID,
        secret_key=server.SECRET,
        endpoint_override=server.endpoint,
        scheme="http",
        region="us-east-1",
    )
    where = fs.FileSelector(f"{server.BUCKET}/{prefix}/chunks.lance/data", recursive=True)
    return {Path(i.path).name for i in client.get_file_info(where) if i.type == fs.FileType.File}


def test_ray_build_onto_s3_ships_the_credentials_and_leaves_no_stray_file(
    cluster: str,
    repo: Repo,
    tmp_path: Path,
    embedder: Any,
    tmp_path_factory: pytest.TempPathFactory,
    s3_server: S3Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cold Ray build onto ``s3://`` (the local SeaweedFS) whose workers have no credentials
    in their environment: they write the data files with the options the driver resolved;
    the driver holds the lease throughout (a second writer is refused mid-build) and
    commits at the end (and once a minute of a long build); the rows equal a local build's,
    ``verify`` is clean, every object under ``data/`` is a file the table references, the
    state names the commit, and the driver's embedding cache holds every vector. A later Ray
    build whose lease is taken over mid-build stops before its commit (``LeaseLost``): no
    row added, the state not advanced."""
    from codechunkd.pipeline.distributed import RaySyncer
    from codechunkd.pipeline.sync import SyncProgress
    from codechunkd.storage.lease import Lease, LeaseHeld, LeaseLost, lease_check, writer_lock

    onnx_dir = tmp_path_factory.getbasetemp() / "onnx-models"
    files = _stdlib_repo(repo)
    # variables of names no worker can have: Ray's workers took their environment from
    # the raylet, started with the module's cluster, before these exist
    token = secrets.token_hex(4).upper()
    key_env, secret_env = f"RAYTEST_KEY_{token}", f"RAYTEST_SECRET_{token}"
    monkeypatch.setenv(key_env, s3_server.KEY_ID)
    monkeypatch.setenv(secret_env, s3_server.SECRET)

    def worker_env() -> list[str | None]:
        return [os.environ.get(n) for n in (key_env, secret_env)]

    assert ray.get(ray.remote(num_cpus=1)(worker_env).remote()) == [None, None]

    prefix = f"ray-{secrets.token_hex(5)}"
    settings = s3_server.settings(
        prefix,
        **{
            "object_store.access_key_env": key_env,
            "object_store.secret_key_env": secret_env,
            "index.batch_files": 4,
            "embedding.onnx_dir": str(onnx_dir),
        },
    )
    ix = Indexer(settings, embedder)
    intruders: list[str] = []

    def second_writer(p: SyncProgress) -> None:
        if p.files_done and not intruders:  # a batch has come back: the build is under way
            other = Lease(ix.paths.uri, ix.paths.store, what="intruder", ttl=30)  # type: ignore[arg-type]
            try:
                other.acquire()
            except LeaseHeld as exc:
                intruders.append(str(exc))
            else:
                other.release()
                intruders.append("acquired")

    try:
        with writer_lock(ix.paths, what="ray build") as lock, capture_logs() as logs:
            syncer = RaySyncer(
                settings, ix.store, embedder, ix.cache, check_writer=lease_check(lock)
            )
            started = time.monotonic()
            report = syncer.sync(GitSource(repo.path), progress=second_writer)
            took = time.monotonic() - started
        assert report.added == files and report.chunks > files
        assert len(intruders) == 1 and "ray build (pid" in intruders[0], intruders
        commits = [e for e in logs if e["event"] == "batch_committed"]
        # one commit at the end, and one more for each COMMIT_EVERY_S the build lasted (seen
        # beside 8 busy loops: 12 files, then 6)
        assert 1 <= len(commits) <= 1 + int(took // COMMIT_EVERY_S), (took, commits)
        assert sum(c["files"] for c in commits) == files
        assert sum(c["fragments"] for c in commits) >= files // 4  # the workers' data files
        check = verify(settings, ix.store, GitSource(repo.path))
        assert check.ok and check.duplicate_ids == 0, check
        state = ix.store.state(GitSource(repo.path).source.id)
        assert state is not None and state.commit == repo.head() and state.pending is None
        assert _s3_data_files(s3_server, prefix) == _referenced(ix)
        got = _rows(ix)
        hashes = {r["embed_hash"] for r in got.values()}
        assert set(ix.cache.get_many(embedder.model_id, hashes, embedder.dimension)) == hashes
    finally:
        ix.close()

    local = Indexer(_settings(tmp_path, "local-index", onnx_dir), embedder)
    try:
        assert local.sync(repo.path).chunks == report.chunks
        want = _rows(local)
    finally:
        local.close()
    assert set(got) == set(want)
    for rid, row in want.items():
        assert {k: got[rid][k] for k in ROW_COLUMNS} == {k: row[k] for k in ROW_COLUMNS}
        np.testing.assert_allclose(got[rid]["vector"], row["vector"], atol=1e-5)

    # a later build of new files whose lease another writer takes over mid-build (as after
    # an expiry) stops before its commit: no row of its added, the state not advanced
    built = repo.head()
    for i in range(8):
        repo.write(f"more/m{i}.py", f"def more_function_{i}(x):\n    return x * {i}\n")
    repo.commit("more")
    ix = Indexer(settings, embedder)
    usurpers: list[Lease] = []

    def take_over(p: SyncProgress) -> None:
        if p.files_done and not usurpers:  # a batch's data files are written
            late = time.time() + settings.object_store.lease_s + 1  # sees the lease expired
            usurper = Lease(ix.paths.uri, ix.paths.store, what="usurper", clock=lambda: late)  # type: ignore[arg-type]
            usurper.acquire()
            usurpers.append(usurper)

    try:
        before = ix.store.count_chunks()
        with writer_lock(ix.paths, what="ray build") as lock, pytest.raises(LeaseLost):
            syncer = RaySyncer(
                settings, ix.store, embedder, ix.cache, check_writer=lease_check(lock)
            )
            syncer.sync(GitSource(repo.path), progress=take_over)
        assert usurpers, "the lease was never taken over"
        assert ix.store.count_chunks() == before
        state = ix.store.state(GitSource(repo.path).source.id)
        assert state is not None and state.commit == built
    finally:
        for usurper in usurpers:
            usurper.release()
        ix.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_clusters_workers_run_at_the_tests_priority(cluster: str) -> None:
    """The fixture's cluster runs its tasks at nice 0 (``RAY_worker_niceness``): at Ray's
    own 15 they starve beside any busy process, and the tests' deadlines cannot fit them."""

    @ray.remote
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote(), timeout=scaled(120)) == 0


def test_unreachable_address_is_one_line_and_writes_nothing(repo: Repo, tmp_path: Path) -> None:
    """``--address`` where nothing listens: exit 9 within seconds (Ray alone retries for
    minutes) with one line naming the address, no traceback, and no table or state written."""
    repo.write("app.py", "def serve():\n    return 1\n")
    repo.commit("init")
    index = tmp_path / "index"
    address = f"127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    out = _cli(
        "index", str(repo.path), "--engine", "ray", "--address", address, "--index-dir", str(index)
    )
    assert time.monotonic() - t0 < scaled(60)
    assert out.returncode == RayEngineError.exit_code == 9, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines == [
        f"codechunkd: error: cannot reach the Ray cluster at {address}: Connection refused"
    ]
    assert not (index / "chunks.lance").exists()
    assert not (index / "repos.lance").exists()
    assert not list(index.rglob("state.json"))


def test_placement_asks_for_a_gpu_only_with_a_cuda_embedder() -> None:
    """Tasks ask for one CPU on a CPU cluster or with a CPU embedder (GPUs left idle), for
    ``index.ray_gpus_per_task`` of a GPU when the cluster has GPUs and the embedder is
    configured for CUDA, and a CUDA embedder on a cluster without GPUs is refused."""
    cpu = load_settings(env={}, overrides={})
    cuda = load_settings(
        env={},
        overrides={
            "embedding.backend": "torch",
            "embedding.device": "cuda",
            "index.ray_gpus_per_task": 0.25,
        },
    )
    assert placement({"CPU": 2.0}, cpu) == {"num_cpus": 1}
    assert placement({"CPU": 8.0, "GPU": 2.0}, cpu) == {"num_cpus": 1}
    assert placement({"CPU": 8.0, "GPU": 2.0}, cuda) == {"num_cpus": 1, "num_gpus": 0.25}
    with pytest.raises(RayEngineError, match="has no GPU"):
        placement({"CPU": 8.0}, cuda)
