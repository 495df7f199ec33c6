"""Start-up cost of each command, and what an idle daemon holds, in one run.

A repository of ``--files`` real modules of the standard library (``bench/firstrun.py``'s
``make_repo``) is indexed once into a temporary index.  Then, for this checkout and, with
``--baseline SRC`` (another checkout's ``src``, e.g. ``/work/main/src``), for that code too,
alternating round by round (``--rounds``), medians of:

- ``status`` with no daemon: CPU-seconds (user + system, children included) and wall;
- ``search`` with no daemon: the same;
- ``mcp`` over stdio (the MCP SDK's client): wall from spawning the server to the answer of
  its first ``search`` (the client has imported its SDK by then, as a running agent has),
  and the server's CPU-seconds to that point, its reader process's included; then the same
  with the search sent 2 s after the handshake, as an agent's first question comes (its
  wall is that answer's alone);

then, for this checkout only: ``codechunkd run`` from spawning to ``ready`` on the current
index, a ``search`` answered by it (client CPU and wall), and the daemon's RSS after
``--idle`` seconds idle with the model loaded (after one search) and unloaded (the
``unload`` control command), beside its parts, each measured alone in a fresh interpreter:
Python with codechunkd's CLI, + onnxruntime, + the model loaded with one query, lancedb,
``IndexStore`` + one text search, + Lance itself (the writer's upkeep reads and cleans
through it), + the daemon's other modules; and ``open_index`` + one text search (a reader,
through Lance alone).  Figures only, no assertion.

    .venv/bin/python bench/startup.py --baseline /work/main/src
    .venv/bin/python bench/startup.py --baseline /work/main/src --reuse REPO INDEX
    .venv/bin/python bench/startup.py --baseline OLD/src \
        --baseline-env CODECHUNKD_EMBEDDING_ONNX_DIR=DIR   # the old code's own model export

Both variants share the model's export cache unless ``--baseline-env`` gives the baseline
its own: code from before the weights moved beside the graph (``model.onnx.data``) would
otherwise load this checkout's export, and gain from it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# as a script, bench/ comes first on sys.path, and bench/mcp.py would shadow the MCP SDK
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "src"))

from codechunkd.daemon.control import DaemonUnavailable, request  # noqa: E402

EXE = str(Path(sys.executable).parent / "codechunkd")
HERE = str(Path(__file__).resolve().parent.parent / "src")
QUERY = "open a file and read its lines"
MCP_DELAY = 2.0
MCP_LATER = f"mcp first search {MCP_DELAY:.0f} s after the handshake (its answer's wall)"


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU-seconds, wall seconds) of one command, to its exit."""
    cpu, t0 = children_cpu(), time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall, used = time.monotonic() - t0, children_cpu() - cpu
    if done.returncode not in (0, 13):  # 13: status with the daemon stopped
        sys.exit(f"{argv[1]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return used, wall


def mcp_first_search(index: Path, env: dict[str, str], delay: float = 0.0) -> tuple[float, float]:
    """(server CPU-seconds, wall) from spawning ``codechunkd mcp`` to its first search answer
    (the SDK's client spawns it: no wrapper's own start is counted);
    with ``delay``, the search is sent that long after the handshake (as an agent's first
    question comes) and the wall is that answer's alone."""
    code = (
        "import asyncio, os, sys, time\n"
        "from mcp.client.session import ClientSession\n"
        "from mcp.client.stdio import StdioServerParameters, stdio_client\n"
        "async def main():\n"
        "    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))\n"
        "    spawned = time.monotonic()\n"
        "    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:\n"
        "        await s.initialize()\n"
        f"        await asyncio.sleep({delay})\n"
        "        t = time.monotonic()\n"
        f"        res = await s.call_tool('search', {{'query': {QUERY!r}, 'k': 10}})\n"
        "        assert not res.is_error, res.content\n"
        "        now = time.monotonic()\n"
        "        tasks = os.listdir('/proc/self/task')\n"  # the server: this client's one child
        "        kids = [c for t in tasks for c in open(f'/proc/self/task/{t}/children').read().split()]\n"
        "        print('answered', now - t, now - spawned, kids[0], flush=True)\n"
        "        sys.stdin.readline()\n"
        "asyncio.run(main())\n"
    )
    argv = [EXE, "mcp", "--index-dir", str(index)]
    client = subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert client.stdin is not None and client.stdout is not None
    line = client.stdout.readline()
    if not line.startswith("answered "):
        sys.exit("mcp: no answer to the first search")
    wall = float(line.split()[1 if delay else 2])
    cpu = process_cpu(int(line.split()[3]))
    client.stdin.close()  # the client leaves, the server's stdin closes, the server ends
    client.wait(timeout=120)
    return cpu, wall


def process_cpu(pid: int) -> float:
    """CPU-seconds of a live process, of its children it waited for, and of those alive (the
    MCP server's reader process), from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    alive = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(OSError):  # gone meanwhile: its time is lost with it
                alive += process_cpu(int(child))
    return ticks / os.sysconf("SC_CLK_TCK") + alive


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


PART = """
import gc, json, sys, ctypes
def rss():
    return int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20
out = {}
import codechunkd.cli
gc.collect(); out['python + codechunkd cli'] = rss()
from codechunkd.config import load_settings
settings = load_settings(overrides={'index.dir': sys.argv[1]})
if sys.argv[2] == 'model':
    import onnxruntime, tokenizers
    gc.collect(); out['+ onnxruntime'] = rss()
    from codechunkd.embedding.embedder import make_embedder
    held = make_embedder(settings.embedding)
    held.embed([sys.argv[3]])
    gc.collect(); ctypes.CDLL('libc.so.6').malloc_trim(0); out['+ model, one query'] = rss()
elif sys.argv[2] == 'lancedb':
    from codechunkd.storage._lancedb import import_lancedb
    import_lancedb()
    gc.collect(); out['+ lancedb'] = rss()
    from codechunkd.storage.store import IndexStore
    from codechunkd.storage.reader import Index
    held = Index(IndexStore(sys.argv[1]), settings)
    held.search(sys.argv[3], mode='text')
    gc.collect(); ctypes.CDLL('libc.so.6').malloc_trim(0); out['+ IndexStore + text search'] = rss()
    from datetime import timedelta
    store = held.store
    store.unindexed()  # Lance itself (pylance): the writer's upkeep reads and cleans through it
    store.remove_unreferenced_files(timedelta(days=7))
    gc.collect(); ctypes.CDLL('libc.so.6').malloc_trim(0); out["+ Lance (the writer's upkeep)"] = rss()
    import codechunkd.daemon.service
    gc.collect(); out["+ the daemon's other modules"] = rss()
else:
    from codechunkd.storage.reader import open_index
    held = open_index(settings=settings)
    held.search(sys.argv[3], mode='text')
    gc.collect(); ctypes.CDLL('libc.so.6').malloc_trim(0); out['+ open_index + text search'] = rss()
print(json.dumps(out))
"""


def parts(index: Path, env: dict[str, str]) -> dict[str, float]:
    """RSS (MiB) of each part of an idle daemon, each measured alone after the CLI's import."""
    found: dict[str, float] = {}
    for what in ("model", "lancedb", "reader"):
        done = subprocess.run(
            [sys.executable, "-c", PART, str(index), what, QUERY],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        found.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return found


def wait(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    sys.exit(f"timed out waiting for {what}")


def daemon(repo: Path, index: Path, env: dict[str, str], tmp: Path, idle: float) -> None:
    """Start to ready, a search through it, and the idle RSS loaded and unloaded."""
    runtime = tmp / "daemon-run"
    runtime.mkdir(mode=0o700)
    denv = dict(env, XDG_RUNTIME_DIR=str(runtime), CODECHUNKD_DAEMON_NICE="0")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [EXE, "run", str(repo), "--index-dir", str(index)],
        env=denv,
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "daemon.log").open("wb"),
    )
    try:

        def ready() -> Path | None:
            if proc.poll() is not None:
                sys.exit(f"the daemon exited {proc.returncode}: see {tmp / 'daemon.log'}")
            for sock in (runtime / "codechunkd").glob("*.sock"):
                try:
                    doc = request(sock, {"cmd": "status"}, timeout=10)
                except (DaemonUnavailable, OSError):
                    return None
                srcs = doc.get("sources") or []
                if doc["daemon"]["state"] == "ready" and srcs and all(s["fresh"] for s in srcs):
                    return sock
            return None

        sock: Path = wait(ready, 600, "the daemon to be ready")
        start = time.monotonic() - t0
        argv = [EXE, "search", QUERY, "--index-dir", str(index)]
        timed(argv, denv)  # the daemon's first search loads its model
        cpu, wall = timed(argv, denv)
        print(f"daemon start to ready (current index): {start:6.2f} s wall")
        print(f"search via the daemon:                  {cpu:6.2f} CPU-s {wall:6.2f} s wall")
        time.sleep(idle)
        loaded = rss_mib(proc.pid)
        request(sock, {"cmd": "unload"}, timeout=60)
        time.sleep(idle)
        unloaded = rss_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    print(
        f"idle daemon RSS after {idle:.0f} s: model loaded {loaded:6.1f} MiB, unloaded "
        f"{unloaded:6.1f} MiB",
        flush=True,
    )
    found = parts(index, env)
    base = found["python + codechunkd cli"]
    ort = found["+ onnxruntime"] - base
    model = found["+ model, one query"] - found["+ onnxruntime"]
    lancedb = found["+ lancedb"] - base
    store = found["+ IndexStore + text search"] - found["+ lancedb"]
    reader = found["+ open_index + text search"] - base
    lance = found["+ Lance (the writer's upkeep)"] - found["+ IndexStore + text search"]
    modules = found["+ the daemon's other modules"] - found["+ Lance (the writer's upkeep)"]
    print(
        f"  parts: python + cli {base:.0f}, onnxruntime +{ort:.0f}, model +{model:.0f}, "
        f"lancedb +{lancedb:.0f}, IndexStore + text search +{store:.0f}, Lance for the "
        f"writer's upkeep +{lance:.0f}, the daemon's other "
        f"modules (git, chunking, watcher, ...) +{modules:.0f} "
        f"(through Lance alone, open_index + text search: +{reader:.0f}) MiB"
    )
    unloaded_sum = base + ort + lancedb + store + lance + modules
    print(
        f"  sum of parts: unloaded {unloaded_sum:.0f} MiB, loaded {unloaded_sum + model:.0f} "
        f"MiB; RSS / sum: unloaded {unloaded / unloaded_sum:.2f}, loaded "
        f"{loaded / (unloaded_sum + model):.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=50)
    ap.add_argument("--baseline", help="another checkout's src, run alternately (today's code)")
    ap.add_argument(
        "--baseline-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the baseline's commands only (e.g. its own "
        "CODECHUNKD_EMBEDDING_ONNX_DIR, where its model export is of its own format)",
    )
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--idle", type=float, default=60.0, help="seconds idle before each RSS")
    ap.add_argument("--no-daemon", action="store_true", help="skip the daemon's figures")
    ap.add_argument(
        "--reuse",
        nargs=2,
        metavar=("REPO", "INDEX"),
        help="a repository and its current index made earlier (by this bench's make_repo)",
    )
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from firstrun import make_repo

    with tempfile.TemporaryDirectory(prefix="codechunkd-startup-") as tmp_:
        tmp = Path(tmp_)
        repo, index, runtime = tmp / "repo", tmp / "index", tmp / "run"
        runtime.mkdir(mode=0o700)
        env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), LANCEDB_LOG="error")
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: compiled modules are cached
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        if args.reuse:
            repo, index = (Path(p).resolve() for p in args.reuse)
            n = int(subprocess.check_output(["git", "ls-files"], cwd=repo).count(b"\n"))
        else:
            repo.mkdir()
            n = make_repo(repo, args.files)
        t0 = time.monotonic()
        subprocess.run(
            [EXE, "index", str(repo), "--index-dir", str(index)],
            env=dict(env, PYTHONPATH=HERE),
            check=True,
            capture_output=True,
        )
        print(
            f"repository: {n} stdlib files, indexed (or checked current) in "
            f"{time.monotonic() - t0:.0f} s"
        )
        variants = {"this checkout": HERE}
        baseline_env = dict(kv.split("=", 1) for kv in args.baseline_env)
        if args.baseline:
            variants["baseline"] = str(Path(args.baseline).resolve())
        commands = {
            "status": [EXE, "status", "--index-dir", str(index)],
            "search": [EXE, "search", QUERY, "--index-dir", str(index)],
        }
        figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for rnd in range(
            args.rounds + 1 if args.rounds else 0
        ):  # --rounds 0: the daemon only  # round 0 warms the bytecode caches, not counted
            for label, src in variants.items():
                venv = dict(env, PYTHONPATH=src, **(baseline_env if label == "baseline" else {}))
                for name, argv in commands.items():
                    got = timed(argv, venv)
                    if rnd:
                        figures.setdefault((name, label), []).append(got)
                got = mcp_first_search(index, venv)
                if rnd:
                    figures.setdefault(("mcp first search", label), []).append(got)
                got = mcp_first_search(index, venv, delay=MCP_DELAY)
                if rnd:
                    figures.setdefault((MCP_LATER, label), []).append(got)
        if args.rounds:
            print(f"medians of {args.rounds} alternating rounds (CPU-s include children):")
        for name in (*commands, "mcp first search", MCP_LATER) if args.rounds else ():
            line = f"  {name:<17}"
            cpus = {}
            walls = {}
            for label in variants:
                xs = figures[(name, label)]
                cpus[label] = statistics.median(x[0] for x in xs)
                walls[label] = statistics.median(x[1] for x in xs)
                line += f" {label}: {cpus[label]:5.2f} CPU-s {walls[label]:6.2f} s wall;"
            if "baseline" in variants:
                c = cpus["this checkout"] / cpus["baseline"]
                w = walls["this checkout"] / walls["baseline"]
                line += f" ratio CPU {c:.2f}, wall {w:.2f}"
            print(line)
        if not args.no_daemon:
            daemon(repo, index, dict(env, PYTHONPATH=HERE), tmp, args.idle)


if __name__ == "__main__":
    main()
