"""``state.json``: the copy of ``repos`` that ``status`` reads, its row type, and its checks.

Standard library only, kept apart from ``store`` (which imports pyarrow and LanceDB):
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


def read_state_file(path: Path) -> dict[str, Any] | None:
    """``state.json``, or None when it is absent or not a valid state document."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and state_file_damage(path) is None else None


def state_file_damage(path: Path) -> str | None:
    """Why ``state.json`` is not a usable copy of ``repos`` (None: it is, or it is absent)."""
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return f"unreadable ({one_line(exc)})"
    sources = doc.get("sources") if isinstance(doc, dict) else None
    if not isinstance(sources, list):
        return "not a state document (no list of sources)"
    for s in sources:
        if not isinstance(s, dict) or any(k not in s for k in _STATE_KEYS):
            return "a source entry lacks its fields"
    return None
