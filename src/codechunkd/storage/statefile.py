"""``state.json``: the copy of ``repos`` that ``status`` reads, its row type, and its checks.

No third-party import, kept apart from ``store`` (which imports pyarrow and LanceDB):
``codechunkd status`` without a daemon, the damage checks and the MCP server read it
for free.  The writer (``IndexStore.write_state_file``) mirrors ``repos`` here after
every state change, atomically.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codechunkd import atomicfile
from codechunkd.regularfile import read_regular_file
from codechunkd.storage._errors import one_line
from codechunkd.types import BlobId

if TYPE_CHECKING:  # pygit2 stays out of this module's imports
    from codechunkd.git.changes import Source

_STATE_KEYS = ("source", "kind", "repo", "git_dir", "ref", "branch", "commit", "pending", "files")


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceState:
    """A row of ``repos``: what the index reflects for one source."""

    source: Source
    branch: str
    commit: str | None
    dirty: Mapping[str, BlobId | None] = field(default_factory=dict)
    pending: str | None = None
    """Set while a change set is being applied; still set after a crash."""
    fingerprint: str = ""
    embedding_model: str = ""
    files: int = 0
    chunks: int = 0
    updated_at: datetime | None = None
    skipped: Mapping[str, int] = field(default_factory=dict)
    """Files recorded without chunks, by reason: counted from ``files`` when ``state.json``
    is written (``status`` without a daemon shows them); no column of ``repos``."""


def state_to_json(state: SourceState) -> dict[str, Any]:
    return {
        "source": state.source.id,
        "kind": str(state.source.kind),
        "repo": state.source.repo,
        "git_dir": state.source.git_dir,
        "ref": state.source.ref,
        "branch": state.branch,
        "commit": state.commit,
        "dirty": dict(state.dirty),
        "pending": state.pending,
        "fingerprint": state.fingerprint,
        "embedding_model": state.embedding_model,
        "files": state.files,
        "chunks": state.chunks,
        "updated_at": state.updated_at.isoformat() if state.updated_at else None,
        "skipped": dict(state.skipped),
    }


def write_state_file(
    path: Path, uri: str, states: Sequence[SourceState], *, schema_version: int
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "schema_version": schema_version,
        "index": uri,
        "sources": [state_to_json(s) for s in states],
    }
    atomicfile.write_text(path, json.dumps(doc, indent=1, sort_keys=True))


MAX_INDEX_FILE_BYTES = 256 << 20
"""The largest ``state.json`` or manifest read: far above a real one, and a bound keeps a
huge file from filling memory."""


def read_index_file(path: Path) -> bytes:
    """A small file of the index (``state.json``, a table's manifest): a regular file of at
    most ``MAX_INDEX_FILE_BYTES``; a FIFO or a device in its place is ``OSError``, not a hang
    or a full memory."""
    return read_regular_file(path, MAX_INDEX_FILE_BYTES, limit_says="the 256 MiB allowed")


_STR, _OPT_STR, _INT = (str,), (str, type(None)), (int,)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "source": _STR,
    "kind": _STR,
    "repo": _STR,
    "git_dir": _STR,
    "ref": _OPT_STR,
    "branch": _STR,
    "commit": _OPT_STR,
    "pending": _OPT_STR,
    "files": _INT,
    # optional: checked when present
    "chunks": _INT,
    "dirty": (dict,),
    "fingerprint": _STR,
    "embedding_model": _STR,
    "updated_at": _OPT_STR,
    "skipped": (dict,),
}
"""The JSON types of a source entry's fields (``state_to_json``): exact, so ``true`` is no
number."""


def read_state_file(path: Path) -> dict[str, Any] | None:
    """``state.json``, or None when it is absent or not a valid state document."""
    doc, why = load_state_file(path)
    return doc if why is None else None


def load_state_file(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the document, None), (None, why it is damaged), or (None, None) when it is absent."""
    try:
        doc = json.loads(read_index_file(path))
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"unreadable ({one_line(exc)})"
    sources = doc.get("sources") if isinstance(doc, dict) else None
    if not isinstance(sources, list):
        return None, "not a state document (no list of sources)"
    for s in sources:
        if not isinstance(s, dict) or any(k not in s for k in _STATE_KEYS):
            return None, "a source entry lacks its fields"
        for key, value in s.items():
            types = _FIELD_TYPES.get(key)
            if types is not None and type(value) not in types:
                return None, f"a source entry's {key!r} has the wrong type ({type(value).__name__})"
            if isinstance(value, str) and "\0" in value:
                return None, f"a source entry's {key!r} holds a NUL character"
        counts = s.get("skipped") or {}
        if any(type(k) is not str or type(n) is not int for k, n in counts.items()):
            return None, "a source entry's 'skipped' holds other than counts by reason"
    return doc, None


def indexed_roots(path: Path) -> set[str]:
    """The repository roots ``state.json`` names (none when it is absent or damaged)."""
    doc = read_state_file(path)
    return {s["repo"] for s in doc["sources"]} if doc else set()
