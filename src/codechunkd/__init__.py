"""codechunkd: a git-aware background indexer of syntax-aware code chunks.

Public API:

- ``open_index(path)``: read an index (search, rows, files, sources); see ``docs/schema.md``.
- ``chunk(path, source)``: chunk one file, with no repository and no index.
- ``chunk_many(files, workers=N)``: ``chunk`` over many files on worker processes.

Both import their machinery lazily, so ``import codechunkd`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["__version__", "chunk", "chunk_many", "open_index"]

if TYPE_CHECKING:
    from codechunkd.chunking.chunker import chunk, chunk_many
    from codechunkd.storage.reader import open_index


def __getattr__(name: str) -> Any:
    if name == "open_index":
        from codechunkd.storage.reader import open_index

        return open_index
    if name == "chunk":
        from codechunkd.chunking.chunker import chunk

        return chunk
    if name == "chunk_many":
        from codechunkd.chunking.chunker import chunk_many

        return chunk_many
    raise AttributeError(name)
