"""Text from a repository as it may be shown on one line: file names, symbols, snippets.

A file name is whatever bytes the file system holds: a newline in one would start a
line of its own in ``codechunkd search`` (forging a hit), an escape sequence would
drive the terminal, and a name that is not UTF-8 arrives from the OS with Python's
surrogate escapes (``'\\udcff'``), which cannot even be written to a UTF-8 stream.
``printable`` is the one rendering of such text for people: every door that prints
paths or chunk text as text (the CLI, MCP's text answers) goes through it.  JSON
output keeps the real string (JSON escapes control characters itself).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["one_line", "printable"]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: Unicode's bidirectional overrides and isolates: they reorder what a terminal shows
#: (the "Trojan Source" trick), so a name holding one could pass for another.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_LINE_BREAKS = frozenset({"Zl", "Zp"})  # U+2028, U+2029


def _escape(c: str, keep_tab: bool) -> str:
    if c == "\t" and keep_tab:
        return c
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def _needs_escape(c: str) -> bool:
    if c.isprintable() or c == " ":
        return False
    category = unicodedata.category(c)
    return category in ("Cc", "Cs") or category in _LINE_BREAKS or c in _BIDI


def printable(text: str, *, keep_tab: bool = False) -> str:
    """``text`` with control characters, line and paragraph separators, bidirectional
    controls and undecodable bytes written as backslash escapes (``\\n``, ``\\x1b``,
    ``\\xff``, ``\\u202e``): the result is one line of plain text and can always be
    encoded.  Other characters, backslashes included, are kept as they are; ``keep_tab``
    keeps tabs (indentation in a snippet)."""
    if text.isprintable():  # the common case: nothing to look at
        return text
    return "".join(_escape(c, keep_tab) if _needs_escape(c) else c for c in text)


def called_by(callers: Sequence[Mapping[str, Any]], *, ids: bool = False) -> str:
    """A hit's callers on one line: ``main (app.py:7), Engine.run (pkg/core.py:12)``, each
    with its chunk id when ``ids``; a guess says so (``by-name``)."""
    parts = []
    for c in callers:
        where = f"{printable(str(c.get('path', '')))}:{c.get('line')}"
        if ids:
            where += f", id {c.get('id')}"
        guess = ", by name" if c.get("how") == "by-name" else ""
        parts.append(f"{printable(str(c.get('symbol') or '-'))} ({where}{guess})")
    return ", ".join(parts)


_AFTER_OPEN = re.compile(r"([(\[{]) ")
_BEFORE_CLOSE = re.compile(r",? ([)\]}])")


def one_line(code: str, limit: int) -> str:
    """A signature written over several lines, as one: ``def f(\\n    a,\\n    b,\\n) -> T``
    is ``def f(a, b) -> T``, cut to ``limit`` characters (``…`` last) when longer."""
    text = _BEFORE_CLOSE.sub(r"\1", _AFTER_OPEN.sub(r"\1", " ".join(code.split())))
    return text if len(text) <= limit else text[: limit - 1] + "…"
