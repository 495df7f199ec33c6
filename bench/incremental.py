"""Incremental indexing on a real ~5,000-file repository.

The repository is made from code nobody on this project wrote: the Python
standard library's source, topped up with the sources of packages installed in
the virtualenv, committed into a fresh git repository (built once, cached under
bench/out/).

Prints: cold index time; no-op re-index (in-process, and the `codechunkd index`
CLI end to end); a one-file edit; `git checkout` of branches differing in 1, 100
and 1,000 files, and back (embeddings computed on the way back must be 0);
peak RSS.

A cold index embeds every chunk, which at the default 256-token window runs at
~10 chunks/s on a 2-core VM (hours for 5,000 files).  ``--window`` sets the
model's window for this run (e.g. 32, ~9x faster): the incremental figures do
not depend on it, the cold figure does, and the table says which was used.

    .venv/bin/python bench/incremental.py --files 5000 --window 32
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from codechunkd.config import load_settings
from codechunkd.embedding.embedder import make_embedder
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.sync import Syncer
from codechunkd.storage.cache import EmbeddingCache
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.store import IndexStore

OUT = Path(__file__).parent / "out"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}
TEXT_SUFFIXES = {".py", ".md", ".rst", ".txt", ".toml", ".cfg", ".json", ".c", ".h", ".js"}


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, **GIT_ENV)
    out = subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    return out.stdout.decode().strip()


def source_files(limit: int) -> list[tuple[Path, str]]:
    """(file, path in the bench repo): the stdlib first, then site-packages."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    site = Path(sysconfig.get_paths()["purelib"])
    picked: list[tuple[Path, str]] = []
    for root, prefix in ((stdlib, "cpython/Lib"), (site, "site-packages")):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(
                d
                for d in dirnames
                if d not in {"__pycache__", "site-packages"} and not d.startswith(".")
            )
            for name in sorted(filenames):
                f = Path(dirpath) / name
                if f.suffix not in TEXT_SUFFIXES or f.stat().st_size > 500_000:
                    continue
                picked.append((f, f"{prefix}/{f.relative_to(root)}"))
                if len(picked) >= limit:
                    return picked
    return picked


def build_repo(n: int) -> Path:
    repo = OUT / f"repo-{n}"
    if (repo / ".git").is_dir():
        git(repo, "checkout", "-q", "-f", "main")
        git(repo, "clean", "-qfd")
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for src, rel in source_files(n):
        dst = repo / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "import")
    return repo


def python_files(repo: Path) -> list[str]:
    return [p for p in git(repo, "ls-files", "*.py").splitlines() if "/test" not in p]


def make_branch(repo: Path, name: str, count: int) -> None:
    """A branch where `count` files gain one new function each."""
    git(repo, "checkout", "-q", "-B", name, "main")
    for i, rel in enumerate(python_files(repo)[:count]):
        with (repo / rel).open("a") as f:
            f.write(f"\n\ndef _bench_{name}_{i}(value):\n    return value + {i}\n")
    git(repo, "commit", "-q", "-am", f"{name}: {count} files")
    git(repo, "checkout", "-q", "main")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--window", type=int, default=256, help="model window (tokens) for this run")
    ap.add_argument("--fresh", action="store_true", help="drop the cached index first")
    args = ap.parse_args()

    OUT.mkdir(exist_ok=True)
    repo = build_repo(args.files)
    index = OUT / f"index-{args.files}-w{args.window}"
    if args.fresh:
        shutil.rmtree(index, ignore_errors=True)
    env = {"CODECHUNKD_EMBEDDING_MAX_SEQ_LENGTH": str(args.window)}
    settings = load_settings(env=env, overrides={"index.dir": str(index)})
    paths = IndexPaths.of(settings)
    store = IndexStore(paths.uri, state_file=paths.state_file)
    embedder = make_embedder(settings.embedding)
    cache = EmbeddingCache(paths.cache, max_entries=settings.embedding.cache_size)
    syncer = Syncer(settings, store, embedder, cache)
    rows: list[tuple[str, float, int, str]] = []

    def run(label: str) -> None:
        t0 = time.perf_counter()
        r = syncer.sync(GitSource(repo))
        dt = time.perf_counter() - t0
        what = f"+{r.added} ~{r.changed} -{r.deleted} ={r.unchanged} files, {r.reused} reused"
        rows.append((label, dt, r.embedded, what))
        print(f"{label:<38} {dt:8.2f} s  embedded {r.embedded:>6}  {what}", flush=True)

    n_files = len(git(repo, "ls-files").splitlines())
    print(f"repository: {repo} ({n_files} files); index: {index}; window {args.window} tokens")
    run("cold index (or resume)")
    run("no-op re-index (in-process)")

    env_cli = dict(os.environ, **env)
    cli = [
        sys.executable,
        "-m",
        "codechunkd",
        "index",
        str(repo),
        "--index-dir",
        str(index),
        "--json",
    ]
    t0 = time.perf_counter()
    out = subprocess.run(cli, env=env_cli, check=True, capture_output=True, text=True).stdout
    dt = time.perf_counter() - t0
    doc = json.loads(out)
    rows.append(
        ("no-op `codechunkd index` CLI (wall)", dt, int(doc["embedded"]), "process start included")
    )
    print(f"{'no-op `codechunkd index` CLI (wall)':<38} {dt:8.2f} s  embedded {doc['embedded']:>6}")

    target = max(python_files(repo), key=lambda p: (repo / p).stat().st_size)
    original = (repo / target).read_text()
    (repo / target).write_text(original.replace("return ", "return  ", 1))
    run(f"one-file edit ({target.rsplit('/', 1)[-1]})")
    (repo / target).write_text(original)
    run("edit reverted")

    for count in (1, 100, 1000):
        name = f"b{count}"
        make_branch(repo, name, count)
        git(repo, "checkout", "-q", name)
        run(f"checkout {name} ({count} files differ)")
        git(repo, "checkout", "-q", "main")
        run(f"checkout main back from {name}")
    cache.close()

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS: {peak:.0f} MiB")
    backs = [r for r in rows if r[0].startswith("checkout main back")]
    print("embeddings on the way back:", [r[2] for r in backs], "(must all be 0)")
    noop = next(r for r in rows if r[0].startswith("no-op re-index"))
    cold = rows[0]
    if cold[1] > 0:
        print(f"no-op / cold time ratio: {noop[1] / cold[1]:.5f}")


if __name__ == "__main__":
    main()
