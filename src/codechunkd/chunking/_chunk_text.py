"""Splitters for prose: plain text (paragraphs, then lines) and reStructuredText sections."""

from __future__ import annotations

import re
from typing import Final

from tree_sitter import Node

from codechunkd.chunking._chunk_code import CodeSplitter, Piece
from codechunkd.chunking.cuts import line_cuts, nws_size
from codechunkd.chunking.rules import Rules

__all__ = ["split_rst", "split_text"]

_BLANK: Final = re.compile(rb"\n[ \t\r\f\v]*\n")


def split_text(src: bytes, budget: int, lo: int = 0, hi: int | None = None) -> list[Piece]:
    """Paragraphs merged greedily up to the budget; a longer paragraph is cut at lines."""
    hi = len(src) if hi is None else hi
    starts = [lo] + [m.end() for m in _BLANK.finditer(src, lo, hi)]
    bounds: list[int] = [lo]
    size = 0
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else hi
        n = nws_size(src[s:e])
        if n > budget:
            if size and s > bounds[-1]:
                bounds.append(s)
            bounds.extend(line_cuts(src, s, e, budget))
            if e < hi:
                bounds.append(e)
            size = 0
        elif size + n > budget and s > bounds[-1]:
            bounds.append(s)
            size = n
        else:
            size += n
    bounds.append(hi)
    return [Piece(bounds[i], bounds[i + 1], "text", "", (), None) for i in range(len(bounds) - 1)]


_NO_DEFS: Final = Rules(generic=False)


def split_rst(src: bytes, root: Node, budget: int) -> list[Piece]:
    """reStructuredText by heading sections (the grammar's sections hold only the title).

    Levels follow the order in which adornment styles first appear, as docutils does.
    """
    children = root.children
    levels: dict[tuple[str, bool], int] = {}
    path: list[str] = []
    regions: list[tuple[int, list[Node], str]] = []  # start, children, heading path
    current: list[Node] = []
    current_start = 0
    current_path = ""
    for c in children:
        if c.type == "section":
            if current:
                regions.append((current_start, current, current_path))
            style = _style(c)
            level = levels.setdefault(style, len(levels))
            title = _title(c)
            del path[level:]
            path.extend([""] * (level - len(path)))
            path.append(title)
            current_path = " > ".join(p for p in path if p)
            current = [c]
            current_start = c.start_byte
        else:
            current.append(c)
    if current:
        regions.append((current_start, current, current_path))
    splitter = CodeSplitter(src, _NO_DEFS, budget, merge_siblings=False)
    n = len(src)
    for i, (start, nodes, symbol) in enumerate(regions):
        a = 0 if i == 0 else start
        b = regions[i + 1][0] if i + 1 < len(regions) else n
        if nws_size(src[a:b]) <= budget:
            splitter.out.append(Piece(a, b, "section", symbol, (), None))
        else:
            splitter.split_children(nodes, a, b, kind="section", symbol=symbol)
    if not regions:
        return split_text(src, budget)
    return splitter.out


def _style(section: Node) -> tuple[str, bool]:
    adornments = [c for c in section.children if c.type == "adornment"]
    char = (adornments[-1].text or b"=")[:1].decode("ascii", "replace") if adornments else "="
    overline = bool(adornments) and adornments[0].start_byte < section.children[0].end_byte
    return char, overline and len(adornments) > 1


def _title(section: Node) -> str:
    for c in section.named_children:
        if c.type == "title":
            return (c.text or b"").decode("utf-8", "replace").strip()
    return ""
