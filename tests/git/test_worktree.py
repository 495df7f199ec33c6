"""Reading working-tree files: never outside the tree, never blocking, never past the limit."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tests.conftest import Repo, unprivileged

from codechunkd.git.changes import UNREADABLE, Entry, FileVersion, GitSource
from codechunkd.git.files import read_text

LIMIT = 1_000_000


def test_file_under_a_symlinked_directory_is_not_in_the_tree(repo: Repo, tmp_path: Path) -> None:
    """A tracked directory replaced by a symlink to outside: its files are gone, not read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0:SECRET\n")
    repo.write("conf/passwd", "x = 1\n")
    repo.write("a.py", "a = 1\n")
    repo.commit()
    shutil.rmtree(repo.path / "conf")
    os.symlink(outside, repo.path / "conf")

    git = GitSource(repo.path)
    versions = {v.path: v for v in git.change_set(since=None, since_dirty={}).versions}
    assert versions["conf/passwd"].blob is None
    assert versions["conf"].entry is Entry.SYMLINK
    _, (event,) = git.versions_of(["conf/passwd"])  # the per-event path too
    assert event.blob is None
    forged = FileVersion(path="conf/passwd", blob="1" * 40, dirty=True)
    with pytest.raises(OSError) as raised:
        git.read(forged, limit=LIMIT)
    assert raised.value.errno in (errno.ELOOP, errno.ENOTDIR)  # O_NOFOLLOW|O_DIRECTORY
    assert read_text(git, forged, max_size=LIMIT) == (
        FileVersion(path="conf/passwd", blob=UNREADABLE, dirty=True),
        "unreadable",
    )


def test_fifo_in_place_of_a_file_does_not_block(repo: Repo) -> None:
    """A FIFO where a dirty file was: listing and reading it return at once (O_NONBLOCK)."""
    repo.write("a.py", "a = 1\n")
    repo.commit()
    repo.write("a.py", "a = 2\n")
    git = GitSource(repo.path)
    (version,) = git.change_set(since=None, since_dirty={}).versions
    assert version.dirty
    repo.remove("a.py")
    os.mkfifo(repo.path / "a.py")
    result: list[object] = []
    reader = threading.Thread(
        target=lambda: result.append(read_text(git, version, max_size=LIMIT)), daemon=True
    )
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # free the blocked reader before failing
        fd = os.open(repo.path / "a.py", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("reading a FIFO blocked")
    assert result == [(FileVersion(path="a.py", blob=UNREADABLE, dirty=True), "unreadable")]
    (listed,) = git.change_set(since=None, since_dirty={}).versions
    assert listed.blob is None  # a FIFO is not a file version


def test_oversized_files_are_skipped_without_being_read(repo: Repo) -> None:
    """The limit is checked before reading: fstat for a working-tree file, the header for a blob."""
    repo.write("big.txt", b"x" * (LIMIT + 1))
    repo.write("small.txt", "hello\n")
    repo.commit()
    with open(repo.path / "huge.dat", "wb") as f:
        f.truncate(256 << 20)  # sparse: 256 MB that cost no disk
    git = GitSource(repo.path)
    versions = {v.path: v for v in git.change_set(since=None, since_dirty={}).versions}
    assert not versions["big.txt"].dirty and versions["huge.dat"].dirty
    assert git.read(versions["big.txt"], limit=LIMIT) is None
    assert git.read(versions["huge.dat"], limit=LIMIT) is None
    assert git.read(versions["small.txt"], limit=LIMIT) == b"hello\n"
    assert read_text(git, versions["huge.dat"], max_size=LIMIT) == (
        versions["huge.dat"],
        "too_large",
    )
    # a blob one byte over the limit is too large; at the limit it is read whole
    assert git.read(versions["big.txt"], limit=LIMIT + 1) == b"x" * (LIMIT + 1)


_READ_BIG = """
import json, resource, sys
from codechunkd.git.changes import GitSource
git = GitSource(sys.argv[1])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
versions = git.change_set(since=None, since_dirty={}).versions
read = {v.path: git.read(v, limit=1_000_000) for v in versions}
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"kib": after - before, "none": sorted(p for p, d in read.items() if d is None)}))
"""


def test_oversized_files_cost_no_memory(repo: Repo) -> None:
    """Listing and reading a 256 MB sparse file and a 64 MB blob grows the process by < 16 MB."""
    repo.write("blob.bin", b"\0" * (64 << 20))
    repo.commit()
    with open(repo.path / "huge.dat", "wb") as f:
        f.truncate(256 << 20)
    done = subprocess.run(
        [sys.executable, "-c", _READ_BIG, str(repo.path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    got = json.loads(done.stdout)
    assert got["none"] == ["blob.bin", "huge.dat"]
    assert got["kib"] < 16 * 1024, got


_LIST = """
import json, sys
from codechunkd.git.changes import GitSource
from codechunkd.git.files import read_text
git = GitSource(sys.argv[1])
out = {}
for v in git.change_set(since=None, since_dirty={}).versions:
    version, text = read_text(git, v, max_size=1_000_000)
    out[v.path] = [v.blob, version.blob, text if isinstance(text, str) else "text"]
print(json.dumps(out))
"""


def test_unreadable_files_are_listed_as_unreadable(repo: Repo) -> None:
    """A mode-000 tracked file (which makes libgit2's status fail) and a mode-000
    untracked one are listed with the blob UNREADABLE; the other files as usual."""
    repo.write("a.py", "a = 1\n")
    repo.write("b.py", "b = 1\n")
    repo.write(".gitignore", "ignored/\n")
    repo.commit()
    repo.write("c.py", "c = 1\n")
    repo.write("ignored/x.py", "x = 1\n")
    repo.write("new/d.py", "d = 1\n")
    (repo.path / "b.py").chmod(0)
    (repo.path / "c.py").chmod(0)
    done = subprocess.run(
        unprivileged([sys.executable, "-c", _LIST, str(repo.path)]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["b.py"] == [UNREADABLE, UNREADABLE, "unreadable"]
    assert got["c.py"] == [UNREADABLE, UNREADABLE, "unreadable"]
    assert got["a.py"][2] == "text" and got["new/d.py"][2] == "text"
    assert got["new/d.py"][0] != UNREADABLE
    assert "ignored/x.py" not in got
