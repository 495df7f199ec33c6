"""Cold indexing end to end against the embedder's raw speed, and memory against size.

1. Ratio: the same real files (the Python standard library's source) are chunked
   and their distinct embed texts embedded directly with the default backend
   (raw texts/s: the limit), then indexed cold by ``codechunkd index`` in a
   child process (embedded chunks/s end to end).  The ratio says how much of
   the embedder's speed the pipeline keeps.
2. Memory: peak RSS of ``codechunkd index`` (cold, a fresh child process per
   size) on repositories of growing size; bounded means it does not grow with
   the number of files.  Two kinds of run (``--rss-backend``):

   - ``standin``: pipeline memory.  The embeddings come from a local stand-in
     for an OpenAI-compatible ``/v1/embeddings`` server, started by this bench
     on 127.0.0.1, answering with cheap deterministic vectors (384 dimensions
     from a hash of each text, L2-normalised); the product's ``remote`` backend
     talks to it.  What is measured is everything but the model: reading blobs,
     chunking, tokenising, the embedding cache, LanceDB writes, the manifest.
     Fast enough for 5,000 to 15,000 files.
   - ``default``: the default backend (onnx, the bundled model) with the window
     cut to ``--rss-window`` tokens; the model's fixed cost is included.  Slow:
     ~20-50 texts/s on a 2-core VM.

   Each row gives the peak RSS of the whole command.  The sync trains the
   IVF-PQ vector index when the table reaches ``index.vector_index_rows`` rows
   and folds new rows into the indexes every ``index.fold_rows`` rows
   (docs/operations.md): both are in the figures from that size on, which is
   why the sizes worth comparing are those past it (5,000 files and more).

   The repositories are real code nobody on this project wrote: ``.py`` files
   of the standard library and of the virtualenv's site-packages (about 11,600
   of 2-200 KB), in a fixed shuffled order so every size draws from the same
   mix, committed with their directory structure into a fresh git repository.
   Past the pool's end, the pool again under another folder (``repo_files``).

    .venv/bin/python bench/cold.py --files 40 --rss-files 50,200 --rss-window 32
    .venv/bin/python bench/cold.py --files 0 --rss-backend standin --rss-files 500,5000,10000,20000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from codechunkd.chunking.chunker import chunk
from codechunkd.chunking.tokens import counter_for
from codechunkd.config import load_settings
from codechunkd.embedding.embedder import make_embedder

OUT = Path(__file__).parent / "out"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def stdlib_files(n: int) -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if 2_000 < p.stat().st_size < 60_000)
    return files[:n]


STANDIN_MODEL = "standin-hash-384"
STANDIN_DIM = 384
VECTOR_INDEX_ROWS = load_settings(env={}).index.vector_index_rows


class _StandIn(BaseHTTPRequestHandler):
    """``POST /v1/embeddings``: a deterministic unit vector per text, from its hash."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(texts):
            raw = hashlib.shake_256(text.encode()).digest(STANDIN_DIM)
            vec = np.frombuffer(raw, dtype=np.uint8).astype(np.float32) - 127.5
            vec /= np.linalg.norm(vec)
            data.append({"object": "embedding", "index": i, "embedding": vec.round(5).tolist()})
        out = json.dumps({"object": "list", "model": body["model"], "data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def standin_server() -> Iterator[dict[str, str]]:
    """A local stand-in embeddings server; yields the env that points the product at it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="standin", daemon=True)
    thread.start()
    try:
        yield {
            "CODECHUNKD_EMBEDDING_BACKEND": "remote",
            "CODECHUNKD_EMBEDDING_REMOTE_URL": f"http://127.0.0.1:{server.server_port}/v1",
            "CODECHUNKD_EMBEDDING_REMOTE_MODEL": STANDIN_MODEL,
            "CODECHUNKD_EMBEDDING_REMOTE_DIMENSION": str(STANDIN_DIM),
            "NO_PROXY": "127.0.0.1",
            "no_proxy": "127.0.0.1",
        }
    finally:
        server.shutdown()
        server.server_close()


def code_pool() -> list[tuple[Path, str]]:
    """(file, path in the repo) of every stdlib and site-packages ``.py`` file of 2-200 KB.

    Shuffled with a fixed seed: the first n of the pool are a sample of the
    same mix for every n, so sizes compare like with like.
    """
    paths = sysconfig.get_paths()
    pool: list[tuple[Path, str]] = []
    for root, prefix in ((Path(paths["stdlib"]), "stdlib"), (Path(paths["purelib"]), "site")):
        for f in sorted(root.rglob("*.py")):
            rel = f.relative_to(root)
            if "site-packages" in rel.parts or "__pycache__" in rel.parts:
                continue
            if f.is_file() and 2_000 < f.stat().st_size < 200_000:
                pool.append((f, f"{prefix}/{rel}"))
    random.Random(7).shuffle(pool)
    return pool


def cold_index(
    repo: Path, index: Path, env: dict[str, str]
) -> tuple[dict[str, object], float, float]:
    """(report, wall seconds, peak RSS MiB) of `codechunkd index` in a child process."""
    shutil.rmtree(index, ignore_errors=True)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "codechunkd", "index", str(repo), "--index-dir", str(index)]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [*cmd, "--json"],
            env=dict(os.environ, **env),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        assert proc.returncode == 0, err.read()
    wall = time.perf_counter() - t0
    return json.loads(out), wall, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=40, help="files of the ratio part (0: skip it)")
    ap.add_argument("--rss-files", default="50,200", help="repository sizes of the memory part")
    ap.add_argument("--rss-window", type=int, default=32, help="model window of default runs")
    ap.add_argument(
        "--rss-backend",
        choices=("default", "standin", "both"),
        default="both",
        help="memory part: the default backend, the local stand-in server, or both",
    )
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.files > 0:
        ratio(args.files)
    sizes = [int(x) for x in args.rss_files.split(",") if x]
    pool = code_pool()
    print(f"\ncode pool: {len(pool)} .py files (stdlib + site-packages, 2-200 KB, shuffled)")
    if len(pool) < max(sizes, default=0):
        print(f"  past {len(pool)} files, the pool again under again<k>/ (repo_files)")
    if args.rss_backend in ("standin", "both"):
        with standin_server() as env:
            memory(
                "pipeline memory, embeddings from a local stand-in server "
                f"(remote backend, {STANDIN_DIM}-d hash vectors)",
                pool,
                sizes,
                env,
                "standin",
            )
    if args.rss_backend in ("default", "both"):
        env = {"CODECHUNKD_EMBEDDING_MAX_SEQ_LENGTH": str(args.rss_window)}
        memory(
            f"default backend (onnx, bundled model), window {args.rss_window} tokens",
            pool,
            sizes,
            env,
            "default",
        )


def ratio(n_files: int, env: dict[str, str] | None = None, tag: str = "") -> float:
    """A backend's raw speed on the chunks of ``n_files`` stdlib files against a cold
    `codechunkd index` of them with the same settings (``env``: ``CODECHUNKD_*`` variables);
    returns the index's speed over the raw speed (its sync alone)."""
    env = env or {}
    settings = load_settings(env=env)
    files = stdlib_files(n_files)
    counter = counter_for(settings.embedding.model)
    texts: dict[str, None] = {}
    for f in files:
        for c in chunk(f.name, f.read_bytes(), settings.chunking, count_tokens=counter):
            texts[c.embed_text] = None
    embedder = make_embedder(settings.embedding)
    embedder.embed(["warm up"])
    ordered = sorted(texts, key=len)
    t0 = time.perf_counter()
    for i in range(0, len(ordered), settings.embedding.batch_size * 8):
        embedder.embed(ordered[i : i + settings.embedding.batch_size * 8])
    raw = len(ordered) / (time.perf_counter() - t0)
    backend = settings.embedding.backend
    if backend == "torch":
        backend += f" ({settings.embedding.device})"
    print(f"backend {backend}: raw {raw:.2f} texts/s on {len(ordered)} texts")

    repo = make_repo_tree([(f, f.name) for f in files], f"cold-{n_files}")
    report, wall, rss = cold_index(repo, OUT / f"cold-index-{n_files}{tag}", env)
    e2e_total = float(str(report["embedded"])) / wall
    e2e_sync = float(str(report["embedded"])) / float(str(report["seconds"]))
    print(
        f"codechunkd index (cold, {n_files} files): {report['embedded']} embedded in "
        f"{report['seconds']} s of sync ({wall:.1f} s with process start), peak RSS {rss:.0f} MiB"
    )
    print(f"end-to-end / raw: {e2e_sync / raw:.3f} (sync), {e2e_total / raw:.3f} (whole command)")
    return e2e_sync / raw


def memory(
    label: str, pool: list[tuple[Path, str]], sizes: list[int], env: dict[str, str], tag: str
) -> None:
    """Peak RSS of a cold `codechunkd index`, one fresh child per repository size."""
    print(f"\npeak RSS of a cold index by size: {label}")
    print(
        f"  {'files':>6}  {'chunks':>7}  {'embedded':>8}  {'wall s':>7}  {'peak RSS MiB':>12}"
        f"  {'vector index':>12}"
    )
    peaks: dict[int, float] = {}
    for n in sizes:
        repo = make_repo_tree(repo_files(pool, n), f"rss-{n}")
        index = OUT / f"rss-index-{tag}-{n}-{os.getpid()}"
        report, wall, rss = cold_index(repo, index, env)
        shutil.rmtree(index, ignore_errors=True)
        peaks[n] = rss
        vector = "yes" if int(report["chunks"]) >= VECTOR_INDEX_ROWS else "no"  # type: ignore[call-overload]
        print(
            f"  {n:>6}  {report['chunks']:>7}  {report['embedded']:>8}  {wall:7.1f}  {rss:12.0f}"
            f"  {vector:>12}",
            flush=True,
        )
    if len(peaks) > 1:
        lo, hi = min(peaks), max(peaks)
        print(f"  growth, {hi} files / {lo} files: peak RSS {peaks[hi] / peaks[lo]:.2f}")


def repo_files(pool: list[tuple[Path, str]], n: int) -> list[tuple[Path, str]]:
    """The first ``n`` files of the pool; past its end, the pool again under ``again<k>/``.

    Copies are the same code at other paths: their rows are written again (what the
    index's memory depends on), their embeddings come from the cache.
    """
    return [
        (f, rel if i < len(pool) else f"again{i // len(pool)}/{rel}")
        for i, (f, rel) in ((i, pool[i % len(pool)]) for i in range(n))
    ]


def make_repo_tree(files: list[tuple[Path, str]], name: str) -> Path:
    """A fresh git repository of these files (one commit), cached by name and file list."""
    repo = OUT / name
    listing = "\n".join(rel for _, rel in files)
    stamp = repo / ".git" / "bench-files"
    if stamp.is_file() and stamp.read_text() == listing:
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    env = dict(os.environ, **GIT_ENV)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=env)
    for f, rel in files:
        dst = repo / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dst)
    subprocess.run(["git", "add", "-Af", "."], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=repo, check=True, env=env)
    stamp.write_text(listing)
    return repo


if __name__ == "__main__":
    main()
