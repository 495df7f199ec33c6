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


_OPENS = tuple(o for o in OPENERS if o != ",")
"""How a statement ends when the line after it is its body: an item of a list (``a,``) is
followed by its siblings; a bracket left open is followed by no logical line at all."""
_BODY = (":", "{", "=>", " do", " then")
"""How a line ends when the next logical line is its block's body, one level in."""
_CONTINUES = re.compile(r"(:(?!:)|\.(?!\.)|&&|\|\||\?)")
"""How a line starts when it goes on with the statement above it: a method chained
(``.then(…)``), a condition (``&& ok``), a C++ constructor's initializers (``: Base(x)``)."""
_COMMENT_LINE = re.compile(r"\*(\s|/|$)")
"""A line of a ``/* … */`` comment (`` * text``), in a language with ``//`` comments."""
_COMMENT_MARKS = {
    "//": "c cpp cuda objc csharp java kotlin scala groovy go rust javascript typescript tsx "
    "swift dart php d zig odin solidity glsl hlsl wgsl haxe proto thrift verilog",
    "#": "python ruby bash fish perl r cmake yaml toml elixir nim julia tcl make dockerfile "
    "powershell starlark gdscript mojo meson nix awk",
    "--": "lua sql haskell elm ada purescript agda lean vhdl",
}
_COMMENTS = {language: mark for mark, names in _COMMENT_MARKS.items() for language in names.split()}
"""How a language starts a comment to the end of its line."""
_STRINGS = {
    "python": ('"""', "'''"),
    **dict.fromkeys(["javascript", "typescript", "tsx", "go"], ("`",)),
}
"""What opens and closes a string that may span lines."""


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _step(indents: list[str]) -> str:
    """One indentation level: the smallest rise between the body's levels (else 4 spaces)."""
    if any(i.startswith("\t") for i in indents):
        return "\t"
    widths = sorted({len(i) for i in indents})
    rises = [b - a for a, b in itertools.pairwise(widths)]
    return " " * (min(rises) if rises else 4)


def first_line_indent(text: str, language: str = "") -> str:
    """The indentation the chunk's first line had in its file (worked out; "" when flush).

    Read from the chunk's logical lines (:func:`_logical`): not the lines of a bracket
    left open (a signature or a call over several lines, aligned anywhere) nor of a
    multi-line string or comment (a docstring's text), whose columns say nothing of the
    code's levels.  The deepest line that closes a block above the body's level closed
    the first line's (``}``, ``end``); else a first statement that opens a block (ends
    in ``:``, ``{``, …) sits one level left of the next line, unless a later line is
    left of that one (then the first was its sibling); any other first line (a
    decorator, a comment, a list's item) sits at the level of the lines after it.  A
    chunk of no other logical line (a docstring alone, a doc comment) is read from the
    levels of all its lines.  ``language`` says how comments and multi-line strings are
    written; without it, neither is looked for.
    """
    lines = text.splitlines()
    if not lines or _indent(lines[0]):
        return _indent(lines[0]) if lines else ""
    first_end, rest, rises = _logical(lines, language)
    closers = [i for i, code in rest if CLOSER.match(code)]
    body = [i for i, code in rest if not CLOSER.match(code)]
    if not body:
        after = next((line for line in lines[1:] if line.strip()), "")
        if lines[0].startswith("/*") and _COMMENT_LINE.match(after.lstrip()) and _indent(after):
            return _indent(after)[:-1]  # `` * text`` sits one column right of ``/**``
        return _by_levels(text)
    least = min(body, key=len)
    if not first_end.endswith(_OPENS):
        return least  # a decorator, a comment, a statement: the next line is its sibling
    shallower = [i for i in closers if len(i) < len(least)]
    if shallower:
        return max(shallower, key=len)
    if not least:
        return ""
    below = rest[0][0]
    siblings = [i for i in body if len(i) < len(below)]
    if siblings:
        return max(siblings, key=len)
    if any(i.startswith("\t") for i in body):
        step = "\t"
    else:
        step = " " * min(rises) if rises else _step(body)
    return below[: -len(step)] if len(below) > len(step) else ""


