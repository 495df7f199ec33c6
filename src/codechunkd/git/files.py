"""What a file's bytes are fit for: one decision shared by indexing and verification."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from codechunkd.git.changes import UNREADABLE, Entry, FileVersion, GitSource, blob_id

#: git's own heuristic: a NUL byte in the first 8000 bytes makes a file binary.
BINARY_SNIFF = 8000


@dataclass(frozen=True, slots=True, kw_only=True)
class Text:
    """A file that can be chunked: its bytes, valid UTF-8."""

    data: bytes
    replaced: bool
    """True when the file was not valid UTF-8 and was decoded with U+FFFD replacements."""


def skip_reason_of_entry(entry: Entry) -> str | None:
    """Entries that are never read: a submodule's commit, a symlink's target."""
    if entry is Entry.SUBMODULE:
        return "submodule"
    if entry is Entry.SYMLINK:
        return "symlink"
    return None


def as_text(data: bytes, *, max_size: int) -> Text | str:
    """The chunkable text of a file, or the reason it is skipped."""
    if len(data) > max_size:
        return "too_large"
    if b"\0" in data[:BINARY_SNIFF]:
        return "binary"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return Text(data=data.decode("utf-8", errors="replace").encode("utf-8"), replaced=True)
    return Text(data=data, replaced=False)


def read_text(
    git: GitSource, version: FileVersion, *, max_size: int
) -> tuple[FileVersion, Text | str]:
    """(the version actually read, its text or the reason it is skipped): :func:`read_raw`,
    then :func:`as_text`, the two halves indexing runs (``pipeline/prepare.py``, the second
    possibly on a worker process), in one call.
    """
    version, raw = read_raw(git, version, max_size=max_size)
    if isinstance(raw, str):
        return version, raw
    return version, as_text(raw, max_size=max_size)


def read_raw(
    git: GitSource, version: FileVersion, *, max_size: int
) -> tuple[FileVersion, bytes | str]:
    """(the version actually read, its bytes or the reason it is skipped), not decoded yet.

    The half of :func:`read_text` that needs the repository (the other half, ``as_text``,
    can run in a worker process).  The size is checked before reading (at most
    ``max_size`` bytes are read).  A dirty file is re-hashed: the version
    returned is the one read, which may be newer than its status said.  A
    file that cannot be read (or vanished since its status) is returned with
    the blob ``UNREADABLE``: the index never claims a version it did not read,
    and the file is read again once it can be.
    """
    reason = skip_reason_of_entry(version.entry)
    if reason:
        return version, reason
    unreadable = dataclasses.replace(version, blob=UNREADABLE, dirty=True)
    if version.blob == UNREADABLE:
        return unreadable, "unreadable"
    try:
        raw = git.read(version, limit=max_size)
    except OSError:
        return unreadable, "unreadable"
    if raw is None:
        return version, "too_large"
    if version.dirty:
        blob = blob_id(raw)
        if blob != version.blob:
            version = dataclasses.replace(version, blob=blob)
    return version, raw
