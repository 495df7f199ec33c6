"""Checking ``state.json``: the copy of ``repos`` that ``status`` reads (stdlib only).

Kept apart from ``store`` (which imports pyarrow) so that ``status`` and the damage
checks can use it for free.
"""

from __future__ import annotations

import json
from pathlib import Path

from codechunkd.storage._errors import one_line

_STATE_KEYS = ("source", "kind", "repo", "git_dir", "ref", "branch", "commit", "pending", "files")


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
