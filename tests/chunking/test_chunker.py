"""The chunker on real tree-sitter parses: boundaries, hierarchy, context, every language."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest

import codechunkd.chunking.chunker as chunker_module
from codechunkd.chunking.chunker import CHUNKER_VERSION, Chunk, CountTokens, chunk, chunk_many
from codechunkd.config.settings import ChunkingSettings

Checker = Any


def nws(text: str) -> int:
    """Non-whitespace characters, as the budget counts them."""
    return sum(1 for ch in text if ch not in " \t\r\n\f\v")


def defs(chunks: Sequence[Chunk]) -> list[tuple[str, str]]:
    """(kind, symbol) of the chunks that are definitions (not glue, not synthetic)."""
    return [
        (c.kind, c.symbol)
        for c in chunks
        if not c.synthetic and c.kind not in ("module", "block", "text")
    ]


PY = b'''"""Module doc."""
import os

LIMIT = 3


# Loads things.
@functools.cache
def load(path,
         mode="r"):
    """Load a file.

    More words.
    """
    return open(path, mode)


class DataLoader(Base):
    """Loads data."""

    batch = 32

    def __init__(self, path):
        self.path = path

    @property
    def size(self):
        return 1


if __name__ == "__main__":
    load("x")
'''


def test_python_definitions_are_chunks(count_tokens: CountTokens, check: Checker) -> None:
    """Each function and method is one chunk; a class is a synthetic header plus members;
    the file's last lines, a tiny ``if __name__ == "__main__":``, end the last chunk."""
    chunks = chunk("src/pkg/loader.py", PY, count_tokens=count_tokens)
    check(PY, chunks, 1500)
    got = [(c.kind, c.symbol, c.start_line, c.end_line, c.synthetic) for c in chunks]
    assert got == [
        ("module", "", 1, 4, False),
        ("function", "load", 7, 15, False),
        ("class", "DataLoader", 18, 28, True),
        ("block", "DataLoader", 18, 21, False),
        ("method", "DataLoader.__init__", 23, 24, False),
        ("method", "DataLoader.size", 26, 32, False),
    ]
    by_symbol = {c.symbol: c for c in chunks if c.symbol}
    load = by_symbol["load"]
    assert load.content.startswith("# Loads things.\n@functools.cache\ndef load(")
    assert load.signature == 'def load(path,\n         mode="r")'
    assert load.docstring == "Load a file.\n\nMore words."
    assert load.embed_text.startswith(
        "function load in file src/pkg/loader.py (Module doc.)\n# Loads things."
    )
    size = by_symbol["DataLoader.size"]
    assert size.embed_text.splitlines()[0] == (
        "method size in class DataLoader (Loads data.) in file src/pkg/loader.py (Module doc.)"
    )
    assert size.content.startswith("@property\n    def size(self):")


def test_python_hierarchy_and_header(count_tokens: CountTokens) -> None:
    """Methods point at the class header; top-level definitions at the module chunk."""
    chunks = chunk("loader.py", PY, count_tokens=count_tokens)
    module = chunks[0]
    header = next(c for c in chunks if c.synthetic)
    assert module.parent_id is None
    assert header.parent_id == module.id
    assert header.docstring == "Loads data."
    assert header.signature == "class DataLoader(Base)"
    assert header.content == (
        "class DataLoader(Base):\n"
        '    """Loads data."""\n\n'
        "    batch = 32\n\n"
        "    def __init__(self, path): ...\n\n"
        "    @property\n"
        "    def size(self): ..."
    )
    for c in chunks:
        if c.kind in ("method", "block"):
            assert c.parent_id == header.id
        if c.kind == "function":
            assert c.parent_id == module.id
    assert all(c.token_count == count_tokens([c.embed_text])[0] for c in chunks)


