"""Fixtures of the chunker tests: the real tokenizer and an invariant checker."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence

import pytest

from codechunkd.chunking.chunker import Chunk

_WS = frozenset(b" \t\r\n\f\v")

Checker = Callable[[bytes, Sequence[Chunk], int], None]


def nws(text: str) -> int:
    """Non-whitespace characters, as the budget counts them."""
    return sum(1 for ch in text if ch not in " \t\r\n\f\v")


def check_invariants(source: bytes, chunks: Sequence[Chunk], budget: int) -> None:
    """Coverage, exact spans, budget, lines, unique ids and resolvable parents."""
    cover = bytearray(len(source))
    newlines = [i for i, b in enumerate(source) if b == 10]
    ids = [c.id for c in chunks]
    assert len(ids) == len(set(ids)), "ids are unique within a file"
    known = set(ids)
    previous_end = 0
    for c in chunks:
        assert c.parent_id is None or c.parent_id in known
        assert c.parent_id != c.id
        assert 1 <= c.start_line <= c.end_line
        if c.synthetic:
            continue
        assert c.content == source[c.start_byte : c.end_byte].decode("utf-8")
        assert c.content == c.content.strip(" \t\r\n\f\v"), "spans are trimmed"
        assert c.start_byte >= previous_end, "leaf chunks are in file order"
        previous_end = c.end_byte
        assert c.start_line == bisect.bisect_left(newlines, c.start_byte) + 1
        assert c.end_line == bisect.bisect_left(newlines, c.end_byte - 1) + 1
        cover[c.start_byte : c.end_byte] = bytes(x + 1 for x in cover[c.start_byte : c.end_byte])
        size = nws(c.content)
        if size > budget:
            # only a single word longer than the budget may exceed it
            words = [w for w in re.split(r"[ \t\r\n\f\v]+", c.content) if w]
            assert len(words) == 1 or max(nws(w) for w in words) > budget, (
                f"{c.kind} {c.symbol} lines {c.start_line}-{c.end_line}: {size} > {budget}"
            )
    for i, (b, n) in enumerate(zip(source, cover, strict=True)):
        if n != 1 and b not in _WS:
            raise AssertionError(f"byte {i} ({source[i : i + 20]!r}) covered {n} times")


@pytest.fixture
def check() -> Checker:
    """The invariant checker."""
    return check_invariants
