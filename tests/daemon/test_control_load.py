"""The control socket under a crowd, and the writer lock when the index directory goes (#28).

A full listen queue is a busy daemon, not a missing one; a directory deleted under a
running daemon does not let a second writer in, and the daemon indexes anew in a new one.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Repo, scaled, wait_for
from tests.daemon.test_service_e2e import Daemon, cli

from codechunkd.config import Settings
from codechunkd.daemon.control import ControlServer, DaemonUnavailable, request
from codechunkd.daemon.status import EXIT_STALLED
from codechunkd.storage.crashpoints import HOLD_ENV, TRACE_ENV
from codechunkd.storage.layout import IndexPaths, private_dir
from codechunkd.storage.lease import writer_lock

CROWD = 100
"""Connections made before the server accepts any: more than socketserver's queue of 5."""


def test_a_crowd_of_connections_waits_in_the_queue_and_is_answered(tmp_path: Path) -> None:
    """CROWD clients connect before the server accepts one: every connect is queued (none
    gets EAGAIN), and once it serves, every one is answered."""
    server = ControlServer(tmp_path / "run" / "d.sock", {"ping": lambda _req: {"ok": True}})
    clients: list[socket.socket] = []
    try:
        for _ in range(CROWD):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            clients.append(s)
            s.setblocking(False)
            s.connect(str(server.path))  # BlockingIOError (EAGAIN) when the queue is full
        server.start()
        for s in clients:
            s.settimeout(30)
            s.sendall(b'{"cmd": "ping"}\n')
        answers = [json.loads(s.makefile("rb").readline()) for s in clients]
    finally:
        for s in clients:
            s.close()
        server.stop()
    assert answers == [{"ok": True}] * CROWD


def test_a_full_queue_is_a_busy_daemon_not_a_stopped_one(settings: Settings) -> None:
    """A daemon (holding the writer lock) whose listen queue is full: ``status`` asks again
    until its deadline, then says stalled, why and the pid, never stopped (nor an uptime,
    model or cache it was not told); a queue that drains meanwhile gets the request
    answered."""
    paths = IndexPaths.of(settings)
    assert private_dir(paths.runtime) is None
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(paths.socket))
    listener.listen(0)
    fillers: list[socket.socket] = []
    try:
        while True:  # fill the queue
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(str(paths.socket))
            except BlockingIOError:
                s.close()
                break
            fillers.append(s)
        with writer_lock(paths, what="codechunkd run"):  # as the daemon holds it
            done = cli("status", "--json", "--index-dir", paths.uri)
            doc = json.loads(done.stdout)
            assert done.returncode == EXIT_STALLED, done.stdout + done.stderr
            assert doc["daemon"]["state"] == "stalled"
            assert "connection queue was full" in doc["daemon"]["reason"]
            assert doc["daemon"]["pid"] == os.getpid()  # who holds the lock: no invented rest
            text = cli("status", "--index-dir", paths.uri).stdout
            assert text.startswith(f"daemon: stalled  pid {os.getpid()}\n  stalled: "), text
            _drained_queue_answers(listener, fillers, paths.socket)
    finally:
        for s in fillers:
            s.close()
        listener.close()


def _drained_queue_answers(
    listener: socket.socket, fillers: list[socket.socket], path: Path
) -> None:
    def serve() -> None:  # drain the queue, then answer the next client
        for _ in fillers:
            listener.accept()[0].close()
        conn, _ = listener.accept()
        with conn:
            conn.makefile("rb").readline()
            conn.sendall(b'{"ok": true}\n')

    server = threading.Thread(target=serve)
    server.start()
    try:
        assert request(path, {"cmd": "ping"}, timeout=60, running=lambda: True) == {"ok": True}
    finally:
        server.join(timeout=60)


def _stdlib_repo(repo: Repo, files: int) -> None:
    """``files`` real modules of the standard library: 12 are some 200 chunks, a cold index
    of some seconds, searched all along by the clients (40 were 700, a minute of CPU)."""
    lib = Path(json.__file__).parents[1]
    picked = [p for p in sorted(lib.glob("*.py")) if 2_000 < p.stat().st_size < 20_000][:files]
    for p in picked:
        repo.write(f"lib/{p.name}", p.read_text())
    repo.commit("stdlib")


@pytest.mark.slow
def test_twenty_clients_searching_during_a_cold_index_are_all_answered(
    repo: Repo, tmp_path: Path, index_dir: Path, daemons: list[Daemon]
) -> None:
    """20 clients search in a loop through the socket while the daemon indexes: every
    request is answered (no "no daemon", no error), and some while the first index ran."""
    _stdlib_repo(repo, 12)
    d = Daemon(tmp_path, index_dir, repo.path)
    daemons.append(d)
    d.wait_notify("READY=1")
    _search_in_a_crowd(d)
    assert d.stop() == 0


def _filling(coverage: dict[str, Any]) -> bool:
    """The answer came while the first index's vectors filled in: every file written (no
    longer ``partial``), fewer vectors than chunks."""
    return bool(coverage.get("vector_chunks", 0) < coverage.get("text_chunks", 0))


def _search_in_a_crowd(d: Daemon) -> None:
    failures: list[str] = []
    partial = 0
    stop = threading.Event()
    lock = threading.Lock()

    def client() -> None:
        nonlocal partial
        while not stop.is_set():
            try:
                answer: Any = d.call({"cmd": "search", "query": "parse a header", "k": 5})
            except DaemonUnavailable as exc:
                answer = {"error": f"unavailable: {exc.reason}"}
            with lock:
                if "hits" not in answer:
                    failures.append(str(answer))
                elif answer.get("partial") or _filling(answer.get("coverage") or {}):
                    partial += 1

    threads = [threading.Thread(target=client) for _ in range(20)]
    for t in threads:
        t.start()
    try:
        wait_for(
            lambda: d.status()["daemon"]["state"] == "ready" or failures, "the first index", 600
        )
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert not failures, failures[:5]
    assert partial, "no search was answered while the first index ran"


