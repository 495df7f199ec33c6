"""Data files (large tables and JSON) are a counted skip, ``data``: their rows are not code,
their chunks cost embedding and come up among the code's hits; manifests and configs stay."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Indexer, Repo

from codechunkd.config import load_settings
from codechunkd.git.changes import GitSource
from codechunkd.git.files import DATA_MIN_BYTES
from codechunkd.pipeline.verify import verify


def _just_over(line: str, n: int = 0) -> str:
    """Lines of ``line.format(i)`` until just over ``DATA_MIN_BYTES``: data, few chunks."""
    out: list[str] = []
    size = 0
    while size <= DATA_MIN_BYTES:
        out.append(line.format(n + len(out)))
        size += len(out[-1])
    return "".join(out)


def _data_repo(repo: Repo) -> None:
    repo.write("tests/data/vectors.csv", "x,y\n" + _just_over("{0},{0}.5\n"))
    repo.write("tests/data/vectors.tsv", _just_over("{0}\t{0}.5\n"))
    record = '{{"code": "C{0:05d}", "name": "country {0}"}}'
    repo.write("share/iso.json", "[" + _just_over(record + ",\n") + "{}]\n")
    repo.write("share/events.jsonl", _just_over(record + "\n"))
    repo.write("package.json", '{"name": "app", "scripts": {"test": "pytest"}}\n')
    repo.write("config/small.csv", "key,value\nretries,3\n")  # small: a setting, indexed
    repo.write("src/app.py", "def load_vectors(path):\n    return open(path).read()\n")
    big_lock = "".join(f'"node_modules/p{i}": {{"version": "1.0.{i}"}},\n' for i in range(800))
    repo.write("package-lock.json", "{\n" + big_lock + "}\n")  # a lock file first
    repo.commit("data beside the code")


def test_data_files_are_a_counted_skip_and_kept_when_asked(
    repo: Repo, tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    """Tables and JSON of 32 KiB or more are skipped as ``data`` (a large lock file is still
    a ``lockfile``), small ones and the code are indexed, and ``verify`` agrees; with
    ``files.skip_data = false`` they are indexed, and switched back on, their rows go at the
    next sync (the index's fingerprint holds the rule)."""
    _data_repo(repo)
    skip = load_settings(env={}, overrides={"index.dir": str(tmp_path / "ix")})
    ix = Indexer(skip, embedder)
    report = ix.sync(repo.path)
    assert report.skipped == {"data": 4, "lockfile": 1}
    kept = {"package.json", "config/small.csv", "src/app.py"}
    assert {r["path"] for r in ix.rows()} == kept
    assert verify(skip, ix.store, GitSource(repo.path)).ok
    ix.close()

    keep = {"CODECHUNKD_FILES_SKIP_DATA": "false"}
    both = load_settings(env=keep, overrides={"index.dir": str(tmp_path / "ix")})
    ix = Indexer(both, embedder)
    assert ix.sync(repo.path).skipped == {"lockfile": 1}
    paths = {r["path"] for r in ix.rows()}
    assert paths == kept | {
        "tests/data/vectors.csv",
        "tests/data/vectors.tsv",
        "share/iso.json",
        "share/events.jsonl",
    }
    ix.close()

    ix = Indexer(skip, embedder)
    ix.sync(repo.path)
    assert {r["path"] for r in ix.rows()} == kept
    ix.close()