def test_sibling_definitions_are_not_merged_unless_asked(count_tokens: CountTokens) -> None:
    """Small sibling functions stay apart; ``merge_siblings`` packs them up to the budget."""
    src = b"def a():\n    return 1\n\n\ndef b():\n    return 2\n\n\ndef c():\n    return 3\n"
    apart = chunk("m.py", src, count_tokens=count_tokens)
    assert [c.symbol for c in apart] == ["a", "b", "c"]
    merged = chunk("m.py", src, ChunkingSettings(merge_siblings=True), count_tokens=count_tokens)
    assert len(merged) == 1
    assert merged[0].names == ("a", "b", "c")


def test_oversized_function_is_split_at_statements(
    count_tokens: CountTokens, check: Checker
) -> None:
    """A function over the budget is cut between statements; the first part keeps its name."""
    body = "".join(f"    value_{i} = compute_something({i}, {i} * 2)\n" for i in range(60))
    src = f'def big(x):\n    """Big."""\n{body}    return x\n'.encode()
    chunks = chunk("big.py", src, ChunkingSettings(budget=400), count_tokens=count_tokens)
    check(src, chunks, 400)
    assert len(chunks) > 3
    first, *rest = chunks
    assert (first.kind, first.symbol, first.part) == ("function", "big", 1)
    assert first.docstring == "Big."
    assert all(c.kind == "block" and c.symbol == "big" for c in rest)
    assert [c.part for c in rest] == list(range(2, len(chunks) + 1))
    assert all(c.parent_id == first.id for c in rest)
    assert all(c.content.startswith(("value_", "return")) for c in rest)


def test_definition_that_fits_is_never_cut(count_tokens: CountTokens) -> None:
    """A definition of exactly the budget is one chunk."""
    src = b"def f():\n    return 'abcdefghij'\n"
    size = nws(src.decode())
    chunks = chunk("f.py", src, ChunkingSettings(budget=size), count_tokens=count_tokens)
    assert [c.symbol for c in chunks] == ["f"]
    chunks = chunk("f.py", src, ChunkingSettings(budget=size - 1), count_tokens=count_tokens)
    assert len(chunks) == 2


def test_module_glue_is_merged_up_to_the_budget(count_tokens: CountTokens, check: Checker) -> None:
    """Non-definition statements are packed greedily, never over the budget."""
    src = "".join(f"CONSTANT_{i} = {i}\n" for i in range(200)).encode()
    chunks = chunk("c.py", src, ChunkingSettings(budget=300), count_tokens=count_tokens)
    check(src, chunks, 300)
    assert all(c.kind == "module" for c in chunks)
    assert all(200 < nws(c.content) <= 300 for c in chunks[:-1])


