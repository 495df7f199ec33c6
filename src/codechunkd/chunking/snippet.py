"""A chunk's text as a reader should see it: dedented as one block.

A chunk starts where its syntax node starts, so its first line has lost the indentation
in front of it while the lines below keep the file's: a method reads

    def distance_to(self, other):
            return haversine(self, other)

``dedent`` gives the first line back its column, worked out from the lines below (the
index does not keep columns), and then takes the common indentation off every line, so
the snippet shows the method as it sits in its file, moved to the left margin.  Shared by
``codechunkd search`` and the MCP server; the indexed text itself is never changed.
"""

from __future__ import annotations

import itertools
import re
import textwrap

OPENERS = (":", "{", "(", "[", "=>", "->", "=", ",", "\\", " do", " then", "|")
"""How a line ends when the lines after it are its body (deeper), not its siblings."""
CLOSER = re.compile(r"[)\]}]|end\b")
"""How a line starts when it closes a block (``}``, ``)``, ``end``)."""


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _step(indents: list[str]) -> str:
    """One indentation level: the smallest rise between the body's levels (else 4 spaces)."""
    if any(i.startswith("\t") for i in indents):
        return "\t"
    widths = sorted({len(i) for i in indents})
    rises = [b - a for a, b in itertools.pairwise(widths)]
    return " " * (min(rises) if rises else 4)


def first_line_indent(text: str) -> str:
    """The indentation the chunk's first line had in its file (worked out; "" when flush).

    The deepest line that closes a block above the body's level closed the first line's
    (``}``, ``):``, ``end``; a closer further left belongs to an enclosing block).  Without
    one, a first line that opens a block (ends in ``:``, ``{``, …) sits one level left of
    its body, and any other (a decorator, a comment) at the level of the line after it.
    """
    lines = text.splitlines()
    if not lines or _indent(lines[0]):
        return _indent(lines[0]) if lines else ""
    rest = [line for line in lines[1:] if line.strip()]
    if not rest:
        return ""
    closers = [_indent(line) for line in rest if CLOSER.match(line.lstrip())]
    body = [_indent(line) for line in rest if not CLOSER.match(line.lstrip())] or closers
    least = min(body, key=len)
    shallower = [i for i in closers if len(i) < len(least)]
    if shallower:
        return max(shallower, key=len)
    if not least:
        return ""
    if lines[0].rstrip().endswith(OPENERS):
        step = _step(body)
        return least[: -len(step)] if len(least) > len(step) else ""
    return least  # a decorator, a comment, a statement: the next line is its sibling


def dedent(text: str) -> str:
    """``text`` with its first line re-indented as in its file, then dedented as a block."""
    indent = first_line_indent(text)
    if not indent or _indent(text):
        return textwrap.dedent(text)
    return textwrap.dedent(indent + text)


__all__ = ["dedent", "first_line_indent"]
