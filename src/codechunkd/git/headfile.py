"""HEAD (or a branch) of a repository read from its files, without pygit2.

``codechunkd status`` shows each source's HEAD beside the indexed commit; pygit2's
import is most of that command's start (its enums alone), so the common cases are
read here with the standard library: ``HEAD`` naming a branch or a commit, the
branch a loose ref file or a line of ``packed-refs``, in the repository's common
directory (a linked worktree's ``commondir``).  Anything else (a symbolic ref
pointing at a symbolic ref, the reftable format's placeholder, a missing branch,
a ref outside ``refs/heads/``, an unreadable file) returns None, and the caller
asks pygit2, which knows every case.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from codechunkd.regularfile import open_regular_file

_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_MAX = 4096
"""Bytes read of ``HEAD``, a loose ref or ``commondir``: more is no ref file."""
_REFTABLE = "refs/heads/.invalid"
"""What ``HEAD`` says in a repository whose refs are in the reftable format."""


def _small(path: Path) -> str | None:
    try:  # a regular file only: a FIFO in a ref's place would wait for a writer for ever
        with open_regular_file(path) as f:
            data = f.read(_MAX + 1)
    except OSError:
        return None
    if len(data) > _MAX:
        return None
    try:
        return data.decode("ascii").strip()
    except UnicodeDecodeError:
        return None


def _common_dir(git_dir: Path) -> Path:
    common = _small(git_dir / "commondir")
    return (git_dir / common) if common else git_dir


def _packed(common: Path, name: str) -> str | None:
    want = name.encode("utf-8", "surrogateescape")
    try:  # not /dev/zero, read line by line for ever
        with open_regular_file(common / "packed-refs") as f:
            for line in f:
                oid, _, ref = line.rstrip(b"\n").partition(b" ")
                if ref == want and _OID.fullmatch(oid.decode("ascii", "replace")):
                    return oid.decode("ascii")
    except OSError:
        return None
    return None


def branch_commit(git_dir: Path, name: str) -> str | None:
    """The commit ``refs/heads/...`` ``name`` points at, if its files say so plainly."""
    if not name.startswith("refs/heads/") or name == _REFTABLE or ".." in name:
        return None
    common = _common_dir(git_dir)
    loose = _small(common / name)
    if loose is not None:
        return loose if _OID.fullmatch(loose) else None
    return _packed(common, name)


def read_head(git_dir: str, ref: str | None) -> tuple[str, str] | None:
    """(commit, branch) as ``GitSource.head`` gives it, or None: ask pygit2.

    ``ref``: the branch of a ref source (``refs/heads/...``); None: the ``HEAD`` of
    ``git_dir`` (branch ``HEAD`` when detached)."""
    root = Path(git_dir)
    if ref is not None:
        commit = branch_commit(root, ref)
        return (commit, ref) if commit else None
    head = _small(root / "HEAD")
    if head is None:
        return None
    if _OID.fullmatch(head):
        return head, "HEAD"
    if not head.startswith("ref: "):
        return None
    name = head.removeprefix("ref: ").strip()
    commit = branch_commit(root, name)
    return (commit, name.removeprefix("refs/heads/")) if commit else None


def odd_ref_file(git_dir: str, ref: str | None) -> Path | None:
    """A file that resolving ``ref`` (None: ``HEAD`` and the branches it names) opens and
    that is there but no regular file or folder: libgit2, like git, reads a FIFO in a loose
    ref's place and waits for a writer for ever.  None when there is none."""
    root = Path(git_dir)
    bases = dict.fromkeys([root, _common_dir(root)])  # per-worktree refs, then shared ones
    names = ["HEAD" if ref is None else ref]
    for _ in range(5):  # symbolic refs naming symbolic refs: libgit2 follows 5
        if not names:
            return None
        name = names.pop()
        if name.startswith("/") or ".." in name:
            return None  # no ref name: libgit2 refuses it without opening anything
        for base in bases:
            try:
                mode = os.stat(base / name).st_mode
            except (OSError, ValueError):
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                return base / name
        for base in bases:
            text = _small(base / name)
            if text is not None and text.startswith("ref: "):
                names.append(text.removeprefix("ref: ").strip())
                break
    return None