def _logical(lines: list[str], language: str) -> tuple[str, list[tuple[str, str]], list[int]]:
    """The code of the chunk's first statement (its last line's, cut of strings and a
    comment), the indentation and code of each logical line after it, and the rises from
    a line that opens a block (``:``, ``{``) to the next logical line.  A line inside a
    bracket left open is no logical line, but a block opened there is read as its own (a
    callback: ``operate((source, subscriber) => {``)."""
    comment = _COMMENTS.get(language)
    delimiters = _STRINGS.get(language, ())
    first_end: str | None = None
    rest: list[tuple[str, str]] = []
    rises: list[int] = []
    depth = 0
    blocks: list[int] = []  # the bracket depth each open ``{`` was opened at
    open_string: str | None = None
    opened: str | None = None  # the indentation of a line whose next line is its body
    for raw in lines:
        if open_string is not None:
            closed = "*/" in raw if open_string == "*/" else raw.count(open_string) % 2
            open_string = None if closed else open_string
            continue
        if not raw.strip():
            continue
        indent = _indent(raw)
        if comment == "//" and _COMMENT_LINE.match(raw.lstrip()):
            code = "*"  # a line of a block comment
        else:
            code = raw
            if comment == "//" and "/*" in raw and "*/" not in raw[raw.index("/*") :]:
                open_string, code = "*/", raw[: raw.index("/*")]
            code = _code(code, comment)
            for d in delimiters:
                if open_string is None and code.count(d) % 2:
                    open_string, code = d, code[: code.index(d)]
            code = code.strip()
        if code.startswith("}") and blocks:
            depth = blocks.pop()
        at_start = depth == 0
        depth = max(0, depth + sum(map(code.count, "([")) - sum(map(code.count, ")]")))
        if code.endswith("{"):
            blocks.append(depth)
            depth = 0
        if at_start and comment and _CONTINUES.match(code):  # ``.then(…)``, ``: base(x) {``
            at_start = False
            if not rest:
                first_end = None  # the first statement goes on
        if first_end is None:  # (the first line's columns are not the file's)
            if depth == 0 and not any(blocks):
                first_end = code
            continue
        if at_start:
            rest.append((indent, code))
            if opened is not None and len(indent) > len(opened):
                rises.append(len(indent) - len(opened))
            opened = None
        if code.endswith(_BODY) and (depth == 0 or code.endswith("{")):
            opened = indent
    return first_end or "", rest, rises


def _code(line: str, comment: str | None) -> str:
    """``line`` with each string literal emptied and a trailing comment cut (roughly: a
    quote with no other on its line is kept, an apostrophe or a Rust lifetime).  In one
    pass: once a quote finds no closing one, the same quote later is taken as a character
    (``'\\'\\'\\'…`` would have scanned the rest of the line from each)."""
    out = []
    unclosed: set[str] = set()
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c in "\"'" and c not in unclosed:
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            if j < n:
                out.append('""')
                i = j + 1
                continue
            unclosed.add(c)
        elif comment and line.startswith(comment, i) and (i == 0 or line[i - 1] in " \t"):
            break
        out.append(c)
        i += 1
    return "".join(out).rstrip()


def _by_levels(text: str) -> str:
    """The first line's indentation from the levels of all the lines below it.

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


def dedent(text: str, language: str = "") -> str:
    """``text`` with its first line re-indented as in its file, then dedented as a block
    (``language``: the chunk's, which says how its comments and strings are written)."""
    indent = first_line_indent(text, language)
    if not indent or _indent(text):
        return textwrap.dedent(text)
    return textwrap.dedent(indent + text)


__all__ = ["dedent", "first_line_indent"]
