"""An object-store index when the server is slow, hangs, or another writer takes over.

The S3 server is the real SeaweedFS of ``tests/conftest.py``; ``tests/s3_proxy.py`` sits
between it and codechunkd (a real TCP proxy on 127.0.0.1) to slow every answer or to
stall entirely.  A slow server changes nothing but time; a hung one fails the sync
within the retry budget (``object_store.retries``/``retry_timeout_s``), without
advancing the source's state, and the next sync repairs; a writer whose lease another
writer took over stops at its next commit with exit 15, and the next run repairs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Indexer, Repo, S3Server, wait_for
from tests.s3_proxy import SlowProxy

from codechunkd.errors import StoreError
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.sync import SyncProgress
from codechunkd.pipeline.verify import verify
from codechunkd.storage.lease import Lease, LeaseLost, lease_check, writer_lock
from codechunkd.storage.objectstore import ObjectStore
from codechunkd.storage.store import IndexStore

EXE = str(Path(sys.executable).parent / "codechunkd")


@pytest.fixture
def proxy(s3_server: S3Server) -> Iterator[SlowProxy]:
    """A proxy to the session's S3 server, closed (every thread ended) after the test."""
    with SlowProxy(s3_server.ports[6]) as p:
        yield p


def _prefix() -> str:
    return f"f-{uuid.uuid4().hex[:10]}"


def _store(server: S3Server) -> ObjectStore:
    return ObjectStore(
        endpoint=server.endpoint,
        allow_http=True,
        access_key_id=server.KEY_ID,
        secret_access_key=server.SECRET,
    )


def _direct(server: S3Server, prefix: str) -> IndexStore:
    """The index at ``prefix``, read straight from the server (not through the proxy)."""
    opts = _store(server).storage_options()
    return IndexStore(f"s3://{server.BUCKET}/{prefix}", storage_options=opts)


def _cli_env(server: S3Server, prefix: str, endpoint: str, **extra: str) -> dict[str, str]:
    env = dict(
        os.environ,
        CODECHUNKD_INDEX_DIR=f"s3://{server.BUCKET}/{prefix}",
        CODECHUNKD_OBJECT_STORE_ENDPOINT=endpoint,
        CODECHUNKD_OBJECT_STORE_ALLOW_HTTP="true",
        CODECHUNKD_OBJECT_STORE_ACCESS_KEY_ENV=server.KEY_ENV,
        CODECHUNKD_OBJECT_STORE_SECRET_KEY_ENV=server.SECRET_ENV,
    )
    return {**env, **server.env(), **extra}


def _rows(store: IndexStore) -> list[tuple[Any, ...]]:
    cols = ["id", "path", "start_byte", "end_byte", "content_hash", "embed_hash", "blob"]
    rows = store.chunks_table().search().select(cols).limit(None).to_arrow().to_pylist()
    return sorted(tuple(r[c] for c in cols) for r in rows)


def _write_modules(repo: Repo, n: int, tag: str) -> None:
    for i in range(n):
        repo.write(f"{tag}{i}.py", f"def {tag}_function_{i}(x):\n    return x * {i}\n")


