"""Deep nesting stays linear: in memory (each nested definition's scope is bounded, and a
signature is at most ``MAX_SIGNATURE`` bytes) and in time (a span's size is read from running
counts, not by reading the span again; the node before a body is found among its siblings).

The hang detectors run in a fresh interpreter with deadlines far above the need, and the
memory bounds are far above what the linear walk takes and far below what the quadratic
one took: not speed targets (speed lives in the benchmarks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.conftest import finishes_within

from codechunkd.chunking._chunk_code import _MAX_SCOPE, Anchor, CodeSplitter
from codechunkd.chunking.chunker import Chunk, chunk
from codechunkd.chunking.languages import get_parser
from codechunkd.chunking.rules import rules_for
from codechunkd.config.settings import ChunkingSettings

Checker = Any


PEAK_MIB = (
    "def peak_mib():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return int(line.split()[1]) / 1024\n"
    "    return 0.0\n"
)
"""This process's peak memory (MiB), for the code a test runs in a fresh interpreter: not
``ru_maxrss``, which Linux carries over ``exec`` from the parent (a test worker of 1.1 GiB
made a 90 MiB child read 1.1 GiB); the high-water mark of the new address space is its own."""


CHUNK_WHOLE = (
    "from codechunkd.chunking.chunker import chunk\n"
    "def none(texts):\n"
    "    return [0] * len(texts)\n"
    "def nws(text):\n"
    "    return ''.join(text.split())\n"
)
"""The start of a hang detector's code: ``chunk`` without token counts, and ``nws`` to
check that the chunks hold every non-whitespace character of the source."""


def _no_tokens(texts: Sequence[str]) -> list[int]:
    return [0] * len(texts)


def _defs(chunks: Sequence[Chunk]) -> list[tuple[str, str]]:
    return [(c.kind, c.symbol) for c in chunks if c.kind in ("function", "method", "class")]


def test_a_nested_definition_keeps_a_bounded_scope() -> None:
    """3,000 nested functions: each piece (and each split definition's anchor) keeps the
    innermost _MAX_SCOPE enclosing definitions, not the whole chain (which made memory and
    time grow with the square of the depth)."""
    n = 3000
    src = b"function f(){" * n + b"}" * n
    tree = get_parser("javascript").parse(src)
    pieces = CodeSplitter(src, rules_for("javascript"), 40, merge_siblings=False).split_tree(
        tree.root_node
    )
    assert len(pieces) >= n - 10
    assert max(len(p.scope) for p in pieces) == _MAX_SCOPE
    anchors = {id(p.parent): p.parent for p in pieces if isinstance(p.parent, Anchor)}
    assert len(anchors) >= n - 10
    assert max(len(a.scope) for a in anchors.values()) == _MAX_SCOPE
    # the symbols are as before: the innermost _MAX_SCOPE enclosing names and its own
    assert {p.symbol for p in pieces} == {".".join("f" * k) for k in range(1, _MAX_SCOPE + 2)}


def test_deeply_nested_functions_take_linear_memory() -> None:
    """20,000 nested JavaScript functions (280 KB): the splitter once took 1.9 GiB (the
    scopes, 200 million entries in all); a few tens of MiB now, so 400 MiB is a wide
    bound.  The walk alone is measured (the grammar's tree is the same either way)."""
    code = (
        f"{PEAK_MIB}"
        "from codechunkd.chunking._chunk_code import CodeSplitter\n"
        "from codechunkd.chunking.languages import get_parser\n"
        "from codechunkd.chunking.rules import rules_for\n"
        "n = 20_000\n"
        "src = b'function f(){' * n + b'}' * n\n"
        "tree = get_parser('javascript').parse(src)\n"
        "before = peak_mib()\n"
        "splitter = CodeSplitter(src, rules_for('javascript'), 1500, merge_siblings=False)\n"
        "pieces = splitter.split_tree(tree.root_node)\n"
        "assert len(pieces) > n - 200, len(pieces)\n"
        "grown = peak_mib() - before\n"
        "assert grown < 400, f'the walk took {grown:.0f} MiB more'\n"
    )
    finishes_within(code, 120, "splitting 20,000 nested functions")


def test_deep_brackets_and_long_chains_chunk_in_linear_time() -> None:
    """300,000 nested brackets (600 KB) took over a minute, a 600 KB chain of ``+`` 56 s
    (each nested node's whole span was measured again; 450,000 brackets, 161 s); a few
    seconds in all now.  The deadline is a hang detector."""
    code = (
        CHUNK_WHOLE + "n = 300_000\n"
        "src = b'x = ' + b'[' * n + b']' * n\n"
        "chunks = chunk('deep.py', src, count_tokens=none)\n"
        "assert nws(''.join(c.content for c in chunks)) == nws(src.decode())\n"
        "src = b'x = ' + b'+'.join([b'\"a\"'] * 150_000)\n"
        "chunks = chunk('chain.py', src, count_tokens=none)\n"
        "assert nws(''.join(c.content for c in chunks)) == nws(src.decode())\n"
    )
    finishes_within(code, 60, "chunking 600 KB of nested brackets and a 600 KB chain")


def test_deep_one_line_nests_keep_short_signatures_in_linear_time() -> None:
    """A minified JSON nested 20,000 deep (120 KB): each key's signature was the rest of the
    file (1.2 GiB in all; a 280 KB one took 5.4 GiB), now at most ``MAX_SIGNATURE`` bytes;
    and 60,000 nested JavaScript functions, whose signatures each walked the tree from its
    root to find the node before the body (the chunking grew with the square of the depth).
    A whole ``chunk`` call, in a fresh interpreter; 600 MiB is a wide memory bound, and the
    deadline a hang detector."""
    code = (
        f"{PEAK_MIB}"
        "from codechunkd.chunking.chunker import chunk\n"
        "from codechunkd.chunking.signatures import MAX_SIGNATURE\n"
        "def none(texts):\n"
        "    return [0] * len(texts)\n"
        "n = 20_000\n"
        "chunks = chunk('deep.json', b'{\"k\":' * n + b'1' + b'}' * n, count_tokens=none)\n"
        "assert len(chunks) > n - 500, len(chunks)\n"
        "assert max(len(c.signature) for c in chunks) <= MAX_SIGNATURE + 4\n"
        "mib = peak_mib()\n"
        "assert mib < 600, f'chunking took {mib:.0f} MiB'\n"
        "n = 60_000\n"
        "chunks = chunk('deep.js', b'function f(){' * n + b'}' * n, count_tokens=none)\n"
        "assert {c.signature for c in chunks if c.kind == 'function'} == {'function f()'}\n"
    )
    finishes_within(code, 120, "chunking a deep minified JSON and 60,000 nested functions")


def test_moderately_nested_code_is_chunked_exactly(check: Checker) -> None:
    """Twelve levels of classes and methods, split at a small budget: every byte covered
    once, each definition named by its innermost nine names (a method still a method when
    its class is the ninth enclosing definition), headers naming four enclosing ones."""
    depth = 12
    names = [f"K{i}" if i % 2 == 0 else f"m{i}" for i in range(depth)]
    parts = []
    for i, name in enumerate(names):
        if i % 2 == 0:
            parts.append(f"class {name} {{\n  static s{i} = {i};\n")
        else:
            parts.append(f"  {name}(a) {{\n    let v{i} = a + {i};\n")
    src = ("".join(parts) + "}\n" * depth).encode()
    chunks = chunk("nest.js", src, ChunkingSettings(budget=40), count_tokens=_no_tokens)
    check(src, chunks, 40)
    expected = [
        ("class" if i % 2 == 0 else "method", ".".join(names[max(0, i - _MAX_SCOPE) : i + 1]))
        for i in range(depth)
    ]
    assert sorted(set(_defs(chunks))) == sorted(expected)
    inner = next(c for c in chunks if c.symbol.endswith(f".{names[-1]}") and not c.synthetic)
    assert inner.embed_text.startswith(
        "method m11 in class K10 in method m9 in class K8 in method m7 in file nest.js"
    )


def test_deep_brackets_and_chains_cover_every_byte(check: Checker) -> None:
    """Nested brackets, a long ``+`` chain and nested functions, chunked at two budgets:
    each leaf an exact span, every byte covered once (sizes read from the running counts
    add up as the spans' own do)."""
    sources = {
        "deep.py": b"x = " + b"[" * 5000 + b"1, 2" + b"]" * 5000 + b"\n",
        "chain.py": b"x = " + b" + ".join([b'"a b"'] * 5000) + b"\n",
        "deep.js": b"function f(a) { let b = a;\n" * 600 + b"}\n" * 600,
        "data.json": b'{"key": [' * 1500 + b"1" + b"]}" * 1500,
    }
    for budget in (60, 1500):
        for path, src in sources.items():
            chunks = chunk(path, src, ChunkingSettings(budget=budget), count_tokens=_no_tokens)
            check(src, chunks, budget)


def test_references_of_a_deep_nest_are_looked_for_in_linear_time() -> None:
    """50,000 nested calls (a 100 KB file) kept the reference query for 93 s: its time grows
    with the square of the nesting.  It now looks no deeper than ``MAX_DEPTH`` in the tree
    (50 is the deepest of 1,400 real files): the outer calls are found, at once."""
    code = (
        "from codechunkd.chunking.languages import get_parser\n"
        "from codechunkd.chunking.references import MAX_DEPTH, extract\n"
        "n = 50_000\n"
        "src = b'x = ' + b'f(' * n + b'1' + b')' * n + b'\\n'\n"
        "refs = extract('python', get_parser('python').parse(src), src)\n"
        "assert [r.name for r in refs if r.kind == 'defines'] == ['x']\n"  # the variable
        "refs = [r for r in refs if r.kind != 'defines']\n"
        "assert 0 < len(refs) <= MAX_DEPTH and {r.name for r in refs} == {'f'}, len(refs)\n"
    )
    finishes_within(code, 60, "looking for the references of 50,000 nested calls")


def test_fields_of_a_deeply_nested_class_are_qualified_in_linear_time() -> None:
    """90,000 fields of a class 450 classes deep (a 1 MB file): a field's classes came from
    a walk up from each field, and each step up is as costly as the node is deep
    (tree-sitter finds a parent from the root): minutes.  Each block's classes are now
    found once.  The deep fields' names (over 200 characters qualified) are no names; the
    shallow class's field is defined."""
    code = (
        "from codechunkd.chunking.languages import get_parser\n"
        "from codechunkd.chunking.references import extract\n"
        "depth, n = 450, 90_000\n"
        "src = ('class Top { int keep; }\\n'\n"
        "    + ''.join(f'class C{i} {{\\n' for i in range(depth))\n"
        "    + ''.join(f'int f{i};\\n' for i in range(n))\n"
        "    + '}\\n' * depth).encode()\n"
        "refs = extract('java', get_parser('java').parse(src), src)\n"
        "assert [r.qualifier for r in refs if r.kind == 'defines'] == ['Top.keep']\n"
    )
    finishes_within(code, 60, "qualifying the fields of a class 450 classes deep")


def test_a_long_name_or_docstring_is_not_repeated_into_every_member() -> None:
    """Each member's symbol, context header and full text repeat its scope's names and the
    first sentence of its class's and module's docstrings: an ``impl Foo<A<A<…>>>`` 5,000
    deep with 300 methods, a class named by a 30 KB identifier and a module docstring of
    one 30 KB word made hundreds of times the file's size in rows (a 50,000-deep ``impl``:
    280 MB for a 160 KB file; the 1 MB file limit allowed gigabytes).  Names and summaries
    are cut now: a chunk holds a few hundred characters beyond its content."""
    from codechunkd.storage.fulltext import fts_text

    word = "x" * 30_000
    generics = "Foo" + "<A" * 5_000 + ">" * 5_000
    rust_body = "".join(f"    fn m{i}(&self) -> u32 {{ {i} }}\n" for i in range(300))
    methods = "".join(f"    def f{i}(self):\n        return {i}\n\n" for i in range(300))
    functions = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(300))
    files = {
        "lib.rs": f"impl {generics} {{\n{rust_body}}}\n",
        "named.py": f"class {'a' * 30_000}:\n{methods}",
        "documented.py": f'class K:\n    """{word} end."""\n{methods}',
        "module.py": f'"""{word} end."""\n\n{functions}',
    }
    for path, text in files.items():
        src = text.encode()
        chunks = chunk(path, src, count_tokens=_no_tokens)
        assert len(chunks) > 300, path
        # what a chunk holds beyond its content (in its text, full text and embed text)
        extra = max(
            len(c.symbol) + len(c.embed_text) + len(fts_text(c, "")) - 3 * len(c.content)
            for c in chunks
        )
        assert extra < 3000, (path, extra)


def test_deep_nests_one_bracket_a_line_chunk_in_linear_time() -> None:
    """100,000 nested brackets and 60,000 nested functions, one opening or closing a line:
    whether a token closes what comes before it was asked of tree-sitter's
    ``prev_sibling``, which costs the nesting's depth (20,000 of them took 14 s, four
    times 10,000's); it is known from the children read now.  The deadline is a hang
    detector, far above the need."""
    code = (
        CHUNK_WHOLE + "n = 100_000\n"
        "src = b'x = ' + b'[\\n' * n + b']\\n' * n\n"
        "chunks = chunk('deep.py', src, count_tokens=none)\n"
        "assert nws(''.join(c.content for c in chunks)) == nws(src.decode())\n"
        "src = b'function f(){\\n' * 60_000 + b'}\\n' * 60_000\n"
        "chunks = chunk('deep.js', src, count_tokens=none)\n"
        "assert nws(''.join(c.content for c in chunks)) == nws(src.decode())\n"
    )
    finishes_within(code, 60, "chunking nests of one bracket a line")
