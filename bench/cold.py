"""Cold indexing end to end against the embedder's raw speed, and memory against size.

1. Ratio: the same real files (the Python standard library's source) are chunked
   and their distinct embed texts embedded directly with the default backend
   (raw texts/s: the limit), then indexed cold by ``codechunkd index`` in a
   child process (embedded chunks/s end to end).  The ratio says how much of
   the embedder's speed the pipeline keeps.
2. Memory: peak RSS of ``codechunkd index`` (cold) on repositories of growing
   size; bounded means it does not grow with the number of files.

    .venv/bin/python bench/cold.py --files 40 --rss-files 50,200 --rss-window 32
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from codechunkd.config import load_settings
from codechunkd.indexer.chunker import chunk
from codechunkd.indexer.embedder import make_embedder
from codechunkd.indexer.tokens import counter_for

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


def make_repo(files: list[Path], name: str) -> Path:
    repo = OUT / name
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    env = dict(os.environ, **GIT_ENV)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=env)
    for f in files:
        shutil.copyfile(f, repo / f.name)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=repo, check=True, env=env)
    return repo


def cold_index(
    repo: Path, index: Path, env: dict[str, str]
) -> tuple[dict[str, object], float, float]:
    """(report, wall seconds, peak RSS MiB) of `codechunkd index` in a child process."""
    shutil.rmtree(index, ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "codechunkd",
            "index",
            str(repo),
            "--index-dir",
            str(index),
            "--json",
        ],
        env=dict(os.environ, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, out
    wall = time.perf_counter() - t0
    return json.loads(out), wall, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--rss-files", default="50,200")
    ap.add_argument("--rss-window", type=int, default=32)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)

    settings = load_settings(env={})
    files = stdlib_files(args.files)
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
    print(f"backend {settings.embedding.backend}: raw {raw:.2f} texts/s on {len(ordered)} texts")

    repo = make_repo(files, f"cold-{args.files}")
    report, wall, rss = cold_index(repo, OUT / f"cold-index-{args.files}", {})
    e2e_total = int(report["embedded"]) / wall  # type: ignore[call-overload]
    e2e_sync = int(report["embedded"]) / float(report["seconds"])  # type: ignore[arg-type]
    print(
        f"codechunkd index (cold, {args.files} files): {report['embedded']} embedded in "
        f"{report['seconds']} s of sync ({wall:.1f} s with process start), peak RSS {rss:.0f} MiB"
    )
    print(f"end-to-end / raw: {e2e_sync / raw:.3f} (sync), {e2e_total / raw:.3f} (whole command)")

    print(f"\npeak RSS of a cold index by size (window {args.rss_window}):")
    env = {"CODECHUNKD_EMBEDDING_MAX_SEQ_LENGTH": str(args.rss_window)}
    root = Path(sysconfig.get_paths()["stdlib"])
    every = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    for n in (int(x) for x in args.rss_files.split(",")):
        repo = make_repo_tree(every[:n], f"rss-{n}", root)
        report, wall, rss = cold_index(repo, OUT / f"rss-index-{n}", env)
        print(
            f"  {n:>6} files  {report['chunks']:>7} chunks  {wall:7.1f} s  peak RSS {rss:6.0f} MiB"
        )


def make_repo_tree(files: list[Path], name: str, root: Path) -> Path:
    repo = OUT / name
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    env = dict(os.environ, **GIT_ENV)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=env)
    for f in files:
        dst = repo / f.relative_to(root)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dst)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=repo, check=True, env=env)
    return repo


if __name__ == "__main__":
    main()
