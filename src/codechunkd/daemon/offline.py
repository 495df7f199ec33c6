"""The status document when no daemon answers: the indexed state, and each source's live HEAD.

``codechunkd status`` and the MCP server's ``status`` tool both show it, through the same
rendering as the daemon's own document (``daemon/status.py``).  It reads ``state.json``
(stdlib only, no LanceDB or pyarrow) and each source's HEAD (its files, else pygit2),
nothing else.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from codechunkd.daemon.status import SourceSnapshot, StatusSnapshot, document
from codechunkd.errors import CodechunkdError
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.statefile import read_state_file


def live_head(repo: str, git_dir: str, ref: str | None) -> tuple[str | None, str]:
    """(commit, branch) of a source now, straight from its git dir; (None, "?") if unreadable.

    Read from the files when they say it plainly (``git/headfile.py``: no pygit2 import),
    else by pygit2."""
    from codechunkd.git.headfile import read_head

    plain = read_head(git_dir, ref)
    if plain is not None:
        return plain
    from codechunkd.git.changes import GitSource  # pygit2: the cases the files leave open

    try:
        head = GitSource(git_dir if ref else repo, ref=ref).head()
    except CodechunkdError:
        return None, "?"
    return head.commit, head.branch


def dir_size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, f)).st_size
    return total


def stopped_snapshot(
    paths: IndexPaths,
    *,
    state: str = "stopped",
    reason: str | None = None,
    pid: int | None = None,
) -> StatusSnapshot:
    """The daemon's snapshot as far as it can be known without the daemon."""
    # absent, unreadable or damaged (status reports the damage itself): no sources
    doc = read_state_file(paths.state_file) or {"sources": []}
    sources = []
    for s in doc.get("sources", []):
        head, branch = live_head(s["repo"], s["git_dir"], s.get("ref"))
        sources.append(SourceSnapshot(record=s, head=head, head_branch=branch))
    local = Path(paths.uri).is_dir()
    return StatusSnapshot(
        daemon=None,
        index=paths.uri,
        index_bytes=dir_size(Path(paths.uri)) if local else None,
        sources=tuple(sources),
        stopped_state=state,
        stopped_reason=reason,
        stopped_pid=pid,
    )


def stopped_status(
    paths: IndexPaths,
    *,
    state: str = "stopped",
    reason: str | None = None,
    pid: int | None = None,
) -> dict[str, Any]:
    """``stopped_snapshot`` as the JSON document the daemon's ``status`` answers."""
    return document(stopped_snapshot(paths, state=state, reason=reason, pid=pid))
