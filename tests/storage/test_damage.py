"""Issue #15 row 2: every way of damaging an index ends in a one-line error, and
`codechunkd index --rebuild` recovers to a `verify`-clean index.

A tiny real repository is indexed once with the real CLI; each case damages its
own copy of that index directory the way a lost file or a bad disk would, and runs
the commands as a user would (subprocesses, real LanceDB, real SQLite).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.conftest import Repo

from codechunkd.errors import IndexDamaged, StoreError
from codechunkd.storage.cache import EmbeddingCache

pytestmark = pytest.mark.slow

EXE = str(Path(sys.executable).parent / "codechunkd")
DAMAGED = IndexDamaged.exit_code


def _latest_manifest(table: Path) -> Path:
    return min((table / "_versions").glob("*.manifest"), key=lambda p: int(p.stem))


def _lose_fragment(ix: Path) -> None:
    next((ix / "chunks.lance" / "data").glob("*.lance")).unlink()


def _lose_references_fragment(ix: Path) -> None:
    next((ix / "references.lance" / "data").glob("*.lance")).unlink()


def _overwrite_manifest(ix: Path) -> None:
    _latest_manifest(ix / "chunks.lance").write_bytes(b"garbage\n")


def _truncate_manifest(ix: Path) -> None:
    manifest = _latest_manifest(ix / "chunks.lance")
    manifest.write_bytes(manifest.read_bytes()[:60])


def _zero_manifest(ix: Path) -> None:
    manifest = _latest_manifest(ix / "chunks.lance")
    manifest.write_bytes(bytes(manifest.stat().st_size))


def _lose_versions(ix: Path) -> None:
    shutil.rmtree(ix / "chunks.lance" / "_versions")


def _corrupt_fts(ix: Path) -> None:
    files = [p for p in (ix / "chunks.lance" / "_indices").rglob("*") if p.is_file()]
    assert files, "the full-text index was built"
    for p in files:
        p.write_bytes(b"junk\n")


def _garbage_cache(ix: Path) -> None:
    (ix / "_codechunkd" / "cache.sqlite").write_bytes(os.urandom(8192))


def _garbage_state(ix: Path) -> None:
    (ix / "_codechunkd" / "state.json").write_text('{"sources": [{"x": 1}]}')


# case -> (damage, expected exit codes of search / verify / status / index before the rebuild;
# None: any code, as long as any error is one line)
CASES: dict[str, tuple[Callable[[Path], None], dict[str, int | None]]] = {
    "lost data fragment": (
        _lose_fragment,
        {"search": DAMAGED, "verify": DAMAGED, "status": DAMAGED, "index": DAMAGED},
    ),
    "lost references fragment": (  # once unseen, and `--rebuild` then emptied the index
        _lose_references_fragment,  # a local search refuses on any damaged table
        {"search": DAMAGED, "verify": DAMAGED, "status": DAMAGED, "index": DAMAGED},
    ),
    "overwritten manifest": (
        _overwrite_manifest,
        {"search": DAMAGED, "verify": DAMAGED, "status": DAMAGED, "index": DAMAGED},
    ),
    "truncated manifest": (  # issue #28: LanceDB's "file size is too small", exit 4 before
        _truncate_manifest,
        {"search": DAMAGED, "verify": DAMAGED, "status": None, "index": DAMAGED},
    ),
    "zeroed manifest": (  # read as a table without columns: "schema version 0", exit 4 before
        _zero_manifest,
        {"search": DAMAGED, "verify": DAMAGED, "status": None, "index": DAMAGED},
    ),
    "no _versions": (
        _lose_versions,
        {"search": DAMAGED, "verify": DAMAGED, "status": DAMAGED, "index": DAMAGED},
    ),
    "corrupt full-text index": (
        _corrupt_fts,
        {"search": DAMAGED, "verify": DAMAGED, "status": None, "index": None},
    ),
    "garbage cache.sqlite": (
        _garbage_cache,
        {"search": 0, "verify": DAMAGED, "status": DAMAGED, "index": DAMAGED},
    ),
    "garbage state.json": (
        _garbage_state,
        {"search": 0, "verify": DAMAGED, "status": DAMAGED, "index": DAMAGED},
    ),
}


def _run(*args: str, index: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LANCEDB_LOG="error")
    return subprocess.run(
        [EXE, *args, "--index-dir", str(index)], capture_output=True, text=True, env=env
    )


def _one_line_error(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    if done.args[1] == "status":  # status reports damage in its document, on stdout
        if done.returncode == DAMAGED:
            assert "DAMAGED: " in done.stdout and "index --rebuild" in done.stdout
        return
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("codechunkd: error: "), done.stderr
        if done.returncode == DAMAGED:
            assert "codechunkd index --rebuild" in lines[0]


@pytest.mark.parametrize("case", list(CASES))
def test_damage_gives_one_line_errors_and_rebuild_recovers(
    case: str, indexed: tuple[Repo, Path], tmp_path: Path
) -> None:
    """The commands report the damage in one line (exit 8 where they see it, never a
    traceback), `index --rebuild` recovers whatever was damaged (with a dangling lock file
    left behind), reuses a healthy embedding cache, and `verify` is clean afterwards."""
    damage, expected = CASES[case]
    repo, healthy = indexed
    ix = tmp_path / "index"
    shutil.copytree(healthy, ix, symlinks=True)
    damage(ix)

    codes = {
        "search": _run("search", "haversine", "--mode", "text", index=ix),
        "verify": _run("verify", str(repo.path), index=ix),
        "status": _run("status", index=ix),
        "index": _run("index", str(repo.path), index=ix),
    }
    for name, done in codes.items():
        _one_line_error(done)
        want = expected[name]
        if want is not None:
            assert done.returncode == want, (name, done.returncode, done.stdout, done.stderr)

    (ix / "_codechunkd" / "writer.lock").write_text("999999 codechunkd index\n")  # dead holder
    rebuilt = _run("index", str(repo.path), "--rebuild", index=ix)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "Traceback" not in rebuilt.stderr
    assert "codechunkd: repaired: " in rebuilt.stderr or case == "no _versions", rebuilt.stderr
    if case != "garbage cache.sqlite":  # a healthy cache is kept: nothing is embedded again
        assert ", 0 embedded," in rebuilt.stdout, rebuilt.stdout
    else:
        assert list((ix / "_codechunkd").glob("cache.sqlite.corrupt-*"))

    verified = _run("verify", str(repo.path), index=ix)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("ok: ")
    status = _run("status", index=ix)
    assert status.returncode == 13 and "DAMAGED" not in status.stdout, status.stdout
    found = _run("search", "haversine", "--mode", "text", "--json", index=ix)
    assert found.returncode == 0 and "haversine" in found.stdout, found.stderr


def test_a_full_cache_is_a_store_error_and_the_next_write_works(tmp_path: Path) -> None:
    """SQLite's "database or disk is full" in the embedding cache is a one-line StoreError
    (exit 4, not a raw sqlite3 error), the failed write is rolled back, and once there is
    room the same connection writes again (no transaction left open)."""
    import numpy as np

    cache = EmbeddingCache(tmp_path / "cache.sqlite", max_entries=1000)
    try:
        vectors = {f"k{i}": np.ones(384, dtype=np.float32) for i in range(200)}
        (pages,) = cache._db.execute("PRAGMA page_count").fetchone()
        cache._db.execute(f"PRAGMA max_page_count = {pages + 2}")  # a real SQLITE_FULL
        with pytest.raises(StoreError) as raised:
            cache.put_many("m", vectors)
        assert type(raised.value) is StoreError and raised.value.exit_code == 4
        assert "full" in str(raised.value) and "\n" not in str(raised.value)
        assert cache.stats().entries == 0  # nothing half-written
        cache._db.execute("PRAGMA max_page_count = 1073741823")
        cache.put_many("m", vectors)
        assert cache.stats().entries == 200
    finally:
        cache.close()


def test_an_index_dir_that_is_a_file_or_cannot_be_made_is_said_so(
    repo: Repo, tmp_path: Path
) -> None:
    """`--index-dir` naming a regular file: every command says it is a file, not an index
    directory (exit 4, one line), `index --rebuild` too (it failed with "unexpected: [Errno
    20]"), and the file is left alone; a path where no directory can be made (under a file,
    under /proc) says that, not "unexpected: [Errno 2]"."""
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit()
    afile = tmp_path / "notes.txt"
    afile.write_text("mine\n")
    for args in (
        ("index", str(repo.path)),
        ("index", str(repo.path), "--rebuild"),
        ("search", "alpha"),
        ("verify", str(repo.path)),
    ):
        done = _run(*args, index=afile)
        _one_line_error(done)
        assert done.returncode == StoreError.exit_code, (args, done.stderr)
        assert f"{afile} is a file, not an index directory" in done.stderr, (args, done.stderr)
    assert afile.read_text() == "mine\n"

    for where, says in (
        (afile / "sub", f"cannot make the index directory {afile / 'sub'}: {afile} is a file"),
        (Path("/proc/codechunkd-none/idx"), "cannot make the index directory /proc/"),
    ):
        done = _run("index", str(repo.path), index=where)
        _one_line_error(done)
        assert done.returncode == StoreError.exit_code, done.stderr
        assert says in done.stderr and "unexpected" not in done.stderr, done.stderr
