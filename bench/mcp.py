"""Search latency through `codechunkd mcp`, with and without a daemon (median, p95).

The client is the MCP SDK's own, over stdio, as an agent spawns the server.
The index is the same kind as ``bench/query.py`` reads: real code nobody on
this project wrote (the standard library), real-model vectors.  Without
``--index`` a repository of ``--files`` stdlib files is built and indexed once
under ``bench/out/`` (``--window`` sets the model window, as bench/incremental.py).

1. no daemon: the server opens the index read-only and loads the query model itself;
2. ``codechunkd run`` on the same repository and index: the server asks the daemon.

Each round first sends one untimed search (the model load), then ``--queries``
timed ``search`` tool calls (k=10, hybrid), queries being first sentences of
real docstrings.  Printed figures only.

    .venv/bin/python bench/mcp.py --files 200 --window 32
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

# run as a script, this file's folder comes first on sys.path and this file would
# shadow the MCP SDK (also named ``mcp``): drop the folder before importing it
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import anyio  # noqa: E402

from mcp.client.session import ClientSession  # noqa: E402  # isort: skip
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402  # isort: skip

from codechunkd.config import load_settings  # noqa: E402
from codechunkd.daemon.control import DaemonUnavailable, request  # noqa: E402
from codechunkd.storage.layout import IndexPaths  # noqa: E402

OUT = Path(__file__).parent / "out"
EXE = str(Path(sys.executable).parent / "codechunkd")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def build(files: int, window: int, env: dict[str, str]) -> tuple[Path, Path]:
    """(repository, index): stdlib files committed once, indexed once; both cached."""
    repo = OUT / f"mcp-repo-{files}"
    index = OUT / f"mcp-index-{files}-w{window}"
    if not (repo / ".git").is_dir():
        shutil.rmtree(repo, ignore_errors=True)
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        picked = sorted(p for p in stdlib.glob("*.py") if 2_000 < p.stat().st_size < 60_000)
        for p in picked[:files]:
            (repo / p.name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, repo / p.name)
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "stdlib"]):
            subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    if not (index / "chunks.lance").is_dir():
        code = (
            "import sys\n"
            "from codechunkd.config import load_settings\n"
            "from codechunkd.embedding.embedder import make_embedder\n"
            "from codechunkd.git.changes import GitSource\n"
            "from codechunkd.pipeline.sync import Syncer\n"
            "from codechunkd.storage.cache import EmbeddingCache\n"
            "from codechunkd.storage.layout import IndexPaths\n"
            "from codechunkd.storage.store import IndexStore\n"
            "s = load_settings(overrides={'index.dir': sys.argv[2]})\n"
            "p = IndexPaths.of(s)\n"
            "c = EmbeddingCache(p.cache, max_entries=s.embedding.cache_size)\n"
            "st = IndexStore(p.uri, state_file=p.state_file)\n"
            "Syncer(s, st, make_embedder(s.embedding), c).sync(GitSource(sys.argv[1]))\n"
            "c.close()\n"
        )
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", code, str(repo), str(index)], check=True, env=env)
        print(f"indexed {repo} in {time.monotonic() - t0:.0f} s")
    return repo, index


def queries(repo: Path, count: int) -> list[str]:
    """First sentences of the repository's docstrings (as bench/query.py)."""
    out: list[str] = []
    for path in sorted(repo.glob("*.py")):
        for part in path.read_text(errors="replace").split('"""')[1::2]:
            first = part.strip().split("\n\n")[0].split(". ")[0].strip().replace("\n", " ")
            if 20 <= len(first) <= 120 and first not in out:
                out.append(first)
            if len(out) >= count:
                return out
    return out


async def timed(index: Path, texts: list[str], env: dict[str, str]) -> tuple[list[float], str]:
    """Seconds per search tool call through one server, and where the answers came from."""
    params = StdioServerParameters(command=EXE, args=["mcp", "--index-dir", str(index)], env=env)
    times: list[float] = []
    via = "?"
    with (OUT / "mcp-server.log").open("a") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.call_tool("search", {"query": texts[0], "k": 10})  # model load
            for text in texts:
                t0 = time.perf_counter()
                res = await session.call_tool("search", {"query": text, "k": 10})
                times.append(time.perf_counter() - t0)
                assert not res.is_error, res.content
                data: dict[str, Any] = res.structured_content or {}
                via = str(data.get("via"))
    return times, via


def report(label: str, times: list[float], via: str) -> None:
    ms = [t * 1000 for t in times]
    print(
        f"{label:<22} via {via:<7} median {statistics.median(ms):7.1f} ms"
        f"   p95 {percentile(ms, 95):7.1f} ms   ({len(ms)} searches)",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--window", type=int, default=32)
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()

    OUT.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        LANCEDB_LOG="error",
        CODECHUNKD_EMBEDDING_MAX_SEQ_LENGTH=str(args.window),
        **GIT_ENV,
    )
    repo, index = build(args.files, args.window, env)
    texts = queries(repo, args.queries)
    print(f"index {index}, {len(texts)} queries, k=10, hybrid, on {os.cpu_count()} cores")

    times, via = anyio.run(timed, index, texts, env)
    report("no daemon", times, via)

    daemon = subprocess.Popen(
        [EXE, "run", str(repo), "--index-dir", str(index)],
        stdout=subprocess.DEVNULL,
        stderr=(OUT / "mcp-daemon.log").open("w"),
        env=env,
    )
    try:
        settings = load_settings(env=env, overrides={"index.dir": str(index)})
        socket = IndexPaths.of(settings).socket
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                doc = request(socket, {"cmd": "status"})
            except DaemonUnavailable:
                doc = None
            if isinstance(doc, dict) and doc.get("daemon", {}).get("state") == "ready":
                break
            time.sleep(0.2)
        else:
            raise SystemExit("the daemon did not become ready in 300 s")
        times, via = anyio.run(timed, index, texts, env)
        report("daemon running", times, via)
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)


if __name__ == "__main__":
    main()
