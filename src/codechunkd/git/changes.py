"""What changed in a source since the index last reflected it: decided here, in one place.

A *source* is what one set of rows mirrors: a working tree (a checkout or a
``git worktree``), or one ref of a repository read from the object database
with no checkout (a bare mirror on a CI box).

The identity of a file version is its git blob id: from the tree for committed
files, hashed from the opened file (``git/worktree.py``: inside the tree, no
symlink followed) for files that differ from HEAD in the working tree (nothing
is written to the object database).  A ``ChangeSet`` lists the
*candidate* paths with the version each should have in the index (``blob=None``:
the path should not be indexed).  Candidates come from a tree-to-tree diff
between the indexed commit and HEAD plus the working tree's status, or, for a
full reconcile, from every file of HEAD.  The caller compares candidates with
what it has stored, so applying a change set twice changes nothing.

What can never be indexed is decided here too, and said: a path that exists but
is *refused* (``FileVersion.refused``) has no blob and a reason the caller counts
as a skip.  A name that is not valid UTF-8 (git stores bytes; every column of the
index is a UTF-8 string) is refused wherever it comes from: HEAD's tree, a diff,
the working tree's status or a file event.  In the working tree, a FIFO, socket or
device file and a directory that cannot be listed are refused as well: libgit2's
status passes over both in silence, so one walk of the tree (ignored directories
and nested repositories pruned, no symlink followed) finds them.
"""

from __future__ import annotations

import bisect
import errno
import fnmatch
import hashlib
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, FileStatus, ObjectType

from codechunkd.display import printable
from codechunkd.errors import NotAGitRepo, RefNotFound, RepoError
from codechunkd.git import worktree
from codechunkd.git.headfile import odd_ref_file
from codechunkd.types import BlobId, CommitId, SourceId

_GITLINK = int(FileMode.COMMIT)
_LINK = int(FileMode.LINK)
_TREE = int(FileMode.TREE)
_IGNORED = FileStatus.IGNORED
_UNCHANGED = FileStatus.CURRENT
_SURROGATE = re.compile("[\ud800-\udfff]")

#: The blob of a working-tree file that exists but cannot be read (git's null id, which
#: ``git diff --raw`` also shows for a working-tree side it did not hash): recorded with
#: the skip reason ``unreadable``, it matches no content, so the file is read again once
#: its content can be hashed.
UNREADABLE: BlobId = "0" * 40

#: Skip reasons of refused paths (``FileVersion.refused``), and what each means.
NAME_NOT_UTF8 = "name_not_utf8"
NOT_A_FILE = "not_a_file"
REFUSED_UNREADABLE = "unreadable"
PATH_TOO_LONG = "path_too_long"
TOO_DEEP = "too_deep"
#: The most directories a path may lie under: libgit2's own status walk stops at this depth
#: ("directory nesting too deep"), and asking libgit2 whether a path is ignored costs time
#: in proportion to its depth, so a deeper tree is refused rather than walked.
MAX_DEPTH = 100
REFUSALS = {
    NAME_NOT_UTF8: "file name is not valid UTF-8",
    NOT_A_FILE: "not a regular file (a FIFO, socket or device)",
    REFUSED_UNREADABLE: "directory cannot be read",
    PATH_TOO_LONG: "directory whose path is longer than the system allows (PATH_MAX)",
    TOO_DEEP: f"nested more than {MAX_DEPTH} directories deep",
}


def path_is_ignored(repo: pygit2.Repository, path: str) -> bool:
    """Whether git ignores ``path`` (relative; a directory ends in ``/``); False when git
    cannot tell.  A name that is not UTF-8 (surrogate escapes: pygit2 takes str only) is
    matched with U+FFFD for each byte that is not, and never raises."""
    try:
        return bool(repo.path_is_ignored(path))
    except pygit2.GitError:
        return False
    except UnicodeEncodeError:
        return path_is_ignored(repo, _SURROGATE.sub("\ufffd", path))


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot be indexed whatever its content, or None: ``NAME_NOT_UTF8`` when
    it is not valid UTF-8 (the OS and pygit2 hand such a name over with surrogate escapes,
    which no column of the index can hold), ``TOO_DEEP`` under more than ``MAX_DEPTH``
    directories."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return NAME_NOT_UTF8
    if path.count("/", 0, len(path) - 1) > MAX_DEPTH:
        return TOO_DEEP
    return None


class SourceKind(StrEnum):
    WORKTREE = "worktree"
    REF = "ref"


