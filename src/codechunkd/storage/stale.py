"""Hits whose file on disk no longer matches the indexed blob (``search --stale``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from codechunkd.git import worktree
from codechunkd.storage.search import Hit


def mark_stale(hits: Sequence[Hit]) -> list[Hit]:
    """Flag hits whose file on disk no longer has the indexed blob (working trees only).

    The file is read as the indexer reads it (``git/worktree.py``): a FIFO that replaced it
    does not block the search, and a symlink is its target's text, never what it points to
    (outside the tree, perhaps).  A file that cannot be read says nothing: not stale."""
    out = []
    for h in hits:
        if not os.path.exists(os.path.join(h.repo, ".git")):  # a ref source: no working tree
            out.append(h)
            continue
        try:
            stale = worktree.blob_of(h.repo, h.path) != h.blob
        except OSError as exc:
            stale = not os.path.isdir(h.repo) or worktree.is_absent(exc)
        out.append(replace(h, stale=stale))
    return out
