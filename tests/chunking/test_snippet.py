"""A chunk's text dedented as one block (#32 item 8): the first line gets its column back.

The chunks here are cut by the real chunker from real files, so the test follows what the
index stores: a chunk starts at its node, its first line unindented, the rest as in the file.
"""

from __future__ import annotations

import textwrap

import pytest
from tests.conftest import finishes_within

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


NOISY_PY = '''class Renderer:
    """
    Replace a field.

    - The default produces a formatted string via the built-in traceback
      formatting.
     1. An odd column in the docstring.
    """

    def render(self, x):  # noqa: C901
        return x

    def make_transport(self, sock, protocol,
                                 address=None, waiter=None):
        return Transport(self, sock, protocol,
                                          address, waiter)


def validate(model, data, check_extra):
    values = {}
    if check_extra:
        extra = data.keys() - values.keys()
        if extra:
            values.update(extra)

    for validator in model.validators:
        values = validator(values)
    return values
'''
CALLBACK_TS = """export function withLatestFrom<T>(...inputs: any[]) {
  return operate((source, subscriber) => {
    const len = inputs.length;
    source.subscribe(
      createOperatorSubscriber(subscriber, (value) => {
        subscriber.next([value, len]);
      })
    );
  });
}

export class Scheduler {
  /**
   * A getter for the current time.
   */
  now(): number {
    return Date.now();
  }
}
"""

CTOR_CPP = """namespace llvm {
class Builder {
public:
  explicit Builder(Block *TheBB, Node *Tag = nullptr,
                   ArrayRef<Def> Bundles = None)
      : BuilderBase(TheBB->getContext(), Tag,
                    Bundles) {
    SetInsertPoint(TheBB);
  }
};
}
"""


def _piece(path: str, source: str, first: str) -> str:
    """The chunk (or, for a line no chunk begins at, the text of a block split off a
    definition) whose first line is ``first``, as the index stores it."""
    for c in chunk(path, source.encode()):
        if c.content.splitlines()[0].strip() == first:
            return c.content
    start = source.index(first)
    end = source.index("\n\n", start)
    return source[start:end]


@pytest.mark.parametrize(
    ("path", "source", "first", "language", "column"),
    [
        # a class whose docstring has a line one column off: the levels' smallest rise was 1
        ("r.py", NOISY_PY, "class Renderer:", "python", 0),
        # a comment after the colon: the line did not read as opening a block
        ("r.py", NOISY_PY, "def render(self, x):  # noqa: C901", "python", 4),
        # a signature and a call over lines aligned to their brackets: not levels
        ("r.py", NOISY_PY, "def make_transport(self, sock, protocol,", "python", 4),
        # a block whose siblings follow it: the first line is one of them, not their parent
        ("r.py", NOISY_PY, "if check_extra:", "python", 4),
        # a callback's body inside a call left open is code all the same
        ("w.ts", CALLBACK_TS, "return operate((source, subscriber) => {", "typescript", 2),
        # a doc comment, then its method (and the class's closing brace, joined to it)
        ("w.ts", CALLBACK_TS, "/**", "typescript", 2),
        # a constructor's initializers go on with its signature, whose body is one level in
        ("b.h", CTOR_CPP, "explicit Builder(Block *TheBB, Node *Tag = nullptr,", "cpp", 2),
    ],
)
def test_a_chunk_reads_as_in_its_file_whatever_its_brackets_strings_and_comments(
    path: str, source: str, first: str, language: str, column: int
) -> None:
    """Lines inside an open bracket, a docstring or a comment do not count as levels; the
    column is read from the code's own lines (each case was shown at the wrong column)."""
    content = _piece(path, source, first)
    assert content.splitlines()[0] == first
    assert first_line_indent(content, language) == " " * column, content
    assert dedent(content, language) == textwrap.dedent(" " * column + content)


def test_a_hostile_line_is_read_in_linear_time() -> None:
    """A line of 100,000 escaped quotes (``'\\'\\'…``): each quote looked for its closing
    one to the end of the line (hours); one pass now.  The deadline is a hang detector."""
    code = (
        "from codechunkd.chunking.snippet import dedent\n"
        'line = "\'" + "\\\\\'" * 100_000\n'
        "text = 'def f(x):\\n    return ' + line + '\\n    pass\\n'\n"
        "assert dedent(text, 'python').startswith('def f(x):')\n"
        "assert dedent(text[4:], 'javascript')\n"
    )
    finishes_within(code, 60, "putting back the column of a chunk with a line of 100,000 quotes")