class Entry(StrEnum):
    """What a path is, which decides whether it can be chunked."""

    FILE = "file"
    SYMLINK = "symlink"
    SUBMODULE = "submodule"


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    id: SourceId
    """Stable id: a hash of the repository's common git dir and the worktree or ref."""
    kind: SourceKind
    repo: str
    """Display root: the working tree, or the git dir of a bare repository."""
    git_dir: str
    """The repository's own git dir (for a linked worktree: ``.git/worktrees/<name>``)."""
    ref: str | None = None
    """For a ref source, the ref it follows (``refs/heads/main``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Head:
    commit: CommitId | None
    """The commit HEAD (or the ref) points at; None when unborn."""
    branch: str
    """Branch name, ``HEAD`` when detached, the ref name for ref sources."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileVersion:
    """The version a path should have in the index."""

    path: str
    blob: BlobId | None
    """None: the path should not be in the index (deleted, ignored, excluded)."""
    entry: Entry = Entry.FILE
    dirty: bool = False
    """True when this version is working-tree content that differs from HEAD."""
    refused: str | None = None
    """Why a path that exists is never indexed (``REFUSALS``; ``blob`` is then None): a
    name that is not UTF-8, a FIFO or device, a directory that cannot be read."""

    @property
    def shown(self) -> str:
        """The path as it may be printed or logged (``display.printable``)."""
        return printable(self.path)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeSet:
    source: Source
    head: Head
    full: bool
    """True when every file was listed (no usable indexed state): paths the index
    holds that are not listed must be removed."""
    versions: tuple[FileVersion, ...]
    dirty: Mapping[str, BlobId | None] = field(default_factory=dict)
    """Every working-tree difference from HEAD after this change set (None: deleted)."""


def _source_id(common_dir: str, what: str) -> SourceId:
    return hashlib.sha256(f"{common_dir}\0{what}".encode()).hexdigest()[:16]


class Matcher:
    """include/exclude globs (fnmatch style: ``*`` also matches ``/``)."""

    def __init__(self, include: Iterable[str] = (), exclude: Iterable[str] = ()) -> None:
        self.include = tuple(include)
        self.exclude = tuple(exclude)

    def __call__(self, path: str) -> bool:
        if self.include and not any(fnmatch.fnmatchcase(path, p) for p in self.include):
            return False
        return not self.excludes(path)

    def excludes(self, path: str) -> bool:
        """True when an exclude glob matches ``path`` (whatever the includes say)."""
        return any(fnmatch.fnmatchcase(path, p) for p in self.exclude)


