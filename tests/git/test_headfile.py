"""HEAD read from a repository's files (``git/headfile.py``) agrees with pygit2 in every
case it answers, and leaves the others to pygit2."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Repo

from codechunkd.git.changes import GitSource
from codechunkd.git.headfile import read_head


def _pygit2(repo: Path, ref: str | None = None) -> tuple[str | None, str]:
    source = GitSource(repo, ref=ref)
    head = source.head()
    return head.commit, head.branch


def _git_dir(repo: Path) -> str:
    return GitSource(repo).source.git_dir


def test_head_from_files_matches_pygit2_for_loose_packed_detached_and_worktrees(
    repo: Repo, tmp_path: Path
) -> None:
    """A branch in a loose ref file, the same branch packed, a detached HEAD, a branch
    with a slash, and a linked worktree's own HEAD: the same (commit, branch) as pygit2."""
    repo.write("a.py", "x = 1\n")
    first = repo.commit("one")
    assert read_head(_git_dir(repo.path), None) == _pygit2(repo.path) == (first, "main")
    repo.git("pack-refs", "--all")
    assert not (repo.path / ".git/refs/heads/main").exists()
    assert read_head(_git_dir(repo.path), None) == (first, "main")
    repo.git("checkout", "-q", "-b", "feature/x")
    second = repo.commit("two")
    assert read_head(_git_dir(repo.path), None) == _pygit2(repo.path) == (second, "feature/x")
    repo.git("checkout", "-q", "--detach", first)
    assert read_head(_git_dir(repo.path), None) == _pygit2(repo.path) == (first, "HEAD")
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", str(linked), "main")
    assert "/worktrees/" in _git_dir(linked)
    assert read_head(_git_dir(linked), None) == _pygit2(linked) == (first, "main")


def test_a_ref_source_reads_its_branch_and_other_cases_are_left_to_pygit2(
    repo: Repo, tmp_path: Path
) -> None:
    """A bare mirror's branch is read from its files; an unborn branch, a tag, a missing
    ref, HEAD naming a symbolic ref or holding garbage, and a missing git dir give None."""
    bare = tmp_path / "mirror.git"
    unborn = _git_dir(repo.path)
    assert read_head(unborn, None) is None  # unborn: pygit2 says which branch
    repo.write("a.py", "x = 1\n")
    commit = repo.commit("one")
    repo.git("tag", "-a", "-m", "t", "v1")
    repo.git("clone", "-q", "--mirror", str(repo.path), str(bare))
    assert read_head(str(bare), "refs/heads/main") == _pygit2(bare, "refs/heads/main")
    assert read_head(str(bare), "refs/heads/main") == (commit, "refs/heads/main")
    assert read_head(str(bare), "refs/tags/v1") is None  # an annotated tag: peeled by pygit2
    assert read_head(str(bare), "refs/heads/nope") is None
    assert read_head(str(bare), "refs/heads/../../config") is None
    head = Path(_git_dir(repo.path)) / "HEAD"
    head.write_text("ref: refs/remotes/origin/HEAD\n")
    assert read_head(_git_dir(repo.path), None) is None
    head.write_text("\x00\xff garbage")
    assert read_head(_git_dir(repo.path), None) is None
    assert read_head(str(tmp_path / "absent"), None) is None


def test_a_fifo_or_an_endless_device_in_place_of_a_ref_file_is_left_to_pygit2(
    repo: Repo,
) -> None:
    """HEAD or a loose ref that is a FIFO (opening it waited for a writer for ever, and
    `status` with it), or `packed-refs` linked to /dev/zero (read without end): no answer
    from the files, at once, and the caller asks pygit2."""
    import os
    import subprocess
    import sys

    repo.write("a.py", "x = 1\n")
    repo.commit("one")
    repo.git("pack-refs", "--all")
    git = Path(_git_dir(repo.path))
    (git / "packed-refs").unlink()
    (git / "packed-refs").symlink_to("/dev/zero")
    os.mkfifo(git / "refs/heads/other")
    # In a child, so that a hang is a failed test rather than a stuck suite.
    probe = (
        "import sys; from pathlib import Path\n"
        "from codechunkd.git.headfile import branch_commit, read_head\n"
        "g = sys.argv[1]\n"
        "print(read_head(g, None), branch_commit(Path(g), 'refs/heads/other'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(git)], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["None", "None"], done
    (git / "HEAD").unlink()
    os.mkfifo(git / "HEAD")
    done = subprocess.run(
        [sys.executable, "-c", probe, str(git)], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["None", "None"], done


def test_a_fifo_in_a_refs_place_is_a_repository_error_not_a_hang(repo: Repo) -> None:
    """A loose ref that is a FIFO: libgit2 (like git) opened it and waited for a writer for
    ever, so `index` hung at the first look at HEAD.  Now it is a one-line error, whether
    the FIFO is the branch HEAD names or a branch a ref source names.  (A FIFO as HEAD
    itself: libgit2 does not take the folder for a repository.)"""
    import os
    import subprocess
    import sys

    repo.write("a.py", "x = 1\n")
    repo.commit("one")
    git = Path(_git_dir(repo.path))
    probe = (
        "import sys\n"
        "from codechunkd.errors import RepoError\n"
        "from codechunkd.git.changes import GitSource\n"
        "try:\n"
        "    GitSource(sys.argv[1], ref=sys.argv[2] or None).head()\n"
        "except RepoError as exc:\n"
        "    print(exc)\n"
    )

    def head_error(ref: str = "") -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe, str(repo.path), ref],
            capture_output=True,
            text=True,
            timeout=60,  # a hang (the bug) fails here, far above the ~0.3 s it takes
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    repo.git("branch", "feature")
    for name, ref in [("refs/heads/main", ""), ("refs/heads/feature", "feature")]:
        (git / name).unlink()
        os.mkfifo(git / name)
        assert f"{git / name} is not a regular file" in head_error(ref)
    indexed = subprocess.run(
        [str(Path(sys.executable).with_name("codechunkd")), "index", str(repo.path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert indexed.returncode == 3 and "is not a regular file" in indexed.stderr, indexed
    assert len(indexed.stderr.strip().splitlines()) == 1, indexed.stderr
