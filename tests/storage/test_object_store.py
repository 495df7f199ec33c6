"""An index on object storage, against a real S3 server (SeaweedFS on 127.0.0.1).

Every command works on an ``s3://`` index as on a directory; one writer at a time holds
the lease (across processes, hence across machines); a dead writer's lease expires; a
server that goes away mid-sync fails the sync clearly without advancing its state, and
the next sync repairs; a wrong key is a clear error at start.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from tests.conftest import Indexer, Repo, S3Server, run_service, scaled, wait_for

from codechunkd.config import Settings
from codechunkd.daemon.status import EXIT_STOPPED
from codechunkd.errors import StoreError
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.sync import SyncProgress
from codechunkd.pipeline.verify import verify
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.lease import Lease, LeaseHeld, writer_lock
from codechunkd.storage.objectstore import ObjectStore
from codechunkd.storage.reader import open_index
from codechunkd.storage.store import IndexStore

EXE = str(Path(sys.executable).parent / "codechunkd")


def _prefix() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def _cli_env(server: S3Server, prefix: str, **extra: str) -> dict[str, str]:
    """The environment of a ``codechunkd`` child on ``s3://idx/<prefix>``."""
    env = dict(
        os.environ,
        CODECHUNKD_INDEX_DIR=f"s3://{server.BUCKET}/{prefix}",
        CODECHUNKD_OBJECT_STORE_ENDPOINT=server.endpoint,
        CODECHUNKD_OBJECT_STORE_ALLOW_HTTP="true",
        CODECHUNKD_OBJECT_STORE_ACCESS_KEY_ENV=server.KEY_ENV,
        CODECHUNKD_OBJECT_STORE_SECRET_KEY_ENV=server.SECRET_ENV,
    )
    return {**env, **server.env(), **extra}


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, env=env, timeout=300)


def _store(server: S3Server, *, key: str | None = None) -> ObjectStore:
    return ObjectStore(
        endpoint=server.endpoint,
        allow_http=True,
        access_key_id=server.KEY_ID,
        secret_access_key=key or server.SECRET,
    )


