"""The shared vocabulary of codechunkd: names for the ids that flow between stages."""

from __future__ import annotations

from typing import TypeAlias

BlobId: TypeAlias = str
"""A git blob id (40 hex digits): the identity of one version of a file."""

CommitId: TypeAlias = str
"""A git commit id (40 hex digits)."""

ContentHash: TypeAlias = str
"""sha256 hex digest of a text (chunk content or embedded text), the key of every cache."""

SourceId: TypeAlias = str
"""Stable id of a source: one working tree, or one ref of a (bare) repository."""
