"""Save-to-searchable latency of the daemon, a branch switch, and idle cost.

    .venv/bin/python bench/freshness.py                 # ~5,000 files (slow to build once)
    .venv/bin/python bench/freshness.py --files 500     # a smaller repo, same measurements

The repository is built from the Python standard library source (copied more
than once, under prefixes, when ``--files`` asks for more than it has), then
indexed once with ``codechunkd index``; both are cached under ``bench/out/``
and reused by later runs.  Then a real daemon (``codechunkd run``) is started
and:

1. ``--edits`` single-file edits (a new uniquely named function appended to a
   random file), one at a time: the time from the write to the new content
   being returned by a query *from this process* (a LanceDB reader here, not
   the daemon), polled every 10 ms;  p50 / p95 / max;
2. a branch switch changing ``--switch-files`` files, and back: time from
   ``git checkout`` to the daemon reporting the source fresh at the new HEAD;
3. idle CPU % and RSS of the daemon over ``--idle`` seconds, with the model
   loaded and after asking the daemon to unload it.

Results are printed and written to ``bench/out/freshness-<files>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from codechunkd.daemon.control import request

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
STDLIB = Path("/root/.pyenv/versions/3.11.7/lib/python3.11")
EXE = str(Path(sys.executable).parent / "codechunkd")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    )
    return out.stdout.strip()


def source_files(max_bytes: int) -> list[Path]:
    skip = ("site-packages", "__pycache__")
    files = [
        p
        for p in sorted(STDLIB.rglob("*"))
        if p.is_file()
        and not any(s in p.parts for s in skip)
        and p.stat().st_size <= max_bytes
        and p.suffix not in (".so", ".pyc")
    ]
    return files


def build_repo(n: int, switch: int, max_bytes: int) -> Path:
    repo = OUT / f"repo-{n}-{max_bytes}"
    if (repo / ".git").is_dir():
        return repo
    tmp = OUT / f".repo-{n}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    files = source_files(max_bytes)
    copied = 0
    round_ = 0
    while copied < n:
        for src in files:
            if copied >= n:
                break
            rel = src.relative_to(STDLIB)
            dest = tmp / (f"copy{round_}" if round_ else "") / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            copied += 1
        round_ += 1
    git(tmp, "init", "-q", "-b", "main")
    git(tmp, "add", "-A")
    git(tmp, "commit", "-q", "-m", "stdlib")
    git(tmp, "checkout", "-q", "-b", "switch")
    pys = sorted(p for p in tmp.rglob("*.py") if ".git" not in p.parts)
    rng = random.Random(7)
    for p in rng.sample(pys, min(switch, len(pys))):
        with p.open("a") as f:
            f.write("\n\ndef switched_branch_helper():\n    return 'switch'\n")
    git(tmp, "commit", "-q", "-am", "switch")
    git(tmp, "checkout", "-q", "main")
    tmp.rename(repo)
    return repo


def build_index(repo: Path, index: Path) -> float:
    stamp = index / "_bench_indexed"
    if stamp.is_file():
        return float(stamp.read_text())
    t0 = time.monotonic()
    subprocess.run([EXE, "index", str(repo), "--index-dir", str(index)], check=True)
    seconds = time.monotonic() - t0
    stamp.write_text(str(seconds))
    return seconds


class Daemon:
    def __init__(self, repo: Path, index: Path, env: dict[str, str]) -> None:
        self.notify_path = OUT / "notify.sock"
        self.notify_path.unlink(missing_ok=True)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        self.log = OUT / "daemon.log"
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                [EXE, "run", str(repo), "--index-dir", str(index)],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**env, "NOTIFY_SOCKET": str(self.notify_path)},
            )
        self.env = env

    def wait_ready(self, timeout: float = 600) -> float:
        t0 = time.monotonic()
        self.notify.settimeout(timeout)
        while True:
            msg = self.notify.recv(4096).decode()
            if "READY=1" in msg:
                return time.monotonic() - t0

    def call(self, doc: dict[str, Any], timeout: float = 120) -> Any:
        sock = next((Path(self.env["XDG_RUNTIME_DIR"]) / "codechunkd").glob("*.sock"))
        return request(sock, doc, timeout=timeout)

    def cpu_rss(self) -> tuple[float, int]:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        return cpu, rss

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=120)
        self.notify.close()
        return rc


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def idle(d: Daemon, seconds: float) -> dict[str, float]:
    cpu0, _ = d.cpu_rss()
    t0 = time.monotonic()
    peak = 0
    while time.monotonic() - t0 < seconds:
        time.sleep(1)
        peak = max(peak, d.cpu_rss()[1])
    cpu1, rss = d.cpu_rss()
    wall = time.monotonic() - t0
    return {
        "seconds": round(wall, 1),
        "cpu_percent": round(100 * (cpu1 - cpu0) / wall, 3),
        "rss_mb": round(rss / 1e6, 1),
        "peak_rss_mb": round(peak / 1e6, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--switch-files", type=int, default=1000)
    ap.add_argument("--idle", type=float, default=60.0)
    ap.add_argument(
        "--max-bytes",
        type=int,
        default=200_000,
        help="only files up to this size (smaller: a cheaper cold index)",
    )
    args = ap.parse_args()

    OUT.mkdir(parents=True, exist_ok=True)
    repo = build_repo(args.files, args.switch_files, args.max_bytes)
    index = OUT / f"index-{args.files}-{args.max_bytes}"
    runtime = OUT / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = {
        **os.environ,
        "XDG_RUNTIME_DIR": str(runtime),
        "LANCEDB_LOG": "error",
        **GIT_ENV,
    }
    print(f"repo: {repo} ({args.files} files)", flush=True)
    cold = build_index(repo, index)
    print(f"cold index: {cold:.0f} s (cached after the first run)", flush=True)
    git(repo, "checkout", "-q", "main")
    git(repo, "reset", "-q", "--hard")
    git(repo, "clean", "-qfd")

    sys.path.insert(0, str(ROOT / "src"))
    from codechunkd.storage.rows import quote
    from codechunkd.storage.store import IndexStore

    reader = IndexStore(str(index))  # another process than the daemon, strong consistency
    d = Daemon(repo, index, env)
    result: dict[str, Any] = {"files": args.files, "max_bytes": args.max_bytes}
    try:
        result["ready_s"] = round(d.wait_ready(), 2)
        t0 = time.monotonic()
        d.call({"cmd": "search", "query": "warm up", "k": 1})
        result["first_search_s"] = round(time.monotonic() - t0, 2)
        t0 = time.monotonic()
        d.call({"cmd": "search", "query": "open a file", "k": 10})
        result["warm_search_s"] = round(time.monotonic() - t0, 3)

        pys = sorted(p for p in repo.rglob("*.py") if ".git" not in p.parts)
        rng = random.Random(11)
        latencies: list[float] = []
        table = reader.chunks_table()
        for i in range(args.edits):
            target = rng.choice(pys)
            rel = str(target.relative_to(repo))
            token = f"bench_marker_{i}_{rng.randrange(1 << 30)}"
            text = target.read_text(errors="replace")
            t0 = time.monotonic()
            target.write_text(text + f"\n\ndef {token}():\n    return {i}\n")
            where = f"path = {quote(rel)} AND content LIKE {quote('%' + token + '%')}"
            while True:
                if table.search().where(where).limit(1).to_list():
                    break
                if time.monotonic() - t0 > 60:
                    raise SystemExit(f"edit {i} of {rel} never became searchable")
                time.sleep(0.01)
            latencies.append(time.monotonic() - t0)
            time.sleep(0.2)
        result["edits"] = {
            "n": len(latencies),
            "p50_s": round(statistics.median(latencies), 3),
            "p95_s": round(pct(latencies, 0.95), 3),
            "max_s": round(max(latencies), 3),
        }
        print(f"save→searchable: {result['edits']}", flush=True)

        git(repo, "checkout", "-q", "--", ".")  # drop the edits (the daemon follows)
        time.sleep(2)
        for branch in ("switch", "main"):
            t0 = time.monotonic()
            git(repo, "checkout", "-q", branch)
            head = git(repo, "rev-parse", "HEAD")
            while True:
                doc = d.call({"cmd": "status"})
                s = doc["sources"][0]
                if s["commit"] == head and s["fresh"] and doc["daemon"]["state"] == "ready":
                    break
                time.sleep(0.05)
            result[f"switch_to_{branch}_s"] = round(time.monotonic() - t0, 2)
            result[f"switch_to_{branch}_batch"] = s["last_batch"]
            print(
                f"checkout {branch} → consistent: {result[f'switch_to_{branch}_s']} s", flush=True
            )

        time.sleep(3)
        result["idle_model_loaded"] = idle(d, args.idle)
        print(f"idle (model loaded): {result['idle_model_loaded']}", flush=True)
        d.call({"cmd": "unload"})
        result["idle_model_unloaded"] = idle(d, args.idle)
        print(f"idle (model unloaded): {result['idle_model_unloaded']}", flush=True)
        status = d.call({"cmd": "status"})
        result["cache"] = status["daemon"]["cache"]
    finally:
        result["exit_code"] = d.stop()
    out = OUT / f"freshness-{args.files}-{args.max_bytes}.json"
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
