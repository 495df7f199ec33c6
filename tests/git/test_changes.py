"""Change sets: what git says changed, decided in one place, from real repositories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.conftest import Repo

from codechunkd.errors import NotAGitRepo, RefNotFound
from codechunkd.git.changes import Entry, GitSource, SourceKind


def _versions(cs) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    return {v.path: v.blob for v in cs.versions}


def test_not_a_repo(tmp_path: Path) -> None:
    """A folder outside any git repository is a NotAGitRepo error."""
    with pytest.raises(NotAGitRepo):
        GitSource(tmp_path)


def test_discovered_from_subfolder(repo: Repo) -> None:
    """A source opened from a subfolder is its repository's root worktree."""
    repo.write("pkg/a.py", "x = 1\n")
    repo.commit()
    src = GitSource(repo.path / "pkg")
    assert src.source.repo == str(repo.path.resolve())
    assert src.source.kind is SourceKind.WORKTREE


def test_unborn_head_lists_untracked_files(repo: Repo) -> None:
    """On an unborn branch the change set is full and lists untracked files as dirty."""
    repo.write("a.py", "x = 1\n")
    src = GitSource(repo.path)
    head = src.head()
    assert head.commit is None and head.branch == "main"
    cs = src.change_set(since=None, since_dirty={})
    assert cs.full
    assert list(_versions(cs)) == ["a.py"]
    assert cs.dirty == {"a.py": _versions(cs)["a.py"]}


def test_full_change_set_lists_tree_and_hashes_dirty_files(repo: Repo) -> None:
    """A full change set has HEAD's files plus working-tree edits, new files and
    deletions, with git's own blob ids."""
    repo.write("a.py", "a = 1\n")
    repo.write("b.py", "b = 1\n")
    repo.commit()
    repo.write("a.py", "a = 2\n")
    repo.write("new.py", "n = 1\n")
    repo.remove("b.py")
    cs = GitSource(repo.path).change_set(since=None, since_dirty={})
    v = _versions(cs)
    assert v["a.py"] == repo.git("hash-object", "a.py")
    assert v["new.py"] == repo.git("hash-object", "new.py")
    assert v["b.py"] is None
    assert set(cs.dirty) == {"a.py", "new.py", "b.py"}


def test_ignored_files_never_appear(repo: Repo) -> None:
    """Files ignored by .gitignore or .git/info/exclude are never in a change set."""
    repo.write(".gitignore", "build/\n*.log\n")
    repo.write("build/out.py", "x = 1\n")
    repo.write("x.log", "log\n")
    repo.write("keep.py", "k = 1\n")
    (repo.path / ".git" / "info").mkdir(exist_ok=True)
    (repo.path / ".git" / "info" / "exclude").write_text("secret.py\n")
    repo.write("secret.py", "s = 1\n")
    cs = GitSource(repo.path).change_set(since=None, since_dirty={})
    assert set(_versions(cs)) == {".gitignore", "keep.py"}


def test_incremental_diff_between_commits(repo: Repo) -> None:
    """A diff between two commits lists modified, added and renamed paths (the old name
    as a deletion, the new one with the same blob: sync counts that as a rename)."""
    repo.write("a.py", "a = 1\n")
    repo.write("b.py", "def f():\n    return 'a long enough body to be detected as a rename'\n")
    c1 = repo.commit()
    repo.write("a.py", "a = 2\n")
    repo.git("mv", "b.py", "c.py")
    repo.write("d.py", "d = 1\n")
    repo.commit()
    cs = GitSource(repo.path).change_set(since=c1, since_dirty={})
    assert not cs.full
    v = _versions(cs)
    assert set(v) == {"a.py", "b.py", "c.py", "d.py"}
    assert v["b.py"] is None
    assert v["c.py"] == repo.git("rev-parse", "HEAD:c.py")


