"""Summaries of chunks.

Extractive summaries are made at index time with no LLM: the first paragraph of
the docstring when there is one, else the signature, marked ``extractive``.
"""

from __future__ import annotations

from codechunkd.indexer.chunker import Chunk

EXTRACTIVE = "extractive"
MAX_SUMMARY_CHARS = 300


def extractive_summary(chunk: Chunk) -> str:
    doc = chunk.docstring.strip()
    if doc:
        first = doc.split("\n\n", 1)[0]
        text = " ".join(first.split())
    else:
        text = " ".join(chunk.signature.split())
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[: MAX_SUMMARY_CHARS - 1].rstrip() + "…"
    return text
