"""A chunk's text dedented as one block (#32 item 8): the first line gets its column back.

The chunks here are cut by the real chunker from real files, so the test follows what the
index stores: a chunk starts at its node, its first line unindented, the rest as in the file.
"""

from __future__ import annotations

import textwrap

import pytest

from codechunkd.chunking.chunker import chunk
from codechunkd.chunking.snippet import dedent, first_line_indent

PY = '''class Point:
    """A point."""

    def distance_to(self, other):
        """Great-circle distance in km."""
        if other is None:
            return 0.0
        return haversine(self, other)

    @property
    def lat(self):
        return self._lat

    def build(
        self,
        x,
    ):
        return x
'''
TS = """export class Shapes {
  area(r: number): number {
    if (r < 0) {
      throw new Error("negative");
    }
    return Math.PI * r * r;
  }

  name(): string {
    return "shapes";
  }
}
"""


def _chunk(path: str, source: str, symbol: str) -> str:
    found = [
        c for c in chunk(path, source.encode()) if c.symbol.endswith(symbol) and not c.synthetic
    ]
    assert found, symbol
    return found[0].content


@pytest.mark.parametrize(
    ("path", "source", "symbol", "column"),
    [
        ("geo.py", PY, "distance_to", 4),
        ("geo.py", PY, "lat", 4),  # a decorator first: the def below is its sibling
        ("geo.py", PY, "build", 4),  # a signature over lines, closed at the def's column
        ("shapes.ts", TS, "area", 2),  # two-space indentation, nested levels
        ("shapes.ts", TS, "name", 2),  # one level only: the closing brace gives the column
    ],
)
def test_a_method_reads_as_in_its_file(path: str, source: str, symbol: str, column: int) -> None:
    """The dedented snippet is the method's lines of the file, moved to the left margin."""
    content = _chunk(path, source, symbol)
    assert not content.startswith(" ")  # what the index stores: the first line unindented
    shown = dedent(content)
    as_in_file = textwrap.dedent(
        "\n".join(
            " " * column + line if i == 0 else line for i, line in enumerate(content.splitlines())
        )
    )
    assert shown == as_in_file
    assert first_line_indent(content) == " " * column
    assert any(line.startswith(" ") for line in shown.splitlines())  # the body stays inside


def test_flush_text_is_left_as_it_is() -> None:
    """A top-level function, a one-line chunk, prose: nothing to move."""
    top = "def f(x):\n    return x\n"
    assert dedent(top) == top
    assert dedent("x = 1") == "x = 1"
    prose = "# Title\n\nSome words.\n"
    assert dedent(prose) == prose
