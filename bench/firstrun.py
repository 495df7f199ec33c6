"""The first run as a new user meets it: `codechunkd run` on a repository it has never seen.

A repository of ``--files`` real Python modules from the standard library (no
tests, 1-60 KB each, sorted by path) is committed into a fresh git repository
and a fresh index directory; ``codechunkd run`` starts on it with a notify
socket owned by this script, as systemd would.  Printed:

- time to ``READY=1`` (systemd's start-up timeout must cover only this);
- time to the first search answer (through the control socket; ``partial``);
- time until every file is text-searchable (every file's rows written: the fill of the
  vectors begins, ``progress.activity``);
- time to ready (every source fresh: the first index done, every chunk with its vector);
- chunks, embedded, and chunks/s of the first index;
- the ETA status gave during the fill against the time that was actually left, from 10%
  of the embedding work on (``--timeout`` cuts a long run: coverage is printed instead);
- memory: the daemon's peak RSS (the kernel's ``VmHWM``) when every file is text-searchable
  and at the end, and the highest RSS sampled of the daemon with its worker processes
  (the chunking pool), every half second (Linux; ``/proc``).

No assertion: figures to compare across changes.  The model export and thread
calibration are included when the ONNX directory is empty (``--fresh-model``).

    .venv/bin/python bench/firstrun.py --files 1000
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from codechunkd.daemon.control import DaemonUnavailable, request

EXE = str(Path(sys.executable).parent / "codechunkd")


def make_repo(root: Path, files: int) -> int:
    """``files`` real modules: the standard library's, then the venv's packages' (no tests)."""
    found: list[tuple[Path, Path]] = []
    for label in ("stdlib", "purelib"):
        base = Path(sysconfig.get_paths()[label])
        found += [
            (base, p)
            for p in sorted(base.rglob("*.py"))
            if not {"site-packages", "test", "tests", "idlelib"} & set(p.relative_to(base).parts)
            and 1_000 < p.stat().st_size < 60_000
        ]
    found = found[:files]
    for base, p in found:
        dest = root / ("lib" if base.name != "site-packages" else "pkgs") / p.relative_to(base)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(p.read_bytes())
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x", GIT_COMMITTER_NAME="b")
    env["GIT_COMMITTER_EMAIL"] = "b@x"
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "stdlib"]):
        subprocess.run(["git", *cmd], cwd=root, env=env, check=True)
    return len(found)


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A process's ``VmRSS`` (or ``VmHWM``, its peak) in MiB; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def tree_rss_mib(pid: int) -> float:
    """The RSS of ``pid`` and its children (one level: the daemon's worker processes)."""
    total = rss_mib(pid)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # the parent's pid, after the state
            total += rss_mib(int(stat.parent.name))
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--fresh-model", action="store_true", help="empty ONNX dir: export too")
    ap.add_argument("--timeout", type=float, default=7200.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="codechunkd-firstrun-") as tmp_:
        tmp = Path(tmp_)
        repo = tmp / "repo"
        repo.mkdir()
        n = make_repo(repo, args.files)
        runtime = tmp / "run"
        runtime.mkdir(mode=0o700)
        env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), LANCEDB_LOG="error")
        env["CODECHUNKD_DAEMON_NICE"] = "0"
        if args.fresh_model:
            env["CODECHUNKD_EMBEDDING_ONNX_DIR"] = str(tmp / "onnx")
        notify_path = tmp / "notify.sock"
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(str(notify_path))
        notify.settimeout(0.1)
        env["NOTIFY_SOCKET"] = str(notify_path)
        index = tmp / "index"
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [EXE, "run", str(repo), "--index-dir", str(index)],
            stdout=subprocess.DEVNULL,
            stderr=(tmp / "daemon.log").open("wb"),
            env=env,
        )
        ready_at = answer_at = useful_at = done_at = text_at = None
        etas: list[tuple[float, float, float]] = []  # (time, ETA, share of the fill done)
        partial: Any = None
        useful: Any = None
        peak_tree = hwm_text = hwm_end = 0.0
        doc: dict[str, Any] = {}
        try:
            while time.monotonic() - t0 < args.timeout and done_at is None:
                if proc.poll() is not None:
                    sys.exit(f"daemon exited {proc.returncode}: see {tmp / 'daemon.log'}")
                try:
                    if "READY=1" in notify.recv(4096).decode() and ready_at is None:
                        ready_at = time.monotonic() - t0
                except TimeoutError:
                    pass
                if ready_at is None:
                    continue
                sock = next((runtime / "codechunkd").glob("*.sock"))
                try:
                    if useful_at is None:
                        got = request(
                            sock, {"cmd": "search", "query": "open a file", "k": 5}, timeout=60
                        )
                        if "hits" in got and answer_at is None:
                            answer_at, partial = time.monotonic() - t0, got.get("partial")
                        if got.get("hits"):
                            useful_at, useful = time.monotonic() - t0, got.get("partial")
                    doc = request(sock, {"cmd": "status"}, timeout=10)
                except DaemonUnavailable:
                    continue
                src = (doc.get("sources") or [{}])[0]
                now = time.monotonic() - t0
                peak_tree = max(peak_tree, tree_rss_mib(proc.pid))
                hwm_end = rss_mib(proc.pid, "VmHWM")
                p = src.get("progress") or {}
                if text_at is None and (
                    p.get("activity", "indexing") not in ("indexing", "writing text")
                    or src.get("fresh")
                ):
                    text_at, hwm_text = now, hwm_end
                if p.get("activity") == "filling vectors" and p.get("eta_s") is not None:
                    share = p.get("fill_embedded", 0) / max(1, p.get("fill_texts", 0))
                    etas.append((now, float(p["eta_s"]), share))
                if doc["daemon"]["state"] == "ready" and src.get("fresh"):
                    done_at = now
                time.sleep(0.5)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            notify.close()
        src = (doc.get("sources") or [{}])[0]
        chunks = src.get("chunks") or 0
        print(f"repository: {n} real files (the standard library's, then the venv's packages')")
        print(f"READY=1 after:          {ready_at:.1f} s" if ready_at else "READY=1: never")
        print(
            f"first search answer:    {answer_at:.1f} s (partial: {partial})" if answer_at else ""
        )
        print(f"first answer with hits: {useful_at:.1f} s (partial: {useful})" if useful_at else "")
        print(f"every file text-searchable: {text_at:.1f} s" if text_at else "text: not reached")
        print(f"ready (every vector):   {done_at:.1f} s" if done_at else "ready: not reached")
        print(
            f"coverage at the end:    text {src.get('text_chunks')} · vectors {src.get('vector_chunks')}"
        )
        print(
            f"daemon peak RSS (VmHWM): {hwm_text:.0f} MiB when text-searchable, {hwm_end:.0f} MiB "
            f"at the end; with its workers, highest sampled: {peak_tree:.0f} MiB"
        )
        eta_report(etas, done_at)
        if done_at and ready_at:
            rate = chunks / (done_at - ready_at)
            print(f"chunks: {chunks}, {rate:.1f} chunks/s from READY=1 to complete")


def eta_report(etas: list[tuple[float, float, float]], done_at: float | None) -> None:
    """The ETA against the time actually left, from 10% of the fill on."""
    late = [(t, eta, share) for t, eta, share in etas if share >= 0.10]
    if not late or done_at is None:
        print(f"ETA: {len(etas)} readings; none to check (the fill did not finish)")
        return
    errors = [(eta - (done_at - t)) / max(1e-9, done_at - t) for t, eta, _ in late]
    inside = sum(abs(e) <= 0.25 for e in errors)
    print(
        f"ETA from 10% of the fill on: {len(late)} readings, {inside} within ±25% of the "
        f"time left; worst {max(errors, key=abs):+.0%}"
    )
    for want in (0.1, 0.25, 0.5, 0.75, 0.9):
        t, eta, share = min(late, key=lambda r: abs(r[2] - want))
        print(f"  at {share:4.0%}: ETA {eta:6.0f} s, actually left {done_at - t:6.0f} s")


if __name__ == "__main__":
    main()