LANGUAGE_CASES: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "a.js",
        "import x from 'y';\n/** Adds. */\nexport function add(a, b) { return a + b; }\n"
        "class Foo extends Bar {\n  m(a) { return a; }\n  get y() { return 2; }\n}\n"
        "const g = (a) => a * 2;\n",
        [("function", "add"), ("method", "Foo.m"), ("method", "Foo.y"), ("function", "g")],
    ),
    (
        "a.ts",
        "export class A { private x = 1; m(): void {} }\n"
        "export function f(a: number): number { return a; }\n"
        "interface I { x: number }\ntype T = string;\nenum E { A, B }\n"
        "namespace N { export function h() {} }\n",
        [
            ("method", "A.m"),
            ("function", "f"),
            ("interface", "I"),
            ("type", "T"),
            ("enum", "E"),
            ("function", "N.h"),
        ],
    ),
    (
        "a.tsx",
        "export function App(): JSX.Element { return <div>hi</div>; }\nconst B = () => <span/>;\n",
        [("function", "App"), ("function", "B")],
    ),
    (
        "a.go",
        "package p\n\n// F does.\nfunc F(a int) int { return a }\n\ntype R struct{ x int }\n\n"
        "func (r *R) M() {}\n",
        [("function", "F"), ("type", "R"), ("method", "R.M")],
    ),
    (
        "a.rs",
        "use std::io;\n/// Doc.\n#[inline]\nfn f() {}\nimpl Foo { fn g(&self) {} }\n"
        "trait T { fn k() {} }\nstruct S { a: i32 }\nmod m { fn i() {} }\n",
        [
            ("function", "f"),
            ("method", "impl Foo::g"),
            ("method", "T::k"),
            ("struct", "S"),
            ("function", "m::i"),
        ],
    ),
    (
        "A.java",
        "package x;\n/** A. */\npublic class A {\n  int f;\n  A() {}\n  void m() {}\n}\n",
        [("method", "A.A"), ("method", "A.m")],
    ),
    (
        "a.c",
        "#include <x.h>\nstruct S { int a; };\nstatic int f(int x) { return x; }\n"
        "#ifdef X\nint g(void) { return 1; }\n#endif\n",
        [("struct", "S"), ("function", "f"), ("function", "g")],
    ),
    (
        "a.cpp",
        "namespace n {\nclass A {\n public:\n  void f() {}\n};\n}\n"
        "template <class T> T g(T x) { return x; }\nvoid A::h() {}\n",
        [("method", "n::A::f"), ("function", "g"), ("function", "A::h")],
    ),
    (
        "a.cs",
        "using X;\nnamespace N {\n  public class A {\n    void F() {}\n    A() {}\n  }\n}\n",
        [("method", "N.A.F"), ("method", "N.A.A")],
    ),
    (
        "a.rb",
        "require 'x'\nclass C < B\n  def f(x)\n    x\n  end\n  def self.g; end\nend\n"
        "def top; end\n",
        [("method", "C.f"), ("method", "C.g"), ("function", "top")],
    ),
    (
        "a.php",
        "<?php\nclass A {\n  public function f() {}\n}\nfunction g() {}\n",
        [("method", "A::f"), ("function", "g")],
    ),
    (
        "a.kt",
        "class A {\n  fun f() {}\n}\nfun g() {}\n",
        [("method", "A.f"), ("function", "g")],
    ),
    (
        "a.swift",
        "class A {\n  func f() {}\n}\nfunc g() {}\n",
        [("method", "A.f"), ("function", "g")],
    ),
    (
        "a.scala",
        "class A {\n  def f() = 1\n}\nobject O {\n  def g = 2\n}\n",
        [("method", "A.f"), ("method", "O.g")],
    ),
    (
        "a.sh",
        "#!/bin/bash\nset -e\n# f does.\nf() { echo; }\nfunction g { echo; }\ng\n",
        [("function", "f"), ("function", "g")],
    ),
    (
        "a.lua",
        "local M = {}\nfunction M.f() end\nlocal function g() end\nreturn M\n",
        [("function", "M.f"), ("function", "g")],
    ),
    (
        "a.sql",
        "CREATE TABLE t (a int);\nSELECT * FROM t;\nCREATE VIEW v AS SELECT 1;\n",
        [("table", "t"), ("view", "v")],
    ),
]


@pytest.mark.parametrize(
    ("path", "source", "expected"), LANGUAGE_CASES, ids=[c[0] for c in LANGUAGE_CASES]
)
def test_definitions_in_every_language(
    path: str,
    source: str,
    expected: list[tuple[str, str]],
    count_tokens: CountTokens,
    check: Checker,
) -> None:
    """Definition rules find the functions, methods and types of each language."""
    src = source.encode()
    chunks = chunk(path, src, count_tokens=count_tokens)
    check(src, chunks, 1500)
    assert defs(chunks) == expected
    assert all(c.language != "text" for c in chunks)


def test_cpp_operators_are_named(count_tokens: CountTokens, check: Checker) -> None:
    """A C++ operator is named for itself, whatever its declarator: ``D& operator=``
    (a reference declarator names no field), ``explicit operator bool``, ``operator
    std::string_view`` (its type's last part), ``D* operator->``,
    ``D& D::operator+=``; none is named for its class (``defs DenseMap`` listed them)."""
    src = (
        b"namespace llvm {\nclass DenseMap {\npublic:\n"
        b"  DenseMap& operator=(const DenseMap& o) { copyFrom(o); return *this; }\n"
        b"  bool operator==(const DenseMap& o) const { return true; }\n"
        b"  explicit operator bool() const { return true; }\n"
        b"  operator std::string_view() const { return {}; }\n"
        b"  DenseMap *operator->() { return this; }\n"
        b"  const int &get() const { return x; }\n};\n"
        b"DenseMap &DenseMap::operator+=(const DenseMap& b) { return *this; }\n}\n"
    )
    chunks = chunk("dense_map.h", src, count_tokens=count_tokens)
    check(src, chunks, 1500)
    assert defs(chunks) == [
        ("method", "llvm::DenseMap::operator="),
        ("method", "llvm::DenseMap::operator=="),
        ("method", "llvm::DenseMap::operator bool"),
        ("method", "llvm::DenseMap::operator string_view"),  # short names split at ::
        ("method", "llvm::DenseMap::operator->"),
        ("method", "llvm::DenseMap::get"),
        ("function", "llvm::DenseMap::operator+="),
    ]


