"""Sizes and cut points of text: the content budget's unit (non-whitespace characters) and
where a span too big for it is cut (line breaks, then whitespace inside a line).

Pure functions of bytes: no tree, no rules.  The splitters (``_chunk_code``,
``_chunk_text``) and the signature text use them.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["NOT_COUNTED", "line_cuts", "nws_size", "truncate"]

_WS: Final = b" \t\r\n\f\v"
# Non-whitespace *characters*: drop ASCII whitespace and UTF-8 continuation bytes.
NOT_COUNTED: Final = _WS + bytes(range(0x80, 0xC0))
_WORD: Final = re.compile(rb"[^ \t\r\n\f\v]+")


def nws_size(data: bytes) -> int:
    """Non-whitespace characters of UTF-8 ``data`` (the unit of the content budget)."""
    return len(data.translate(None, NOT_COUNTED))


def line_cuts(src: bytes, a: int, b: int, budget: int) -> list[int]:
    """Cut points inside ``[a, b)``: at line breaks, and at whitespace inside over-long lines."""
    cuts: list[int] = []
    size = 0
    pos = a
    while pos < b:
        nl = src.find(b"\n", pos, b)
        line_end = b if nl < 0 else nl + 1
        s = nws_size(src[pos:line_end])
        if s > budget:
            if size and pos > a:
                cuts.append(pos)
            _word_cuts(src, pos, line_end, budget, cuts)
            if line_end < b:
                cuts.append(line_end)
            size = 0
        elif size + s > budget:
            if pos > a:
                cuts.append(pos)
            size = s
        else:
            size += s
        pos = line_end
    return cuts


def _word_cuts(src: bytes, a: int, b: int, budget: int, cuts: list[int]) -> None:
    """Greedy cuts at whitespace inside one line; a word longer than the budget stays whole."""
    size = 0
    for m in _WORD.finditer(src, a, b):
        w = nws_size(m.group())
        if size and size + w > budget:
            cuts.append(m.start())
            size = 0
        size += w


def truncate(text: bytes, budget: int) -> bytes:
    out: list[bytes] = []
    size = 0
    for line in text.splitlines(keepends=True):
        s = nws_size(line)
        if size + s > budget - 3:
            out.append(b"    ...\n")
            break
        out.append(line)
        size += s
    return b"".join(out)