def _start_writer(
    s3: S3Server, repo: Repo, command: str, prefix: str, **env: str
) -> tuple[subprocess.Popen[str], IndexStore]:
    """``codechunkd COMMAND REPO`` writing ``prefix`` one file per batch, started once its
    first batch is committed; returns the child and a reader of the index."""
    child = subprocess.Popen(
        [EXE, command, str(repo.path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_cli_env(
            s3,
            prefix,
            s3.endpoint,
            CODECHUNKD_INDEX_BATCH_FILES="1",
            CODECHUNKD_EMBEDDING_THREADS="1",  # no thread-count measurement in each process
            CODECHUNKD_EMBEDDING_SESSIONS="1",
            **env,
        ),
    )
    reader = _direct(s3, prefix)
    try:
        wait_for(
            lambda: reader.has_chunks() and reader.count_chunks() > 0,
            "the first batch committed",
            timeout=120,
        )
    except BaseException:
        child.kill()
        child.communicate()
        raise
    return child, reader


@pytest.mark.slow
def test_a_slow_server_changes_nothing_but_time(
    s3: S3Server,
    proxy: SlowProxy,
    repo: Repo,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """A writer holding the lease, through a server that holds every answer 50 ms, indexes
    a commit and then an edit, rename and delete: each sync completes and leaves exactly
    the rows (ids, spans, hashes, blobs) and state that the same syncs straight to the
    server leave; the answers did go through the proxy, delayed."""
    _write_modules(repo, 3, "slow")
    repo.commit("init")
    proxy.delay_s = 0.05
    slow, fast = _prefix(), _prefix()
    settings = s3.settings(slow, **{"object_store.endpoint": proxy.endpoint})
    slow_ix, fast_ix = Indexer(settings, embedder), Indexer(s3.settings(fast), embedder)
    t0 = time.monotonic()
    try:
        with writer_lock(slow_ix.paths, what="slow writer") as lock:
            slow_ix.syncer.check_writer = lease_check(lock)  # as `codechunkd index` does
            slow_ix.sync(repo.path)
            fast_ix.sync(repo.path)
            repo.write("slow0.py", "def slow_function_0(x):\n    return x - 1\n")
            repo.git("mv", "slow1.py", "moved.py")
            repo.remove("slow2.py")
            head = repo.commit("edit, rename, delete")
            slow_ix.sync(repo.path)
            fast_ix.sync(repo.path)
    finally:
        slow_ix.close()
        fast_ix.close()
    took = time.monotonic() - t0
    assert proxy.responses >= 20  # the lease and LanceDB both went through the proxy
    assert took >= proxy.responses * proxy.delay_s / 4  # and were held (some in parallel)
    slow_store, fast_store = _direct(s3, slow), _direct(s3, fast)
    rows = _rows(slow_store)
    assert rows == _rows(fast_store)
    assert sorted({r[1] for r in rows}) == ["moved.py", "slow0.py"]
    source = GitSource(repo.path).source.id
    for store in (slow_store, fast_store):
        state = store.state(source)
        assert state is not None and state.commit == head and not state.pending


def test_a_hung_server_fails_the_sync_within_the_retry_budget_and_the_next_sync_repairs(
    s3: S3Server,
    proxy: SlowProxy,
    repo: Repo,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """The server stops answering after the first batch of a sync is committed: with
    ``retries = 1`` and ``retry_timeout_s = 2`` the sync fails in seconds (not the 30 s a
    request waits by default, nor forever) with one line naming the endpoint; the
    source's state still names the old commit; once the server answers again, the next
    sync brings the index to the new commit with every row right."""
    _write_modules(repo, 1, "base")
    old = repo.commit("init")
    prefix = _prefix()
    settings = s3.settings(
        prefix,
        **{
            "object_store.endpoint": proxy.endpoint,
            "index.batch_files": 1,
            "object_store.retries": 1,
            "object_store.retry_timeout_s": 2,
        },
    )
    ix = Indexer(settings, embedder)
    try:
        ix.sync(repo.path)
        _write_modules(repo, 4, "more")
        new = repo.commit("more")
        stalled_at: list[float] = []

        def stall_after_first_batch(p: SyncProgress) -> None:
            if p.chunks > 0 and not stalled_at:
                proxy.stall()
                stalled_at.append(time.monotonic())

        with pytest.raises(StoreError) as failed:
            ix.sync(repo.path, progress=stall_after_first_batch)
        took = time.monotonic() - stalled_at[0]
        message = str(failed.value)
        assert proxy.stalled_seen > 0  # it did hang mid-sync
        assert took < 10, f"{took:.1f} s"  # one attempt of 2 s, not the 30 s of the default
        assert "\n" not in message
        assert proxy.endpoint.removeprefix("http://") in message, message
        assert "the object store cannot be reached" in message, message  # not Rust's text

        source = GitSource(repo.path).source.id
        state = _direct(s3, prefix).state(source)
        assert state is not None and state.commit == old and state.pending == new

        proxy.resume()
        ix.sync(repo.path)  # the same process, as the daemon's next reconcile
        state = _direct(s3, prefix).state(source)
        assert state is not None and state.commit == new and not state.pending
        report = verify(settings, ix.store, GitSource(repo.path))
        assert report.ok and report.duplicate_ids == 0, report
    finally:
        proxy.resume()
        ix.close()


def test_a_deleted_or_taken_over_lease_is_lost_at_the_next_check(s3: S3Server) -> None:
    """``Lease.check`` (run before each commit) passes while the lease is this writer's;
    once another writer took it over after expiry it raises ``LeaseLost`` (exit 15) naming
    the new holder, and a released writer never deletes the new holder's lease; a lease
    object deleted under a writer is lost too, at the check and at the renewal."""
    uri = f"s3://{s3.BUCKET}/{_prefix()}"
    mine = Lease(uri, _store(s3), what="writer A", ttl=30)
    mine.acquire()
    try:
        mine.check()  # still ours: no error
        thief = Lease(uri, _store(s3), what="thief", ttl=30, clock=lambda: time.time() + 31)
        thief.acquire()  # A's lease looks expired by the thief's clock
        with pytest.raises(LeaseLost, match=r"lost its lease \(now held by thief \(pid") as lost:
            mine.check()
        assert lost.value.exit_code == 15
        assert mine.lost and mine.renew() is False
    finally:
        mine.release()
    found = thief.holder()
    assert found is not None and found[0] is not None and found[0].what == "thief"
    thief.release()

    other = Lease(uri, _store(s3), what="writer B", ttl=30)
    other.acquire()
    try:
        other.client.request("DELETE", other.key)  # removed under it
        with pytest.raises(LeaseLost, match="deleted or replaced"):
            other.check()
    finally:
        other.release()
    again = Lease(uri, _store(s3), what="writer C", ttl=30)
    again.acquire()
    try:
        again.client.request("DELETE", again.key)
        assert again.renew() is False and again.lost  # the renewal finds it gone too
    finally:
        again.release()


@pytest.mark.slow
def test_an_index_whose_lease_is_taken_over_stops_with_exit_15_and_the_next_run_repairs(
    s3: S3Server,
    repo: Repo,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """Another writer takes the lease of a running ``codechunkd index`` over after its
    first batch commit: the index stops before its next commit with one line naming the
    new holder and exit code 15, its source's state is not advanced (still pending), and
    once the other writer is gone the next ``codechunkd index`` completes and verifies."""
    _write_modules(repo, 24, "mod")
    head = repo.commit("init")
    prefix = _prefix()
    uri = f"s3://{s3.BUCKET}/{prefix}"
    child, reader = _start_writer(s3, repo, "index", prefix)
    try:
        thief = Lease(uri, _store(s3), what="thief", ttl=60, clock=lambda: time.time() + 61)
        thief.acquire()  # the index's lease looks expired by the thief's clock
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    try:
        assert child.returncode == 15, err
        said = [line for line in err.splitlines() if line.startswith("codechunkd: error:")]
        assert len(said) == 1 and err.strip().endswith(said[0]), err  # one line, the last
        assert "lost its lease (now held by thief (pid" in said[0], err
        assert "Traceback" not in err, err
        source = GitSource(repo.path).source.id
        state = reader.state(source)
        assert state is not None and state.commit is None and state.pending == head
        rows = reader.count_chunks()
        assert 0 < rows < 24  # stopped part way, at a commit
    finally:
        thief.release()

    done = subprocess.run(
        [EXE, "index", str(repo.path)],
        capture_output=True,
        text=True,
        env=_cli_env(s3, prefix, s3.endpoint),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    state = reader.state(source)
    assert state is not None and state.commit == head and not state.pending
    settings = s3.settings(prefix)
    report = verify(settings, reader, GitSource(repo.path))
    assert report.ok and report.duplicate_ids == 0, report
    assert Lease(uri, _store(s3)).holder() is None  # released


@pytest.mark.slow
def test_a_daemon_whose_lease_is_taken_over_stops_before_its_next_commit(
    s3: S3Server,
    repo: Repo,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """A daemon (``codechunkd run``) indexing one file per batch has its lease taken over
    after its first commit: it stops before its next commit and exits 15, long before its
    next renewal would have told it (the lease is an hour, renewed every 20 minutes), and
    its source's state is not advanced."""
    _write_modules(repo, 24, "mod")
    head = repo.commit("init")
    prefix = _prefix()
    uri = f"s3://{s3.BUCKET}/{prefix}"
    child, reader = _start_writer(s3, repo, "run", prefix, CODECHUNKD_OBJECT_STORE_LEASE_S="3600")
    thief = Lease(uri, _store(s3), what="thief", ttl=60, clock=lambda: time.time() + 3601)
    try:
        thief.acquire()  # the daemon's lease looks expired by the thief's clock
        _, err = child.communicate(timeout=60)  # a renewal would come 20 minutes later
        assert child.returncode == 15, err
        assert "writer_lease_lost" in err, err
        state = reader.state(GitSource(repo.path).source.id)
        assert state is not None and state.commit is None and state.pending == head
        assert 0 < reader.count_chunks() < 24  # stopped part way, at a commit
        holder = Lease(uri, _store(s3)).holder()
        assert holder is not None and holder[0] is not None and holder[0].what == "thief"
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
        thief.release()