def test_doc_comments_become_docstrings(count_tokens: CountTokens) -> None:
    """JSDoc, Go and Rust doc comments stay with their definition and fill ``docstring``."""
    js = chunk(
        "a.js", b"/**\n * Adds two.\n */\nfunction add(a, b) {}\n", count_tokens=count_tokens
    )
    assert (js[0].docstring, js[0].start_line) == ("Adds two.", 1)
    go = chunk(
        "a.go", b"package p\n\n// F does.\n// Really.\nfunc F() {}\n", count_tokens=count_tokens
    )
    assert go[-1].docstring == "F does.\nReally."
    rs = chunk("a.rs", b"/// Doc.\n#[inline]\nfn f() {}\n", count_tokens=count_tokens)
    assert (rs[0].docstring, rs[0].content.splitlines()[0]) == ("Doc.", "/// Doc.")


def test_blank_line_detaches_a_comment(count_tokens: CountTokens) -> None:
    """A comment separated from the next definition by a blank line is not its doc."""
    src = b"# section banner\n\ndef f():\n    pass\n"
    chunks = chunk("a.py", src, count_tokens=count_tokens)
    assert [(c.kind, c.content.splitlines()[0]) for c in chunks] == [
        ("module", "# section banner"),
        ("function", "def f():"),
    ]


MARKDOWN = b"""Preamble.

# Guide

Intro.

## Install

Words.

### Linux

```sh
apt-get install thing
apt-get install other
```

| a | b |
|---|---|
| 1 | 2 |

## Use

Use it.
"""


def test_markdown_by_heading_sections(count_tokens: CountTokens, check: Checker) -> None:
    """Sections carry the heading path; fenced code and tables are not cut."""
    chunks = chunk("README.md", MARKDOWN, ChunkingSettings(budget=60), count_tokens=count_tokens)
    check(MARKDOWN, chunks, 60)
    assert [c.symbol for c in chunks] == [
        "",
        "Guide",
        "Guide > Install",
        "Guide > Install > Linux",
        "Guide > Install > Linux",
        "Guide > Use",
    ]
    assert all(c.kind == "section" for c in chunks)
    fence = next(c for c in chunks if "```sh" in c.content)
    assert fence.content.count("```") == 2
    assert "section Guide > Install > Linux in file README.md" in fence.embed_text
    whole = chunk("README.md", MARKDOWN, count_tokens=count_tokens)
    assert [c.symbol for c in whole] == ["", "Guide"]


def test_rst_by_heading_sections(count_tokens: CountTokens, check: Checker) -> None:
    """reStructuredText sections nest by adornment order."""
    src = b"Title\n=====\n\nintro\n\nSub\n---\n\ntext\n\nOther\n=====\n\nx\n"
    chunks = chunk("doc.rst", src, count_tokens=count_tokens)
    check(src, chunks, 1500)
    assert [c.symbol for c in chunks] == ["Title", "Title > Sub", "Other"]