def test_lease_admits_one_writer_names_the_holder_and_expires(s3: S3Server) -> None:
    """A second writer is refused with the holder's command, pid and host; a released lease
    is free; a writer killed with SIGKILL leaves a lease that is taken over once it expired
    (not before); a writer whose lease was taken over learns it is lost and does not
    delete the new holder's lease."""
    uri = f"s3://{s3.BUCKET}/{_prefix()}"
    first = Lease(uri, _store(s3), what="writer A", ttl=30)
    first.acquire()
    second = Lease(uri, _store(s3), what="writer B", ttl=30)
    with pytest.raises(LeaseHeld) as refused:
        second.acquire()
    assert f"writer A (pid {os.getpid()} on {socket.gethostname()}" in str(refused.value)
    assert refused.value.exit_code == 5
    first.release()
    second.acquire()  # free again
    second.release()

    code = (
        "import sys\n"
        "from codechunkd.storage.lease import Lease\n"
        "from codechunkd.storage.objectstore import ObjectStore\n"
        f"s = ObjectStore(endpoint={s3.endpoint!r}, allow_http=True, "
        f"access_key_id={s3.KEY_ID!r}, secret_access_key={s3.SECRET!r})\n"
        f"Lease({uri!r}, s, what='doomed', ttl=20).acquire()\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    child.kill()  # no release: the lease stays behind
    child.wait()
    assert child.stdin is not None
    child.stdin.close()
    child.stdout.close()
    with pytest.raises(LeaseHeld, match=r"doomed \(pid \d+"):
        Lease(uri, _store(s3), what="too early", ttl=30).acquire()
    later = Lease(uri, _store(s3), what="later", ttl=30, clock=lambda: time.time() + 21)
    later.acquire()  # the dead writer's lease expired (by this writer's clock)
    stale = Lease(uri, _store(s3), what="stale", ttl=30, clock=lambda: time.time() + 60)
    stale.acquire()  # took over "later"'s lease (seen as expired)
    assert later.renew() is False
    assert later.lost
    later.release()  # must not delete the lease "stale" holds
    found = stale.holder()
    assert found is not None and found[0] is not None and found[0].what == "stale"
    stale.release()
    assert stale.holder() is None


@pytest.mark.slow
def test_every_command_works_on_an_s3_index(
    s3: S3Server,
    repo: Repo,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """``index``, ``search``, ``status`` and ``verify`` on ``s3://`` as on a directory (the
    cache and state mirror local, nothing written to the working directory); a reader
    opened with ``open_index`` sees a writer's later commit; a fold keeps every row."""
    repo.write("geo.py", "def haversine_distance(a, b):\n    return great_circle(a, b)\n")
    repo.write("text.py", "def slugify(title):\n    return title.lower().replace(' ', '-')\n")
    repo.commit("init")
    prefix = _prefix()
    env = _cli_env(s3, prefix)
    done = _cli(env, "index", str(repo.path))
    assert done.returncode == 0, done.stderr
    assert "indexed" in done.stdout

    done = _cli(env, "search", "distance between two points on a sphere", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["symbol"] == "haversine_distance"

    done = _cli(env, "status", "--json")
    assert done.returncode == EXIT_STOPPED, done.stderr  # as for a directory: no daemon
    doc = json.loads(done.stdout)
    assert [(s["commit"], s["fresh"]) for s in doc["sources"]] == [(repo.head(), True)]

    done = _cli(env, "verify", str(repo.path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok:")

    settings = s3.settings(prefix)
    paths = IndexPaths.of(settings)
    assert paths.state_file.is_file() and paths.cache.is_file()
    assert str(paths.meta).startswith(os.environ["XDG_STATE_HOME"])
    assert s3.SECRET not in repr(paths)

    reader = open_index(settings=settings, embedder=embedder)
    repo.write("color.py", "def mix_paint_colors(red, blue):\n    return purple(red, blue)\n")
    repo.commit("more")
    ix = Indexer(settings, embedder)
    try:
        with writer_lock(paths, what="test writer"):
            ix.sync(repo.path)
            hits = reader.search("blend two paints", k=3)
            assert hits[0].symbol == "mix_paint_colors"  # the reader sees the new commit
            before = ix.store.count_chunks()
            ix.store.ensure_fts()
            ix.store.fold(timedelta(hours=1), fragment_rows=1024, merge=False)
            assert ix.store.count_chunks() == before
        report = verify(settings, ix.store, GitSource(repo.path))
        assert report.ok and report.duplicate_ids == 0
    finally:
        ix.close()


@pytest.mark.slow
def test_a_daemon_on_s3_holds_the_lease_and_a_second_writer_is_refused(
    s3: S3Server, repo: Repo, tmp_path: Path
) -> None:
    """``codechunkd run`` on an ``s3://`` index holds the lease: a ``codechunkd index`` in
    another process is refused (exit 5) naming the daemon; the daemon follows an edit, and
    on SIGTERM releases the lease; the index then verifies with no duplicate id."""
    from codechunkd.daemon.control import SourceSpec, request
    from codechunkd.daemon.service import Service

    repo.write("app.py", "def serve_forever():\n    return 'first'\n")
    repo.commit("init")
    other = Repo(tmp_path / "other")  # not indexed yet: `index` must write, so lock
    other.write("tool.py", "def other_tool():\n    return 1\n")
    other.commit("init")
    prefix = _prefix()
    daemon = {"daemon.debounce_ms": 50, "daemon.nice": 0}
    settings = s3.settings(prefix, **daemon)
    service = Service(
        settings,
        specs=[SourceSpec.parse(str(repo.path))],
        load_settings=lambda: s3.settings(prefix, **daemon),
    )
    refused: list[subprocess.CompletedProcess[str]] = []

    def drive() -> None:
        wait_for(service.ready.is_set, "ready", timeout=120)
        refused.append(_cli(_cli_env(s3, prefix), "index", str(other.path)))
        sock = service.paths.socket
        repo.write("app.py", "def serve_forever():\n    return 'second_gecko'\n")
        wait_for(
            lambda: any(
                "second_gecko" in h["content"]
                for h in request(
                    sock, {"cmd": "search", "query": "serve", "k": 5}, timeout=scaled(30)
                )["hits"]
            ),
            "the edit searchable",
        )

    assert run_service(service, drive) == 0
    assert refused[0].returncode == 5, refused[0].stderr
    assert f"codechunkd run (pid {os.getpid()} on {socket.gethostname()}" in refused[0].stderr
    assert "Traceback" not in refused[0].stderr
    assert Lease(service.paths.uri, _store(s3)).holder() is None  # released
    store = IndexStore(service.paths.uri, storage_options=service.paths.storage_options)
    report = verify(settings, store, GitSource(repo.path, ref=None))
    assert report.ok and report.duplicate_ids == 0, report


@pytest.fixture
def own_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """A server of this test's own, which it may stop and start."""
    server = S3Server(tmp_path / "s3")
    server.start()
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    yield server
    server.stop()


def test_the_s3_server_leaves_nothing_in_the_temp_folder(tmp_path: Path) -> None:
    """The tests' S3 server writes its logs and unix sockets under its own folder, which
    pytest removes, and its stop removes the gRPC sockets weed puts in /tmp: by default
    weed leaves ``/tmp/weed.*`` logs and ``/tmp/seaweedfs-*.sock`` sockets behind, a few
    more on every run of the suite."""
    server = S3Server(tmp_path / "s3")
    server.start()
    assert server.proc is not None
    pid = server.proc.pid
    server.stop()
    # what this server would have left: logs named by its pid, sockets by its ports (other
    # workers' servers may be running beside it)
    ours = {f".{pid}", *(f"-{port}.sock" for port in server.ports)}
    left = [
        p.name
        for p in Path(tempfile.gettempdir()).iterdir()
        if p.name.startswith(("seaweedfs-", "weed.")) and p.name.endswith(tuple(ours))
    ]
    assert not left
    kept = {p.name for p in (tmp_path / "s3" / "tmp").iterdir()}
    assert any(name.startswith("weed.") for name in kept), kept  # its logs: there


@pytest.mark.slow
def test_server_stopped_mid_sync_fails_clearly_and_the_next_sync_repairs(
    own_server: S3Server,
    repo: Repo,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """The server stops after the first batch of a sync is committed: the sync fails with
    a one-line error, the source's state still names the old commit, and once the server
    is back the next sync brings the index to the new commit with every row right."""
    repo.write("a.py", "def alpha():\n    return 1\n")
    old = repo.commit("init")
    prefix = _prefix()
    # a short retry budget while the server is stopped (the sync fails in seconds); the
    # default one once it is back, as a user's next run has (a busy machine's restarted
    # server may take longer than 2 s to answer its first writes)
    settings: Settings = own_server.settings(
        prefix,
        **{"index.batch_files": 1, "object_store.retries": 1, "object_store.retry_timeout_s": 2},
    )
    ix = Indexer(settings, embedder)
    try:
        ix.sync(repo.path)
        for i in range(4):
            repo.write(f"m{i}.py", f"def module_{i}_function():\n    return {i}\n")
        new = repo.commit("more")

        def stop_after_first_batch(p: SyncProgress) -> None:
            if p.chunks > 0 and own_server.proc is not None:
                own_server.stop()

        with pytest.raises(StoreError) as failed:
            ix.sync(repo.path, progress=stop_after_first_batch)
        assert "\n" not in str(failed.value)
        assert own_server.proc is None  # it did stop mid-sync
    finally:
        ix.close()
    own_server.start()
    settings = own_server.settings(prefix, **{"index.batch_files": 1})
    ix = Indexer(settings, embedder)
    try:
        source = GitSource(repo.path).source.id
        state = ix.store.state(source)
        assert state is not None and state.commit == old  # not advanced
        ix.sync(repo.path)
        state = ix.store.state(source)
        assert state is not None and state.commit == new and not state.pending
        report = verify(settings, ix.store, GitSource(repo.path))
        assert report.ok and report.duplicate_ids == 0, report
    finally:
        ix.close()


def test_a_wrong_key_is_a_clear_error_at_start(s3: S3Server, repo: Repo) -> None:
    """With a wrong secret key, ``index`` and ``search`` stop at once with one line that
    says the credentials were refused (and never print the key); no traceback."""
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit("init")
    wrong = "not-the-secret-key-0000"
    env = _cli_env(s3, _prefix(), **{s3.SECRET_ENV: wrong})
    for args in (["index", str(repo.path)], ["search", "alpha"]):
        done = _cli(env, *args)
        assert done.returncode != 0
        assert "refused the credentials" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        assert wrong not in done.stderr + done.stdout
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
