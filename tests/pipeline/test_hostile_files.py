"""Hostile working trees: nothing outside the repository is indexed, nothing blocks, a bad
file is a counted skip, and ``verify`` agrees with what ``sync`` wrote (issue #15 rows 4-6, 8).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from tests.conftest import Indexer, Repo, scaled, unprivileged

from codechunkd.config import Settings, load_settings
from codechunkd.embedding.embedder import Embedder
from codechunkd.git.changes import UNREADABLE, GitSource
from codechunkd.pipeline.sync import SyncProgress
from codechunkd.pipeline.verify import verify

EXE = str(Path(sys.executable).parent / "codechunkd")


def _contents(ix: Indexer) -> list[str]:
    tbl = ix.store.chunks_table()
    return [
        r["content"] for r in tbl.search().select(["content"]).limit(None).to_arrow().to_pylist()
    ]


def test_directory_replaced_by_a_symlink_to_outside_is_not_indexed(
    repo: Repo, indexer: Indexer, settings: Settings, tmp_path: Path
) -> None:
    """`conf/` committed, then replaced by a symlink to a folder outside: the outside file's
    content never reaches the index, the old rows go, and verify agrees."""
    outside = tmp_path / "etc"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0:OUTSIDE_SECRET:/root:/bin/bash\n")
    repo.write("conf/passwd", "user = 'inside'\n")
    repo.write("app.py", "def main():\n    return 1\n")
    repo.commit()
    indexer.sync(repo.path)
    shutil.rmtree(repo.path / "conf")
    os.symlink(outside, repo.path / "conf")

    report = indexer.sync(repo.path)
    assert not any("OUTSIDE_SECRET" in c for c in _contents(indexer))
    manifest = indexer.store.manifest(GitSource(repo.path).source.id)
    assert "conf/passwd" not in manifest
    assert manifest["conf"].skip_reason == "symlink"
    assert report.deleted == 1
    assert verify(settings, indexer.store, GitSource(repo.path)).ok


def test_oversized_untracked_file_is_skipped(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """A sparse 256 MB untracked file is a `too_large` skip recorded at its blob; verify agrees."""
    repo.write("app.py", "def main():\n    return 1\n")
    repo.commit()
    with open(repo.path / "huge.dat", "wb") as f:
        f.truncate(256 << 20)
    report = indexer.sync(repo.path)
    assert report.skipped["too_large"] == 1
    rec = indexer.store.manifest(GitSource(repo.path).source.id)["huge.dat"]
    assert rec.skip_reason == "too_large" and rec.blob != UNREADABLE
    assert verify(settings, indexer.store, GitSource(repo.path)).ok


def test_fifo_appearing_during_a_multi_batch_sync_does_not_hang(
    repo: Repo,
    index_dir: Path,
    embedder: Embedder,
) -> None:
    """A file replaced by a FIFO after the change set was made (while the first batch is
    written) is a counted skip; the sync finishes instead of blocking in open()."""
    settings = load_settings(
        env={}, overrides={"index.dir": str(index_dir), "index.batch_files": 1}
    )
    repo.write("keep.py", "k = 0\n")
    repo.commit()
    for i in range(6):  # untracked: read from the working tree
        repo.write(f"m{i}.py", f"def f{i}():\n    return {i}\n")
    fifo = repo.path / "m5.py"
    ix = Indexer(settings, embedder)
    replaced = threading.Event()

    def progress(p: SyncProgress) -> None:
        if p.chunks and not replaced.is_set():  # a batch is written; m5.py is batches away
            fifo.unlink()
            os.mkfifo(fifo)
            replaced.set()

    result: list[object] = []

    def run() -> None:
        try:
            result.append(ix.sync(repo.path, progress=progress))
        except BaseException as exc:
            result.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=scaled(120))
    if worker.is_alive():  # unblock the reader stuck in open() before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=scaled(30))
        ix.close()
        pytest.fail("the sync blocked on a FIFO")
    ix.close()
    (report,) = result
    assert not isinstance(report, BaseException), repr(report)
    assert replaced.is_set()
    assert report.skipped["unreadable"] == 1  # type: ignore[attr-defined]
    assert report.chunks >= 6  # type: ignore[attr-defined]


def _cli(*args: str, privileged: bool = True) -> subprocess.CompletedProcess[str]:
    argv = [EXE, *args]
    done = subprocess.run(
        argv if privileged else unprivileged(argv), capture_output=True, text=True, timeout=300
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.mark.slow
def test_unreadable_files_are_counted_skips_and_retried(repo: Repo, index_dir: Path) -> None:
    """A mode-000 tracked file (libgit2's status fails on it) and a mode-000 untracked file:
    `index` exits 0 with two `unreadable` skips and indexes the rest; `verify` is clean; once
    readable again (same content) the files are indexed on the next run."""
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.write("b.py", "def bravo():\n    return 2\n")
    repo.commit()
    repo.write("c.py", "def charlie():\n    return 3\n")
    for name in ("b.py", "c.py"):
        (repo.path / name).chmod(0)
    where = [str(repo.path), "--index-dir", str(index_dir), "--json"]

    done = _cli("index", *where, privileged=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["skipped"] == {"unreadable": 2}
    assert report["chunks"] >= 1
    checked = _cli("verify", *where, privileged=False)
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"], checked.stdout

    for name in ("b.py", "c.py"):
        (repo.path / name).chmod(0o644)
    done = _cli("index", *where)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["skipped"] == {}
    hits = _cli("search", "bravo", "--mode", "text", "--index-dir", str(index_dir), "--json")
    assert any(h["path"] == "b.py" for h in json.loads(hits.stdout)), hits.stdout
    checked = _cli("verify", *where)
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"], checked.stdout


# -- issue #28 item 1: a file name that is not UTF-8 -------------------------------------

BAD = os.fsdecode(b"bad_\xff.py")  # what the OS and pygit2 hand over: 'bad_\udcff.py'
BAD_UNTRACKED = os.fsdecode(b"new_\xfe.py")


def _with_bad_names(repo: Repo) -> None:
    """A committed file and an untracked one whose names are not UTF-8, beside good files."""
    repo.write("good.py", "def good():\n    return 1\n")
    (repo.path / BAD).write_text("def bad():\n    return 2\n")
    repo.commit()
    (repo.path / BAD_UNTRACKED).write_text("def new():\n    return 3\n")


def test_a_file_name_that_is_not_utf8_is_a_counted_skip(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """A committed `bad_\\xff.py` and an untracked `new_\\xfe.py` are skipped as
    `name_not_utf8` (a full sync, then an incremental one after a commit, and a per-path
    event sync as the daemon runs them); every other file is indexed and verify is clean."""
    _with_bad_names(repo)
    report = indexer.sync(repo.path)
    assert report.skipped == {"name_not_utf8": 2}
    manifest = indexer.store.manifest(GitSource(repo.path).source.id)
    assert set(manifest) == {"good.py"}
    assert indexer.store.state(GitSource(repo.path).source.id).pending is None

    repo.write("more.py", "def more():\n    return 4\n")
    repo.commit()  # adds the untracked one too: both bad names are committed now
    report = indexer.sync(repo.path)
    assert report.skipped == {"name_not_utf8": 2}
    assert report.added == 1
    assert set(indexer.store.manifest(GitSource(repo.path).source.id)) == {"good.py", "more.py"}

    (repo.path / BAD).write_text("def bad():\n    return 5\n")
    report = indexer.sync(repo.path, paths=[BAD, "good.py"])  # a file event, as the daemon
    assert report.skipped == {"name_not_utf8": 1}
    assert verify(settings, indexer.store, GitSource(repo.path)).ok


def test_a_file_name_that_is_not_utf8_in_a_ref_source(repo: Repo, indexer: Indexer) -> None:
    """A bare mirror's ref (no working tree) with such a name: the same skip."""
    _with_bad_names(repo)
    bare = repo.path.parent / "mirror.git"
    repo.git("clone", "-q", "--bare", str(repo.path), str(bare))
    report = indexer.syncer.sync(GitSource(bare, ref="main"))
    assert report.skipped == {"name_not_utf8": 1}
    assert report.chunks >= 1


def test_an_index_stuck_on_a_name_that_is_not_utf8_recovers(repo: Repo, index_dir: Path) -> None:
    """`codechunkd index` exits 0 with the skip in its report (the CLI path, and the
    no-op path of a second run); an index left interrupted (state pending, as every run
    of an older codechunkd left it) is whole after the next run."""
    _with_bad_names(repo)
    where = [str(repo.path), "--index-dir", str(index_dir), "--json"]
    done = _cli("index", *where)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["skipped"] == {"name_not_utf8": 2}
    again = _cli("index", *where)  # nothing changed: the fast path says it again
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["skipped"] == {"name_not_utf8": 2}

    from dataclasses import replace

    from codechunkd.storage.store import IndexStore

    store = IndexStore(str(index_dir), state_file=index_dir / "_codechunkd" / "state.json")
    source = GitSource(repo.path).source.id
    state = store.state(source)
    assert state is not None
    store.put_state(replace(state, pending=state.commit))  # interrupted
    done = _cli("index", *where)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["full"] is True
    assert store.state(source).pending is None  # type: ignore[union-attr]
    hits = _cli("search", "good", "--mode", "text", "--index-dir", str(index_dir), "--json")
    assert hits.returncode == 0 and any(h["path"] == "good.py" for h in json.loads(hits.stdout))


# -- issue #28 item 8: FIFOs, unreadable directories, files that stay unreadable ---------


def test_a_fifo_is_a_counted_skip_on_every_run(repo: Repo, indexer: Indexer) -> None:
    """An untracked FIFO, and a committed file replaced by one, are `not_a_file` skips in
    every sync that looks at the working tree (libgit2's status never mentions the first);
    the replaced file's rows go, and nothing blocks."""
    repo.write("app.py", "def main():\n    return 1\n")
    repo.write("was_file.py", "def gone():\n    return 2\n")
    repo.commit()
    os.mkfifo(repo.path / "pipe.py")
    assert indexer.sync(repo.path).skipped == {"not_a_file": 1}
    (repo.path / "was_file.py").unlink()
    os.mkfifo(repo.path / "was_file.py")
    report = indexer.sync(repo.path)
    assert report.skipped == {"not_a_file": 2}
    assert report.deleted == 1
    repo.write("app.py", "def main():\n    return 3\n")
    assert indexer.sync(repo.path).skipped == {"not_a_file": 2}  # and again, incrementally


@pytest.mark.slow
def test_unreadable_directories_and_files_are_reported_by_every_run(
    repo: Repo, index_dir: Path
) -> None:
    """An untracked directory that cannot be listed is an `unreadable` skip (libgit2 passes
    over it in silence), beside two unreadable files; a second run, with nothing changed,
    reports all three again instead of nothing."""
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.write("b.py", "def bravo():\n    return 2\n")
    repo.commit()
    repo.write("c.py", "def charlie():\n    return 3\n")
    repo.write("private/d.py", "def delta():\n    return 4\n")
    for name in ("b.py", "c.py", "private"):
        (repo.path / name).chmod(0)
    where = [str(repo.path), "--index-dir", str(index_dir), "--json"]
    try:
        first = _cli("index", *where, privileged=False)
        second = _cli("index", *where, privileged=False)
    finally:
        (repo.path / "private").chmod(0o755)
    for done in (first, second):
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["skipped"] == {"unreadable": 3}, done.stdout
    assert '"path": "private/"' in first.stderr


def test_a_directory_past_path_max_is_a_counted_skip(repo: Repo, indexer: Indexer) -> None:
    """Twenty nested directories of 250-character names (a path past PATH_MAX, made one
    step at a time): what lies inside cannot be reached, and it is counted and reported as
    `path_too_long` (it was taken for absent and passed over in silence)."""
    repo.write("good.py", "def good():\n    return 1\n")
    repo.commit()
    fd = os.open(repo.path, os.O_RDONLY)
    for i in range(20):
        name = f"{i:02d}" + "d" * 248
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    out = os.open("deep.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(out, b"def deep():\n    return 2\n")
    os.close(out)
    os.close(fd)
    with capture_logs() as logs:
        report = indexer.sync(repo.path)
    assert report.skipped == {"path_too_long": 1}, report.skipped
    assert set(indexer.store.manifest(GitSource(repo.path).source.id)) == {"good.py"}
    refused = [e for e in logs if e["event"] == "file_refused"]
    assert len(refused) == 1 and "PATH_MAX" in refused[0]["reason"]


def test_a_tree_nested_past_the_depth_limit_is_a_counted_skip(repo: Repo, indexer: Indexer) -> None:
    """Untracked directories nested 400 deep, a file at every level: the ones past
    `MAX_DEPTH` are one `too_deep` skip, the directory where depth runs out, never entered
    (libgit2's status gives up at that depth, and asking it whether each directory is
    ignored cost time in proportion to depth: 2,000 levels took minutes a change set).
    The same file reached by its own path, as a watcher event does, is refused too."""
    from codechunkd.git.changes import MAX_DEPTH

    repo.write("good.py", "def good():\n    return 1\n")
    repo.commit()
    fd = os.open(repo.path, os.O_RDONLY)
    for level in range(400):
        out = os.open("f.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, f"def level_{level}():\n    return {level}\n".encode())
        os.close(out)
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    with capture_logs() as logs:
        report = indexer.sync(repo.path)
    assert report.skipped == {"too_deep": 1}, report.skipped
    indexed = set(indexer.store.manifest(GitSource(repo.path).source.id))
    assert len(indexed) == 1 + MAX_DEPTH + 1, len(indexed)  # good.py, f.py of levels 0..100
    assert "d/" * MAX_DEPTH + "f.py" in indexed
    refused = [e for e in logs if e["event"] == "file_refused"]
    assert [e["path"] for e in refused] == ["d/" * (MAX_DEPTH + 1)], refused
    deeper = "d/" * (MAX_DEPTH + 1) + "f.py"
    [version] = GitSource(repo.path).versions_of([deeper])[1]
    assert version.refused == "too_deep" and version.blob is None


def test_committed_files_past_the_depth_limit_are_counted_once_each(
    repo: Repo, indexer: Indexer
) -> None:
    """A file committed deeper than `MAX_DEPTH` is a `too_deep` skip, counted once: not
    again as the directory where the walk of the working tree stops.  One at the limit is
    indexed."""
    from codechunkd.git.changes import MAX_DEPTH

    repo.write("good.py", "def good():\n    return 1\n")
    repo.write("d/" * MAX_DEPTH + "edge.py", "def edge():\n    return 2\n")
    repo.write("d/" * (MAX_DEPTH + 5) + "deep.py", "def deep():\n    return 3\n")
    repo.commit()
    for _ in range(2):  # the no-op run says it again
        report = indexer.sync(repo.path)
        assert report.skipped == {"too_deep": 1}, report.skipped
    indexed = set(indexer.store.manifest(GitSource(repo.path).source.id))
    assert indexed == {"good.py", "d/" * MAX_DEPTH + "edge.py"}


def test_refused_paths_follow_the_include_and_exclude_globs() -> None:
    """A refused file is counted only when the settings would index it; a directory that
    cannot be listed is counted unless an exclude glob names it (include globs name files)."""
    from codechunkd.git.changes import FileVersion, Matcher
    from codechunkd.pipeline.plan import standing_skip

    matcher = Matcher(include=["*.py"], exclude=["build/*"])
    fifo = FileVersion(path="pipe.py", blob=None, refused="not_a_file")
    assert standing_skip(fifo, matcher) == "not_a_file"
    assert (
        standing_skip(FileVersion(path="pipe.txt", blob=None, refused="not_a_file"), matcher)
        is None
    )
    assert standing_skip(FileVersion(path="private/", blob=None, refused="unreadable"), matcher)
    assert (
        standing_skip(FileVersion(path="build/x/", blob=None, refused="unreadable"), matcher)
        is None
    )
    assert (
        standing_skip(FileVersion(path="a.py", blob=UNREADABLE, dirty=True), matcher)
        == "unreadable"
    )
    assert standing_skip(FileVersion(path="a.py", blob="1" * 40), matcher) is None