def test_data_files_by_keys(count_tokens: CountTokens, check: Checker) -> None:
    """JSON, YAML and TOML split by keys, recursively, with dotted key paths."""
    settings = ChunkingSettings(budget=40)
    js = b'{"name": "x", "scripts": {"build": "tsc --build all", "test": "jest --coverage"}}'
    chunks = chunk("package.json", js, settings, count_tokens=count_tokens)
    check(js, chunks, 40)
    assert {n for c in chunks for n in (c.symbol, *c.names)} >= {"scripts.build", "scripts.test"}
    yml = b"a: 1\nb:\n  c: 2222222222222222\n  d: 3333333333333333\ne: 3\n"
    chunks = chunk("x.yaml", yml, ChunkingSettings(budget=30), count_tokens=count_tokens)
    check(yml, chunks, 30)
    assert "b.d" in {n for c in chunks for n in (c.symbol, *c.names)}
    toml = b'x = 1\n[tool]\nname = "aaaaaaaaaaaaaaaaaaaaaaaa"\nmore = "bbbbbbbbbbbbbbbbbbbbbbbb"\n'
    chunks = chunk("pyproject.toml", toml, settings, count_tokens=count_tokens)
    check(toml, chunks, 40)
    assert {"tool.name", "tool.more"} <= {n for c in chunks for n in (c.symbol, *c.names)}


def test_plain_text_by_paragraphs(count_tokens: CountTokens, check: Checker) -> None:
    """Unknown files are cut at blank lines, then lines."""
    para = " ".join(["word"] * 30)
    src = f"{para}\n\n{para}\n\n{para}\n".encode()
    chunks = chunk("NOTES", src, ChunkingSettings(budget=250), count_tokens=count_tokens)
    check(src, chunks, 250)
    assert [(c.kind, c.language) for c in chunks] == [("text", "text")] * 2
    assert chunks[0].content == f"{para}\n\n{para}"


def test_generic_grammar_gets_definitions(count_tokens: CountTokens, check: Checker) -> None:
    """A grammar without its own rules still chunks by its ``*_definition`` nodes."""
    src = b"defmodule M do\n  def f(x), do: x\nend\n"
    chunks = chunk("m.ex", src, count_tokens=count_tokens)
    check(src, chunks, 1500)
    assert chunks and chunks[0].language == "elixir"
    hs = b"module M where\n\nf :: Int -> Int\nf x = x\n\ng y = y\n"
    chunks = chunk("M.hs", hs, ChunkingSettings(budget=12), count_tokens=count_tokens)
    check(hs, chunks, 12)
    assert chunks[0].language == "haskell"


def test_crlf_bom_and_tabs(count_tokens: CountTokens, check: Checker) -> None:
    """CRLF line ends, a BOM and tab indentation keep spans and lines exact."""
    src = (
        "\ufeffimport os\r\n\r\ndef f():\r\n\treturn 1\r\n\r\n"
        "class A:\r\n\tdef g(self):\r\n\t\tpass\r\n"
    )
    data = src.encode()
    chunks = chunk("a.py", data, count_tokens=count_tokens)
    check(data, chunks, 1500)
    assert chunks[0].content.startswith("\ufeffimport os")
    assert defs(chunks) == [("function", "f"), ("method", "A.g")]
    f = next(c for c in chunks if c.symbol == "f")
    assert (f.start_line, f.end_line) == (3, 4)


def test_bytes_that_are_not_utf8_are_replaced_not_fatal(count_tokens: CountTokens) -> None:
    """A Latin-1 file: spans stay byte offsets, content gets U+FFFD for the bad bytes."""
    src = "def f():\n    return 'caf\xe9'\n\n\ndef g():\n    return 2\n".encode("latin-1")
    chunks = chunk("latin.py", src, count_tokens=count_tokens)
    assert defs(chunks) == [("function", "f"), ("function", "g")]
    f = chunks[0]
    assert "caf\ufffd" in f.content
    assert src[f.start_byte : f.end_byte].decode("utf-8", "replace") == f.content


def test_syntax_errors_still_give_valid_chunks(count_tokens: CountTokens, check: Checker) -> None:
    """tree-sitter recovers; the chunks around the error stay exact and complete."""
    src = (
        b"def ok():\n    return 1\n\ndef broken(:\n    x = = 2\n\n"
        b"class C:\n    def m(self):\n        pass\n"
    )
    chunks = chunk("e.py", src, count_tokens=count_tokens)
    check(src, chunks, 1500)
    assert ("function", "ok") in defs(chunks)


