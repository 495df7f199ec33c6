"""``display.printable``: text from a repository shown on one line, whatever it holds."""

from __future__ import annotations

import os

import pytest

from codechunkd.display import one_line, printable


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("src/app.py", "src/app.py"),
        ("naïve/日本.py", "naïve/日本.py"),
        ("a\nb.py", "a\\nb.py"),
        ("a\rb\tc", "a\\rb\\tc"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("del\x7f", "del\\x7f"),
        ("c1\x85", "c1\\x85"),
        (os.fsdecode(b"bad_\xff.py"), "bad_\\xff.py"),
        ("line\u2028sep", "line\\u2028sep"),
        ("evil\u202egnp.py", "evil\\u202egnp.py"),
        ("back\\slash", "back\\slash"),
    ],
)
def test_printable_escapes_what_could_break_a_line(text: str, shown: str) -> None:
    """Control characters, line separators, bidirectional overrides and undecodable bytes
    become backslash escapes; everything else, backslashes too, is kept; the result always
    encodes as UTF-8."""
    assert printable(text) == shown
    printable(text).encode("utf-8")


def test_printable_can_keep_tabs() -> None:
    """A snippet keeps its indentation when asked (``keep_tab``), never its newlines."""
    assert printable("\tx = 1\n", keep_tab=True) == "\tx = 1\\n"


@pytest.mark.parametrize(
    ("signature", "limit", "shown"),
    [
        ("def run(self, x) -> int", 80, "def run(self, x) -> int"),
        (
            "def f(\n    a: int,\n    b: str = 'x',\n) -> None",
            80,
            "def f(a: int, b: str = 'x') -> None",
        ),
        (
            "func (s *Server) Serve(\n\tl net.Listener,\n) error",
            80,
            "func (s *Server) Serve(l net.Listener) error",
        ),
        ("def g(\n    xs: dict[\n        str, int\n    ],\n)", 80, "def g(xs: dict[str, int])"),
        ("def long_name(argument_one, argument_two)", 20, "def long_name(argum…"),
    ],
)
def test_one_line_joins_a_signature_written_over_lines(
    signature: str, limit: int, shown: str
) -> None:
    """A signature over several lines reads as written on one (an outline's and a map's
    were shown as their first line, ``def f(``, or with ``\\n`` escapes), cut to the
    limit with ``…``."""
    assert one_line(signature, limit) == shown
    assert len(one_line(signature, limit)) <= limit
