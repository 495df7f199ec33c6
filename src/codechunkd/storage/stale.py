"""Hits whose file on disk no longer matches the indexed blob (``search --stale``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from codechunkd.storage.search import Hit


def mark_stale(hits: Sequence[Hit]) -> list[Hit]:
    """Flag hits whose file on disk no longer has the indexed blob (working trees only)."""
    import pygit2

    out = []
    for h in hits:
        if not os.path.exists(os.path.join(h.repo, ".git")):  # a ref source: no working tree
            out.append(h)
            continue
        full = os.path.join(h.repo, h.path)
        try:
            stale = str(pygit2.hashfile(full)) != h.blob
        except (OSError, pygit2.GitError):
            stale = not os.path.isdir(h.repo) or not os.path.lexists(full)
        out.append(replace(h, stale=stale))
    return out