def test_no_change_is_an_empty_change_set(repo: Repo) -> None:
    """Nothing changed since the indexed commit gives an empty change set."""
    repo.write("a.py", "a = 1\n")
    c1 = repo.commit()
    cs = GitSource(repo.path).change_set(since=c1, since_dirty={})
    assert cs.versions == ()


def test_reverted_dirty_file_goes_back_to_head(repo: Repo) -> None:
    """A file recorded dirty but now reverted comes back at HEAD's blob and is no
    longer dirty."""
    repo.write("a.py", "a = 1\n")
    c1 = repo.commit()
    cs = GitSource(repo.path).change_set(since=c1, since_dirty={"a.py": "f" * 40})
    assert _versions(cs) == {"a.py": repo.git("rev-parse", "HEAD:a.py")}
    assert cs.dirty == {}


def test_unreachable_indexed_commit_forces_full(repo: Repo) -> None:
    """An indexed commit git no longer has makes the change set full."""
    repo.write("a.py", "a = 1\n")
    repo.commit()
    cs = GitSource(repo.path).change_set(since="0" * 40, since_dirty={})
    assert cs.full and "a.py" in _versions(cs)


def test_symlink_and_submodule_entries(repo: Repo, tmp_path: Path) -> None:
    """Symlinks and submodules are marked as such, and a submodule's files are not listed."""
    sub = Repo(tmp_path / "sub")
    sub.write("s.py", "s = 1\n")
    sub.commit()
    repo.write("a.py", "a = 1\n")
    os.symlink("a.py", repo.path / "link.py")
    repo.git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub.path), "vendor/sub"
    )
    repo.commit()
    cs = GitSource(repo.path).change_set(since=None, since_dirty={})
    entries = {v.path: v.entry for v in cs.versions}
    assert entries["link.py"] is Entry.SYMLINK
    assert entries["vendor/sub"] is Entry.SUBMODULE
    assert "vendor/sub/s.py" not in entries


def test_versions_of_paths_without_status(repo: Repo) -> None:
    """``versions_of`` gives dirty blob ids for edited paths and none for ignored or
    vanished ones, without a status scan."""
    repo.write("a.py", "a = 1\n")
    repo.write(".gitignore", "*.tmp\n")
    repo.commit()
    repo.write("a.py", "a = 2\n")
    repo.write("x.tmp", "t\n")
    _, versions = GitSource(repo.path).versions_of(["a.py", "x.tmp", "gone.py"])
    by = {v.path: v for v in versions}
    assert by["a.py"].dirty and by["a.py"].blob == repo.git("hash-object", "a.py")
    assert by["x.tmp"].blob is None  # ignored
    assert by["gone.py"].blob is None


def test_ref_source_of_bare_mirror(repo: Repo, tmp_path: Path) -> None:
    """A bare mirror is indexed at a ref; an unknown ref is a RefNotFound error."""
    repo.write("a.py", "a = 1\n")
    repo.commit()
    bare = tmp_path / "mirror.git"
    repo.git("clone", "-q", "--mirror", str(repo.path), str(bare))
    src = GitSource(bare, ref="main")
    assert src.source.kind is SourceKind.REF and src.source.ref == "refs/heads/main"
    cs = src.change_set(since=None, since_dirty={})
    assert _versions(cs) == {"a.py": repo.git("rev-parse", "HEAD:a.py")}
    with pytest.raises(RefNotFound):
        GitSource(bare, ref="nope")


def test_linked_worktree_is_its_own_source(repo: Repo, tmp_path: Path) -> None:
    """A linked worktree is a source of its own, on its own branch."""
    repo.write("a.py", "a = 1\n")
    repo.commit()
    wt = tmp_path / "wt"
    repo.git("worktree", "add", "-q", "-b", "feature", str(wt))
    main_src, wt_src = GitSource(repo.path), GitSource(wt)
    assert main_src.source.id != wt_src.source.id
    assert wt_src.head().branch == "feature"
    assert (wt / ".git").is_file()
