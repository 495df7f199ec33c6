"""What a file's bytes are fit for: one decision shared by indexing and verification."""

from __future__ import annotations

from dataclasses import dataclass

from codechunkd.git.changes import Entry

#: git's own heuristic: a NUL byte in the first 8000 bytes makes a file binary.
BINARY_SNIFF = 8000


@dataclass(frozen=True, slots=True, kw_only=True)
class Text:
    """A file that can be chunked: its bytes, valid UTF-8."""

    data: bytes
    replaced: bool
    """True when the file was not valid UTF-8 and was decoded with U+FFFD replacements."""


def skip_reason_of_entry(entry: Entry) -> str | None:
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
