"""The chunker's shortcuts give what the long way gives.

Chunks are built without the frozen dataclass's ``__init__`` and pickled as their field
values; Python signatures are read from the source when no comment can lie between a
declaration and its body, and docstrings are looked up only where a body starts like a
string literal.
"""

from __future__ import annotations

import dataclasses
import pickle
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import pytest

from codechunkd.chunking.chunker import Chunk, _new_chunk, chunk
from codechunkd.chunking.languages import get_parser
from codechunkd.chunking.references import Ref
from codechunkd.chunking.rules import body_of, rules_for

_STDLIB = Path(sysconfig.get_paths()["stdlib"])


def _zero(texts: Sequence[str]) -> list[int]:
    return [0] * len(texts)


def test_new_chunk_equals_the_dataclass_constructor() -> None:
    """The fast ``_new_chunk`` builds a Chunk equal, hash-equal and repr-equal to the
    constructor's, and as frozen."""
    values = {
        "id": "0" * 32,
        "path": "a.py",
        "language": "python",
        "kind": "function",
        "symbol": "f",
        "parent_id": None,
        "start_line": 1,
        "end_line": 2,
        "start_byte": 0,
        "end_byte": 9,
        "content": "def f(): 1",
        "content_hash": "h",
        "token_count": 3,
        "signature": "def f()",
        "docstring": "",
        "embed_text": "function f\ndef f(): 1",
        "synthetic": False,
        "names": ("f",),
        "part": 0,
        "refs": (Ref("g", "", "call", 1, 9),),
    }
    expected = Chunk(**values)  # type: ignore[arg-type]
    built = _new_chunk(*(values[f.name] for f in dataclasses.fields(Chunk)))
    assert type(built) is Chunk
    assert built == expected and hash(built) == hash(expected) and repr(built) == repr(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.kind = "class"  # type: ignore[misc]


def test_chunks_survive_pickling() -> None:
    """Chunks built by the fast path pickle and unpickle to equal Chunks (the prepare
    thread and child processes pass them on)."""
    source = (_STDLIB / "argparse.py").read_bytes()
    chunks = chunk("argparse.py", source, count_tokens=_zero)
    again = pickle.loads(pickle.dumps(chunks, protocol=pickle.HIGHEST_PROTOCOL))  # noqa: S301
    assert again == chunks
    assert all(type(c) is Chunk for c in again)


_TRICKY = b'''\
def a(x):  # trailing comment
    pass


def b(y): \\
    pass


class C(Base):  # a comment
    def m(self, s="#"):
        return s

    def n(self) -> "T":
        # a comment first (tree-sitter puts it before the body)
        "Still the docstring."

    def o(self):
        rb"""Raw doc."""

    def p(self): "one-liner"


def q(
    a,  # the first
    b,
):
    """Doc."""
'''


def test_python_signatures_and_docstrings_with_comments_around() -> None:
    """Signatures and docstrings are found exactly despite comments, line continuations,
    string defaults and raw or one-line docstrings."""
    chunks = chunk("t.py", _TRICKY, count_tokens=_zero)
    got = {c.symbol: (c.signature, c.docstring) for c in chunks if c.signature}
    assert got == {
        "a": ("def a(x)", ""),
        "b": ("def b(y): \\", ""),
        "C": ("class C(Base)", ""),
        "C.m": ('def m(self, s="#")', ""),
        "C.n": ('def n(self) -> "T"', "Still the docstring."),
        "C.o": ("def o(self)", "Raw doc."),
        "C.p": ("def p(self)", "one-liner"),
        "q": ("def q(\n    a,  # the first\n    b,\n)", "Doc."),
    }


@pytest.mark.parametrize("name", ["argparse.py", "typing.py", "dataclasses.py"])
def test_python_signature_shortcut_equals_the_tree_walk(name: str) -> None:
    """The byte-scanning signature shortcut gives the same text as the full tree walk on
    every definition of a large stdlib module."""
    from codechunkd.chunking.signatures import signature_text

    source = (_STDLIB / name).read_bytes()
    tree = get_parser("python").parse(source)
    fast = rules_for("python")
    slow = dataclasses.replace(fast, extras_starts=b"")
    todo = [tree.root_node]
    checked = 0
    while todo:
        node = todo.pop()
        todo.extend(node.children)
        if node.type in ("function_definition", "class_definition"):
            body = body_of(node)
            assert signature_text(source, node, body, fast) == signature_text(
                source, node, body, slow
            )
            checked += 1
    assert checked > 50