@pytest.mark.slow
def test_index_directory_deleted_under_a_running_daemon_is_made_anew(
    repo: Repo, tmp_path: Path, index_dir: Path, daemons: list[Daemon]
) -> None:
    """``rm -rf`` of the index under a running daemon: ``codechunkd index`` is still refused
    (the lock beside the socket outlives the directory, and the daemon's start again), and
    the daemon, the same process, indexes its sources anew in a new directory, the ones
    ``codechunkd add`` listed too; systemd hears it reload (``RELOADING=1``, then
    ``READY=1``), never stop."""
    repo.write("app.py", "def handle_request():\n    return 'alpha_marker'\n")
    repo.commit("init")
    other = Repo(tmp_path / "other")
    other.write("lib.py", "def gamma_marker_heron():\n    return 3\n")
    other.commit("init")
    d = Daemon(tmp_path, index_dir, repo.path)
    daemons.append(d)
    d.wait_notify("READY=1")
    added = cli("add", str(other.path), "--index-dir", str(index_dir))
    assert added.returncode == 0, added.stdout + added.stderr
    wait_for(lambda: len(d.status()["sources"]) == 2, "the added source", 60)
    wait_for(lambda: d.status()["daemon"]["state"] == "ready", "the first index", 300)

    shutil.rmtree(index_dir)
    second = cli("index", str(repo.path), "--index-dir", str(index_dir))
    assert second.returncode == 5, second.stdout + second.stderr
    assert f"process {d.proc.pid}" in second.stderr
    repo.write("b.py", "def beta_marker_ocelot():\n    return 2\n")  # committed meanwhile
    repo.commit("b")

    wait_for(lambda: "".join(d.messages).count("READY=1") == 2, "the daemon ready again", 120)
    d.searchable("beta marker ocelot", "b.py", "beta_marker_ocelot", 120)
    d.searchable("handle request", "app.py", "alpha_marker", 60)
    d.searchable("gamma marker heron", "lib.py", "gamma_marker_heron", 60)
    status = cli("status", "--index-dir", str(index_dir))
    assert status.returncode == 0, status.stdout + status.stderr  # fresh, not stalled
    assert f"pid {d.proc.pid}" in status.stdout
    listed = json.loads((index_dir / "_codechunkd" / "sources.json").read_text())
    assert [s["path"] for s in listed["sources"]] == [str(other.path)]
    assert [e["index"] for e in d.events("index_directory_removed")] == [str(index_dir)]
    assert d.proc.poll() is None
    assert d.stop() == 0
    said = "".join(d.messages)
    assert said.count("READY=1") == 2 and "RELOADING=1" in said, d.messages
    assert said.count("STOPPING=1") == 1, d.messages  # the SIGTERM's alone


@pytest.mark.slow
def test_index_deleted_under_a_batch_that_does_not_end_exits_15(
    repo: Repo, tmp_path: Path, index_dir: Path, daemons: list[Daemon]
) -> None:
    """The index directory deleted while the writer is inside a batch that outlasts the
    shutdown's wait (held there on purpose): that batch may still run, so the daemon does
    not start again in its process; it exits 15, which systemd's ``Restart=on-failure``
    restarts (exit 0, as before, it would not)."""
    repo.write("app.py", "def handle_request():\n    return 'alpha_marker'\n")
    repo.commit("init")
    trace = tmp_path / "points.trace"
    held = {HOLD_ENV: "write_batch.after:1", TRACE_ENV: str(trace)}
    d = Daemon(tmp_path, index_dir, repo.path, env=held, shutdown_timeout_s="0.5")
    daemons.append(d)
    d.wait_notify("READY=1")
    wait_for(
        lambda: trace.exists() and "write_batch.after" in trace.read_text(),
        "the first batch written, the writer held there",
        60,
    )
    shutil.rmtree(index_dir)
    assert d.proc.wait(timeout=scaled(60)) == 15, d.log.read_text()[-3000:]
    assert d.events("index_directory_removed") and d.events("index_directory_removed_exiting")


def test_connections_past_the_cap_wait_and_idle_ones_are_let_go(tmp_path: Path) -> None:
    """Past ``max_connections`` open at once, a new connection waits in the listen queue (it
    holds no descriptor of the daemon's: 1,100 idle clients used them all up, and the
    writer failed with "Too many open files"), and is answered once one closes; a
    connection that sends nothing is closed after ``idle_s``."""
    server = ControlServer(
        tmp_path / "run" / "d.sock",
        {"ping": lambda _req: {"ok": True}},
        max_connections=4,
        idle_s=3600,
    )
    server.start()
    idle: list[socket.socket] = []
    try:
        for _ in range(4):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            idle.append(s)
            s.connect(str(server.path))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as late:
            late.connect(str(server.path))  # queued: the four hold every slot
            late.sendall(b'{"cmd": "ping"}\n')
            late.settimeout(0.5)
            with pytest.raises(TimeoutError):
                late.recv(1 << 16)  # never answered while the four stay open
            idle.pop().close()  # a slot frees: the queued one is taken and answered
            late.settimeout(scaled(30))
            assert json.loads(late.makefile("rb").readline()) == {"ok": True}
    finally:
        for s in idle:
            s.close()
        server.stop()
    quick = ControlServer(tmp_path / "run2" / "d.sock", {}, idle_s=0.2)
    quick.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(quick.path))
            s.settimeout(scaled(30))
            assert s.recv(1) == b""  # closed by the server, not by the client's timeout
    finally:
        quick.stop()
