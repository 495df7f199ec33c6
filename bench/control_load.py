"""Searches through the control socket from a crowd of clients, while a cold index runs and idle.

A repository of ``--files`` real modules of the standard library is committed into
a fresh git repository; ``codechunkd run`` starts on it with a fresh index (and a
notify socket this script reads, as systemd would).  From READY=1, ``--clients``
threads each search in a loop through the control socket (``request``, as
``codechunkd search`` does) until the first index is complete; then the same
crowd searches the idle daemon for ``--idle`` seconds.  A status thread asks
``status`` meanwhile, as ``codechunkd status`` does.  Printed per phase: requests,
p50 / p95 / max latency, errors (no answer, or an error answer), "stopped" answers
(no daemon, from a daemon that is running) and "stalled" answers (busy: asked
again until the client's timeout).

No assertion: figures to compare across changes (0 errors and 0 stopped expected).

    .venv/bin/python bench/control_load.py                 # 30 files, 20 clients
    .venv/bin/python bench/control_load.py --files 60 --idle 30
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codechunkd.config import load_settings
from codechunkd.daemon.control import DaemonUnavailable, daemon_pid, request
from codechunkd.storage.layout import IndexPaths
from firstrun import make_repo

EXE = str(Path(sys.executable).parent / "codechunkd")
QUERIES = ("open a file", "parse a header", "join paths", "format a date", "read the config")


@dataclass
class Phase:
    name: str
    seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stopped: int = 0
    stalled: int = 0
    statuses: int = 0
    partial: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def line(self) -> str:
        s = sorted(self.seconds)
        if not s:
            return f"{self.name}: no answers; errors {len(self.errors)}"
        p95 = s[min(len(s) - 1, int(0.95 * len(s)))]
        return (
            f"{self.name}: {len(s)} searches ({self.partial} partial), "
            f"p50 {statistics.median(s) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
            f"max {s[-1] * 1000:.0f} ms; errors {len(self.errors)}, stopped {self.stopped}, "
            f"stalled {self.stalled}; status asked {self.statuses} times"
        )


def ask(paths: IndexPaths, doc: dict[str, Any], timeout: float, phase: Phase) -> Any:
    """One request as the CLI makes it; tallies what is not an answer."""
    try:
        return request(paths.socket, doc, timeout=timeout, running=lambda: daemon_pid(paths))
    except DaemonUnavailable as exc:
        with phase.lock:
            if exc.stalled:
                phase.stalled += 1
            else:
                phase.stopped += 1
            phase.errors.append(exc.reason)
        return None


def client(paths: IndexPaths, n: int, phase: Phase, stop: threading.Event) -> None:
    i = n
    while not stop.is_set():
        t0 = time.monotonic()
        doc = {"cmd": "search", "query": QUERIES[i % len(QUERIES)], "k": 10}
        answer = ask(paths, doc, 60.0, phase)
        i += 1
        if answer is None:
            continue
        with phase.lock:
            if "hits" in answer:
                phase.seconds.append(time.monotonic() - t0)
                phase.partial += bool(answer.get("partial"))
            else:
                phase.errors.append(str(answer.get("error")))


def crowd(paths: IndexPaths, clients: int, phase: Phase, until: Any) -> None:
    """``clients`` searching, and ``status`` every second, until ``until()`` is true."""
    stop = threading.Event()
    threads = [
        threading.Thread(target=client, args=(paths, n, phase, stop)) for n in range(clients)
    ]
    for t in threads:
        t.start()
    try:
        while not until():
            ask(paths, {"cmd": "status"}, 2.0, phase)
            with phase.lock:
                phase.statuses += 1
            stop.wait(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=30)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of the idle phase")
    ap.add_argument("--timeout", type=float, default=900.0, help="for the cold index")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="codechunkd-control-load-") as tmp_:
        tmp = Path(tmp_)
        repo = tmp / "repo"
        repo.mkdir()
        n = make_repo(repo, args.files)
        runtime = tmp / "run"
        runtime.mkdir(mode=0o700)
        os.environ.update(XDG_RUNTIME_DIR=str(runtime), LANCEDB_LOG="error")
        env = dict(os.environ, CODECHUNKD_DAEMON_NICE="0")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(str(tmp / "notify.sock"))
        notify.settimeout(0.2)
        env["NOTIFY_SOCKET"] = str(tmp / "notify.sock")
        index = tmp / "index"
        paths = IndexPaths.of(load_settings(env={}, overrides={"index.dir": str(index)}))
        ready = threading.Event()
        done = threading.Event()

        def read_notify() -> None:  # read as systemd does: an unread queue blocks the daemon
            while not done.is_set():
                with contextlib.suppress(TimeoutError):
                    if b"READY=1" in notify.recv(4096):
                        ready.set()

        reader = threading.Thread(target=read_notify)
        reader.start()
        log = (tmp / "daemon.log").open("wb")
        proc = subprocess.Popen(
            [EXE, "run", str(repo), "--index-dir", str(index)],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
        cold, idle = Phase("during the cold index"), Phase("idle daemon")
        try:
            while not ready.wait(0.5):
                if proc.poll() is not None:
                    sys.exit(f"daemon exited {proc.returncode}")
            t0 = time.monotonic()

            def indexed() -> bool:
                if proc.poll() is not None or time.monotonic() - t0 > args.timeout:
                    return True
                doc = ask(paths, {"cmd": "status"}, 10.0, Phase("probe"))
                return bool(doc and doc["daemon"]["state"] == "ready")

            crowd(paths, args.clients, cold, indexed)
            cold_s = time.monotonic() - t0
            end = time.monotonic() + args.idle
            crowd(paths, args.clients, idle, lambda: time.monotonic() > end)
            status = request(paths.socket, {"cmd": "status"}, timeout=10)
        finally:
            proc.terminate()
            proc.wait(timeout=120)
            done.set()
            reader.join()
            notify.close()
            log.close()
        src = (status.get("sources") or [{}])[0]
        print(
            f"repository: {n} stdlib files, {src.get('chunks')} chunks; {args.clients} clients; "
            f"cold index {cold_s:.0f} s with the crowd; {os.cpu_count()} cores"
        )
        for phase in (cold, idle):
            print(phase.line())
            for reason in sorted(set(phase.errors))[:5]:
                print(f"  error: {reason}")


if __name__ == "__main__":
    main()
