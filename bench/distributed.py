"""``codechunkd index --engine ray`` against the local engine, and the scaling arithmetic.

The same repository (the smallest ``.py`` files of the standard library, committed into
a fresh git repository) is indexed cold twice, each by ``codechunkd index`` in a child
process with its own index and embedding cache: once with ``--engine local``, once with
``--engine ray`` (a local Ray cluster started by the command itself, all of this
machine's cores). Wall time includes everything the user waits for: interpreter start,
the model load, for Ray the cluster start and one model load per worker.

From the measured rates it prints the model for larger repositories: chunks per file
(measured here), embedded chunks/s per core (the Ray run's pace over its workers,
one per core: the model is the bottleneck), and the hours a cold build of 10k / 100k / 1M files takes on
N cores, plus the fixed overhead Ray adds (measured here).

    .venv/bin/python bench/distributed.py --files 60
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def make_repo(root: Path, files: int) -> int:
    """A git repository of the ``files`` smallest stdlib modules over 1 KB; how many."""
    lib = Path(sysconfig.get_path("stdlib"))
    pool = sorted(
        (p for p in lib.rglob("*.py") if "test" not in p.parts and p.stat().st_size > 1024),
        key=lambda p: (p.stat().st_size, str(p)),
    )[:files]
    for p in pool:
        dest = root / p.relative_to(lib)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(p.read_bytes())
    env = {**os.environ, **GIT_ENV}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "stdlib"]):
        subprocess.run(["git", *cmd], cwd=root, check=True, env=env)
    return len(pool)


def index(repo: Path, index_dir: Path, engine: str) -> tuple[float, dict[str, object]]:
    """Wall seconds and the JSON report of one cold ``codechunkd index``."""
    cmd = [sys.executable, "-m", "codechunkd", "index", str(repo), "--engine", engine]
    cmd += ["--index-dir", str(index_dir), "--json"]
    t0 = time.monotonic()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.monotonic() - t0
    return wall, json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=60, help="stdlib files in the repository")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="bench-distributed-") as tmp:
        root = Path(tmp)
        n = make_repo(root / "repo", args.files)
        runs = {e: index(root / "repo", root / f"index-{e}", e) for e in ("local", "ray")}
    print(f"{n} files, {cores} cores")
    print(f"{'engine':8} {'wall s':>8} {'sync s':>8} {'chunks':>7} {'embedded':>9} {'chunks/s':>9}")
    for engine, (wall, rep) in runs.items():
        print(
            f"{engine:8} {wall:8.1f} {rep['seconds']:8.1f} {rep['chunks']:7} "
            f"{rep['embedded']:9} {rep['chunks_per_second']:9}"
        )
    local_wall, local = runs["local"]
    ray_wall, ray = runs["ray"]
    chunks = int(local["chunks"])  # type: ignore[call-overload]
    per_file = chunks / n
    # the Ray run has one worker per core: its pace over the cores is a worker's pace
    per_core = int(ray["embedded"]) / float(ray["seconds"]) / cores  # type: ignore[call-overload,arg-type]
    overhead = ray_wall - local_wall
    print(f"\nray - local wall time: {overhead:+.1f} s on {cores} cores")
    print(f"chunks per file: {per_file:.1f}; embedded chunks/s per core (ray run): {per_core:.1f}")
    print("\ncold build, hours (chunks / (rate per core x cores)), fixed overhead not included:")
    sizes = (10_000, 100_000, 1_000_000)
    print(f"{'cores':>6} " + " ".join(f"{s:>12,}" for s in sizes))
    for c in (1, 16, 64, 256, 1024):
        hours = [s * per_file / (per_core * c) / 3600 for s in sizes]
        print(f"{c:>6} " + " ".join(f"{h:12.2f}" for h in hours))


if __name__ == "__main__":
    main()