def test_deep_nesting_does_not_hit_the_recursion_limit(
    count_tokens: CountTokens, check: Checker
) -> None:
    """Thousands of nested brackets chunk without RecursionError."""
    src = b"x = " + b"[" * 3000 + b"1" + b"]" * 3000 + b"\n"
    chunks = chunk("deep.py", src, ChunkingSettings(budget=200), count_tokens=count_tokens)
    check(src, chunks, 200)
    js = b'{"a": ' * 2000 + b"1" + b"}" * 2000
    chunks = chunk("deep.json", js, ChunkingSettings(budget=200), count_tokens=count_tokens)
    check(js, chunks, 200)


def test_minified_javascript_is_fast_and_valid(check: Checker) -> None:
    """A 2 MB single-line bundle chunks in seconds, within the budget, covering every byte."""
    unit = (
        "function f{i}(a,b){{var c=a+b;if(c>{i}){{return g(c,[1,2,3],{{k:'v{i}'}})}}"
        "for(var j=0;j<c;j++){{c+=j*{i}}}return c}};"
    )
    src = "".join(unit.format(i=i) for i in range(20000)).encode()
    assert len(src) > 2_000_000 and b"\n" not in src
    start = time.process_time()
    chunks = chunk("bundle.min.js", src, count_tokens=lambda texts: [0] * len(texts))
    elapsed = time.process_time() - start
    check(src, chunks, 1500)
    assert elapsed < 15, "CPU seconds (about 2 s on the project's machine type)"
    assert all(c.start_line == c.end_line == 1 for c in chunks)


def test_overlong_word_is_the_only_exception(count_tokens: CountTokens, check: Checker) -> None:
    """A single word longer than the budget is left whole; lines are cut at whitespace."""
    word = "x" * 500
    src = f"{word}\n{' '.join(['yy'] * 200)}\n".encode()
    chunks = chunk("a.txt", src, ChunkingSettings(budget=100), count_tokens=count_tokens)
    check(src, chunks, 100)
    assert chunks[0].content == word
    assert all(nws(c.content) <= 100 for c in chunks[1:])


def test_empty_and_whitespace_files_have_no_chunks(count_tokens: CountTokens) -> None:
    """Nothing to index gives no chunks."""
    assert chunk("a.py", b"", count_tokens=count_tokens) == []
    assert chunk("a.py", b"  \n\t\n", count_tokens=count_tokens) == []


def test_deterministic_ids_and_one_token_batch() -> None:
    """Same bytes, same chunks and ids; tokens are counted in one batch per file."""
    calls: list[int] = []

    def counting(texts: Sequence[str]) -> list[int]:
        calls.append(len(texts))
        return [len(t) for t in texts]

    first = chunk("src/pkg/loader.py", PY, count_tokens=counting)
    second = chunk("src/pkg/loader.py", PY, count_tokens=counting)
    assert first == second
    assert calls == [len(first), len(second)]
    other_path = chunk("other.py", PY, count_tokens=counting)
    assert {c.id for c in first}.isdisjoint(c.id for c in other_path)


def test_duplicate_content_gets_distinct_ids(count_tokens: CountTokens) -> None:
    """Identical definitions in one file get different ids, same content hash."""
    src = b"class A:\n    def f(self):\n        pass\n\nclass B:\n    def f(self):\n        pass\n"
    chunks = chunk("d.py", src, count_tokens=count_tokens)
    methods = [c for c in chunks if c.kind == "method"]
    assert methods[0].content_hash == methods[1].content_hash
    assert methods[0].id != methods[1].id


def test_language_override_and_extension_setting(count_tokens: CountTokens) -> None:
    """``language=`` and ``ChunkingSettings.extensions`` choose the grammar."""
    src = b"def f():\n    pass\n"
    assert chunk("x.tpl", src, count_tokens=count_tokens)[0].language == "text"
    settings = ChunkingSettings(extensions={".tpl": "python"})
    assert chunk("x.tpl", src, settings, count_tokens=count_tokens)[0].kind == "function"
    assert chunk("x.tpl", src, language="python", count_tokens=count_tokens)[0].symbol == "f"


