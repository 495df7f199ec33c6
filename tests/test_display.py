"""``display.printable``: text from a repository shown on one line, whatever it holds."""

from __future__ import annotations

import os

import pytest

from codechunkd.display import printable


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