class GitSource:
    """Reads versions and change sets of one source with pygit2."""

    def __init__(self, path: str | os.PathLike[str], ref: str | None = None) -> None:
        found = pygit2.discover_repository(str(path))
        if found is None:
            raise NotAGitRepo(str(path))
        try:
            self.repo = pygit2.Repository(found)
        except pygit2.GitError as exc:
            raise RepoError(f"cannot open repository at {found}: {exc}") from exc
        common = str(Path(self.repo.path).resolve())
        if "/worktrees/" in common:  # a linked worktree shares the main repository's objects
            common = common.split("/worktrees/")[0]
        workdir = self.repo.workdir
        if ref is not None or workdir is None:
            ref = self._resolve_ref(ref)
            self.source = Source(
                id=_source_id(common, ref),
                kind=SourceKind.REF,
                repo=str(Path(workdir or self.repo.path).resolve()),
                git_dir=str(Path(self.repo.path).resolve()),
                ref=ref,
            )
        else:
            root = str(Path(workdir).resolve())
            self.source = Source(
                id=_source_id(common, root),
                kind=SourceKind.WORKTREE,
                repo=root,
                git_dir=str(Path(self.repo.path).resolve()),
            )

    @property
    def is_worktree(self) -> bool:
        return self.source.kind is SourceKind.WORKTREE

    def present(self) -> bool:
        """The repository is still where it was opened: not moved away or deleted (libgit2
        reads it by path, and a missing one reads as an empty or broken repository)."""
        workdir = self.repo.workdir
        return os.path.isdir(self.repo.path) and (workdir is None or os.path.isdir(workdir))

    def _resolve_ref(self, ref: str | None) -> str:
        if ref is None:  # a bare repository without --ref follows its HEAD's branch
            head = self.repo.references.get("HEAD")
            target = head.target if head is not None else None
            return target if isinstance(target, str) else "HEAD"
        for candidate in (ref, f"refs/heads/{ref}", f"refs/remotes/{ref}", f"refs/tags/{ref}"):
            self._refuse_odd_ref_file(candidate)
            if candidate in self.repo.references:
                return candidate
        raise RefNotFound(self.repo.path, ref)

    # -- HEAD -------------------------------------------------------------

    def _refuse_odd_ref_file(self, ref: str | None) -> None:
        odd = odd_ref_file(self.repo.path, ref)
        if odd is not None:
            raise RepoError(
                f"{odd} is not a regular file (a FIFO or a device): git and libgit2 would "
                "wait on it for ever; replace it with the ref's commit id, or remove it"
            )

    def head(self) -> Head:
        repo = self.repo
        self._refuse_odd_ref_file(self.source.ref)
        if self.source.ref is not None:
            reference = repo.references.get(self.source.ref)
            if reference is None:
                return Head(commit=None, branch=self.source.ref)
            try:
                commit = reference.peel(pygit2.Commit)
            except (pygit2.GitError, ValueError):
                return Head(commit=None, branch=self.source.ref)
            return Head(commit=str(commit.id), branch=self.source.ref)
        if repo.head_is_unborn:
            target = repo.references["HEAD"].target
            return Head(commit=None, branch=str(target).removeprefix("refs/heads/"))
        branch = "HEAD" if repo.head_is_detached else repo.head.shorthand
        return Head(commit=str(repo.head.target), branch=branch)

    def _tree(self, commit: CommitId | None) -> pygit2.Tree | None:
        if commit is None:
            return None
        try:
            return self.repo[commit].peel(pygit2.Tree)
        except (KeyError, ValueError, pygit2.GitError):
            return None

    def has_commit(self, commit: CommitId) -> bool:
        return self._tree(commit) is not None

    # -- versions ---------------------------------------------------------

    @staticmethod
    def _entry(mode: int) -> Entry:
        if mode == _GITLINK:
            return Entry.SUBMODULE
        if mode == _LINK:
            return Entry.SYMLINK
        return Entry.FILE

    def _walk(self, tree: pygit2.Tree, prefix: str = "") -> Iterator[tuple[str, str, int]]:
        stack = [(tree, prefix)]
        while stack:
            t, pre = stack.pop()
            for e in t:
                if e.filemode == _TREE:
                    stack.append((self.repo[e.id].peel(pygit2.Tree), f"{pre}{e.name}/"))
                else:
                    yield f"{pre}{e.name}", str(e.id), e.filemode

    def _tree_version(self, tree: pygit2.Tree | None, path: str) -> FileVersion:
        if tree is not None:
            try:
                e = tree[path]
            except KeyError:
                pass
            else:
                if e.filemode != _TREE:
                    return self._version(path, str(e.id), e.filemode)
        return FileVersion(path=path, blob=None)

    def _version(self, path: str, blob: str, mode: int) -> FileVersion:
        """A file of a tree, or its refusal when its name cannot be indexed."""
        refused = path_problem(path)
        if refused is not None:
            return FileVersion(path=path, blob=None, refused=refused)
        return FileVersion(path=path, blob=blob, entry=self._entry(mode))

    def _worktree_version(self, path: str, head_tree: pygit2.Tree | None) -> FileVersion:
        """The working tree's version of a path (the caller knows it may differ from HEAD).

        The path is reached without following a symlink at any level: a file
        under a symlinked directory is not in the working tree.  A file that is
        there but cannot be read has the blob ``UNREADABLE``.
        """
        assert self.repo.workdir is not None
        root = self.source.repo
        refused = path_problem(path)
        if refused is not None:  # never read, never dirty: such a path is in no state
            try:
                worktree.lstat(root, path)
            except OSError as exc:
                if worktree.is_absent(exc):
                    return FileVersion(path=path, blob=None)
            return FileVersion(path=path, blob=None, refused=refused)
        try:
            st = worktree.lstat(root, path)
            if stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode):
                blob = worktree.blob_of(root, path, st)
                entry = Entry.SYMLINK if stat.S_ISLNK(st.st_mode) else Entry.FILE
            else:  # a directory (submodule checkout, or file -> directory), a FIFO, a socket
                head = self._tree_version(head_tree, path)
                if stat.S_ISDIR(st.st_mode):
                    if head.entry is Entry.SUBMODULE:
                        return head
                    return FileVersion(path=path, blob=None, dirty=True)
                return FileVersion(
                    path=path, blob=None, dirty=head.blob is not None, refused=NOT_A_FILE
                )
        except OSError as exc:
            if worktree.is_absent(exc):
                return FileVersion(path=path, blob=None, dirty=True)
            return FileVersion(path=path, blob=UNREADABLE, dirty=True)
        head = self._tree_version(head_tree, path)
        return FileVersion(path=path, blob=blob, entry=entry, dirty=blob != head.blob)

    def _status(self) -> tuple[dict[str, int], dict[str, str]]:
        """(working-tree paths that differ from HEAD, untracked included, ignored not;
        what the walk of the tree refused: path -> reason, see ``_scan``)."""
        try:
            status = self.repo.status(untracked_files="all", ignored=False)
        except (pygit2.GitError, OSError):  # e.g. one tracked file cannot be opened
            status, refused = self._status_by_path()
        else:
            refused = self._scan(None)[1]
        return {p: f for p, f in status.items() if f not in (_IGNORED, _UNCHANGED)}, refused

    def _status_by_path(self) -> tuple[dict[str, int], dict[str, str]]:
        """``status()`` one path at a time, for when one file makes the whole call fail.

        libgit2 gives up on the first tracked file it cannot open; here such a
        path is reported as modified, and ``_worktree_version`` finds it unreadable.
        """
        repo = self.repo
        try:
            paths = {e.path for e in repo.index}
            tree = self._tree(self.head().commit)
            if tree is not None:
                paths.update(p for p, _, _ in self._walk(tree))
        except (pygit2.GitError, OSError) as exc:
            raise RepoError(f"git status failed in {self.source.repo}: {exc}") from exc
        untracked, refused = self._scan(paths)
        paths.update(untracked)
        out: dict[str, int] = {}
        for path in paths:
            try:
                out[path] = repo.status_file(path)
            except KeyError:  # neither tracked nor in the working tree
                continue
            except (pygit2.GitError, OSError, ValueError):  # ValueError: a name not UTF-8
                out[path] = int(FileStatus.WT_MODIFIED)
        return out, refused

    def _scan(self, tracked: set[str] | None) -> tuple[list[str], dict[str, str]]:
        """One walk of the working tree: (the files git neither tracks nor ignores, when
        ``tracked`` is given; what cannot be indexed and git's status does not mention:
        path -> reason).

        No symlink is followed; ``.git``, nested repositories and ignored directories are
        not entered.  Refused, unless git ignores them: a file whose name is not UTF-8,
        tracked or not (``NAME_NOT_UTF8``: found here by every run, not only by those
        that list HEAD's files), a FIFO, socket or device file (``NOT_A_FILE``), and a
        directory that cannot be listed (``unreadable``, its path ending in ``/``) and one
        whose files would lie deeper than ``MAX_DEPTH`` (``TOO_DEEP``, not entered).  Costs
        about what libgit2's own status walk costs.
        """
        root = self.source.repo
        untracked: list[str] = []
        refused: dict[str, str] = {}
        stack = [("", False)]  # (directory, its name is not UTF-8)
        while stack:
            prefix, bad_prefix = stack.pop()
            try:
                entries = os.scandir(os.path.join(root, prefix) if prefix else root)
            except OSError as exc:
                if prefix and exc.errno == errno.ENAMETOOLONG:  # there, but out of reach
                    refused[prefix] = PATH_TOO_LONG
                elif prefix and not worktree.is_absent(exc):
                    refused[prefix] = REFUSED_UNREADABLE
                continue
            with entries:
                for e in entries:
                    path = prefix + e.name
                    bad = bad_prefix or (not e.name.isascii() and path_problem(e.name) is not None)
                    try:
                        if e.is_dir(follow_symlinks=False):
                            if e.name == ".git" or os.path.lexists(os.path.join(e.path, ".git")):
                                continue  # the repository's own, or a nested repository
                            if self.is_ignored(f"{path}/"):
                                continue
                            if path.count("/") >= MAX_DEPTH:  # what it holds is too deep
                                refused[f"{path}/"] = TOO_DEEP
                            else:
                                stack.append((f"{path}/", bad))
                            continue
                        regular = e.is_file(follow_symlinks=False) or e.is_symlink()
                    except OSError:
                        continue  # gone since the directory was listed
                    if bad or not regular:
                        if not self.is_ignored(path):
                            refused[path] = NAME_NOT_UTF8 if bad else NOT_A_FILE
                    elif tracked is not None and path not in tracked and not self.is_ignored(path):
                        untracked.append(path)
        return untracked, refused

    def is_ignored(self, path: str) -> bool:
        return path_is_ignored(self.repo, path)

    def versions_of(self, paths: Iterable[str]) -> tuple[Head, list[FileVersion]]:
        """Current versions of a few paths, from the working tree (the per-event path).

        Costs a stat and a hash per path; no ``status()`` call (which can take a
        second on a large repository whose stat cache is stale).
        """
        head = self.head()
        tree = self._tree(head.commit)
        out: list[FileVersion] = []
        for path in paths:
            if not self.is_worktree:
                out.append(self._tree_version(tree, path))
                continue
            version = self._worktree_version(path, tree)
            tracked = self._tree_version(tree, path).blob is not None
            there = version.blob is not None or version.refused is not None
            if there and not tracked and self.is_ignored(path):
                version = FileVersion(path=path, blob=None, dirty=False)
            out.append(version)
        return head, out

    def change_set(
        self,
        *,
        since: CommitId | None,
        since_dirty: Mapping[str, BlobId | None],
        full: bool = False,
    ) -> ChangeSet:
        """Candidates that may differ from the indexed state (``since`` + ``since_dirty``)."""
        head = self.head()
        tree = self._tree(head.commit)
        old_tree = self._tree(since)
        full = full or (since is not None and old_tree is None) or since is None
        status, refused = self._status() if self.is_worktree else ({}, {})

        versions: dict[str, FileVersion] = {}
        if full:
            if tree is not None:
                for path, blob, mode in self._walk(tree):
                    versions[path] = self._version(path, blob, mode)
        else:
            candidates: set[str] = set(since_dirty)
            if since != head.commit:
                assert old_tree is not None
                diff = old_tree.diff_to_tree(tree) if tree is not None else None
                if diff is not None:  # a rename is its two paths (sync pairs equal blobs)
                    for delta in diff.deltas:
                        candidates.add(delta.old_file.path)
                        candidates.add(delta.new_file.path)
                else:  # HEAD became unborn (orphan branch): every old path goes
                    candidates.update(p for p, _, _ in self._walk(old_tree))
            for path in candidates:
                versions[path] = self._tree_version(tree, path)

        dirty: dict[str, BlobId | None] = {}
        for path in status:
            version = self._worktree_version(path, tree)
            versions[path] = version
            if version.dirty:
                dirty[path] = version.blob
        said = sorted(p for p, v in versions.items() if v.blob == UNREADABLE or v.refused)
        for path, reason in refused.items():
            if path in versions:
                continue
            if path.endswith("/"):  # a directory: said once, by what inside is refused
                i = bisect.bisect_left(said, path)
                if i == len(said) or not said[i].startswith(path):
                    versions[path] = FileVersion(path=path, blob=None, refused=reason)
                continue
            version = self._worktree_version(path, tree)  # a FIFO: gone, or tracked?
            versions[path] = version
            if version.dirty:
                dirty[path] = version.blob
        return ChangeSet(
            source=self.source,
            head=head,
            full=full,
            versions=tuple(versions[p] for p in sorted(versions)),
            dirty=dirty,
        )

    # -- content ----------------------------------------------------------

    def read(self, version: FileVersion, *, limit: int) -> bytes | None:
        """The bytes of a version, or None when it is larger than ``limit`` bytes.

        From the object database (its size read from the object header, so an
        oversized blob is never inflated), or from the working tree when dirty
        (opened inside the tree without following a symlink or blocking; its
        size read with ``fstat`` before any byte).  At most ``limit`` bytes are
        read.  For a dirty file the bytes read are re-hashed by the caller when
        they must match ``version.blob`` exactly (the file may change in between).
        Raises ``OSError`` when the working-tree file cannot be read.
        """
        assert version.blob is not None
        if not version.dirty:
            try:
                oid = pygit2.Oid(hex=version.blob)
                kind, size = self.repo.odb.read_header(oid)
            except (KeyError, ValueError, pygit2.GitError):
                pass
            else:
                if kind == ObjectType.BLOB:
                    if size > limit:
                        return None
                    blob = self.repo[oid]
                    assert isinstance(blob, pygit2.Blob)
                    return bytes(blob.data)
        assert self.repo.workdir is not None, "a dirty version needs a working tree"
        if version.entry is Entry.SYMLINK:
            return os.fsencode(worktree.readlink(self.source.repo, version.path))
        with worktree.open_file(self.source.repo, version.path) as (fd, st):
            if st.st_size > limit:
                return None
            data = worktree.read_at_most(fd, limit + 1)  # a file grown since fstat shows it
        return None if len(data) > limit else data


def blob_id(data: bytes) -> BlobId:
    """git's blob id of some bytes (``git hash-object``)."""
    return str(pygit2.hash(data))