def _many_files(copies: int) -> list[tuple[str, bytes]]:
    import sysconfig
    from pathlib import Path

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    names = ["textwrap.py", "shlex.py", "fnmatch.py", "json/decoder.py", "base64.py"] * copies
    files = [(f"{i}/{n}", (stdlib / n).read_bytes()) for i, n in enumerate(names)]
    files.insert(3, ("notes.md", b"# Title\n\nSome words.\n"))
    return files


def _pid_counts(texts: Sequence[str]) -> list[int]:
    """A count_tokens that tells which process counted: its pid."""
    import os

    return [os.getpid()] * len(texts)


def test_chunk_many_on_processes_equals_chunk_in_order() -> None:
    """Worker processes give the same chunks, token counts included, in input order."""
    files = _many_files(32)
    assert sum(len(src) for _, src in files) > chunker_module._POOL_MIN_BYTES
    expected = [chunk(path, src) for path, src in files]
    got = list(chunk_many(iter(files), workers=2))
    assert got == expected
    assert all(c.token_count > 0 for cs in got for c in cs)


def test_chunk_many_uses_workers_only_for_input_worth_them() -> None:
    """Under 2 MiB the chunks are made in this process (no workers to start); over, not."""
    import os

    small, large = _many_files(2), _many_files(32)
    assert sum(len(src) for _, src in small) < chunker_module._POOL_MIN_BYTES
    got = list(chunk_many(small, workers=2, count_tokens=_pid_counts))
    assert len(got) == len(small)
    assert {c.token_count for cs in got for c in cs} == {os.getpid()}
    got = list(chunk_many(large, workers=2, count_tokens=_pid_counts))
    assert len(got) == len(large)
    assert os.getpid() not in {c.token_count for cs in got for c in cs}


def test_chunk_many_raises_when_a_worker_is_killed_and_leaves_no_worker() -> None:
    """A worker SIGKILLed mid-run: the iteration raises a ChunkingError naming the signal
    within seconds (it does not hang), and no worker process outlives it."""
    import multiprocessing
    import os
    import queue
    import signal
    import threading

    from codechunkd.errors import ChunkingError

    before = {p.pid for p in multiprocessing.active_children()}
    files = _many_files(48)  # ~18 tasks: far more than the few in flight at once
    results = chunk_many(iter(files), workers=2, count_tokens=_pid_counts)
    assert len(next(results)) > 0  # the workers are up, most of the input still to do
    pids = [p.pid for p in multiprocessing.active_children() if p.pid not in before]
    assert len(pids) == 2
    victim = pids[0]
    assert victim is not None
    os.kill(victim, signal.SIGKILL)

    outcome: queue.Queue[BaseException | int] = queue.Queue()

    def drain() -> None:
        try:
            outcome.put(sum(1 for _ in results))
        except BaseException as exc:  # handed to the test thread
            outcome.put(exc)

    threading.Thread(target=drain, daemon=True).start()
    try:
        got = outcome.get(timeout=30)
    except queue.Empty:
        pytest.fail("chunk_many hung on a killed worker")
    assert isinstance(got, ChunkingError), got
    assert "chunking worker process died" in str(got) and "SIGKILL" in str(got)
    assert str(victim) in str(got) and "\n" not in str(got)
    assert not [p for p in multiprocessing.active_children() if p.pid not in before]
    for pid in pids:
        with pytest.raises(ProcessLookupError):  # ended and reaped, not a zombie
            os.kill(pid or 0, 0)


def test_public_api() -> None:
    """The module exports exactly its public names; the versions are ints."""
    assert set(chunker_module.__all__) == {
        "CHUNKER_VERSION",
        "LANGUAGE_VERSIONS",
        "Chunk",
        "CountTokens",
        "chunk",
        "chunk_many",
        "content_hash",
    }
    assert isinstance(CHUNKER_VERSION, int)
    assert all(isinstance(v, int) for v in chunker_module.LANGUAGE_VERSIONS.values())
