"""Where chunks begin and end: no chunk is only a scope's header or a closing line, and a
line is never cut between two chunks (unless the budget forces it)."""

from __future__ import annotations

from collections.abc import Sequence

from tests.chunking.conftest import Checker

from codechunkd.chunking.chunker import Chunk, CountTokens, chunk
from codechunkd.config.settings import ChunkingSettings

HEADER = b"""// Record consumers.
#ifndef XRAY_CONSUMER_H
#define XRAY_CONSUMER_H

#include "llvm/Support/Error.h"
#include <memory>

namespace llvm {
namespace xray {

class RecordConsumer {
public:
  virtual Error consume(std::unique_ptr<Record> R) = 0;
  virtual ~RecordConsumer() = default;
};

// Applies visitors to every record.
class PipelineConsumer : public RecordConsumer {
  std::vector<RecordVisitor *> Visitors;

public:
  PipelineConsumer(std::initializer_list<RecordVisitor *> V) : Visitors(V) {}
  Error consume(std::unique_ptr<Record> R) override;
};

} // namespace xray
} // namespace llvm

#endif // XRAY_CONSUMER_H
"""


def _leaves(chunks: Sequence[Chunk]) -> list[Chunk]:
    return [c for c in chunks if not c.synthetic]


def _mid_line(source: bytes, chunks: Sequence[Chunk]) -> list[str]:
    """The chunks that begin after something else on their first line."""
    out = []
    for c in _leaves(chunks):
        line_start = source.rfind(b"\n", 0, c.start_byte) + 1
        if source[line_start : c.start_byte].strip():
            out.append(f"{c.start_line}: {c.content[:40]!r}")
    return out


def test_namespace_lines_join_their_neighbours(count_tokens: CountTokens, check: Checker) -> None:
    """``namespace llvm {`` / ``namespace xray {`` end the includes' chunk, and each class
    chunk begins on its own line (so ``defs`` gives its line); ``} // namespace xray``,
    ``} // namespace llvm`` and ``#endif // ...`` end the last class's chunk, whole."""
    chunks = chunk("include/xray/consumer.h", HEADER, count_tokens=count_tokens)
    check(HEADER, chunks, ChunkingSettings().budget)
    leaves = _leaves(chunks)
    assert [c.content.splitlines()[-1] for c in leaves[:1]] == ["namespace xray {"]
    assert leaves[0].kind == "module"
    lines = HEADER.decode().splitlines()
    for c in chunks:
        if c.kind == "class":
            name = c.symbol.rsplit("::", 1)[-1]
            first = next(i for i, x in enumerate(lines, 1) if x.startswith(f"class {name} "))
            comment = lines[first - 2].startswith("//")
            assert c.start_line == first - comment, (c.symbol, c.start_line)
    assert leaves[-1].content.endswith(
        "};\n\n} // namespace xray\n} // namespace llvm\n\n#endif // XRAY_CONSUMER_H"
    )
    assert _mid_line(HEADER, chunks) == []
    assert not [c.content for c in leaves if c.content.strip("{}/ \n").startswith("namespace")]


def test_a_namespace_after_a_definition_still_has_no_chunk_of_its_own(
    count_tokens: CountTokens, check: Checker
) -> None:
    """A namespace that follows a definition has no glue before it to join: its header
    begins its first member's chunk, never a chunk alone."""
    src = (
        b"int top() { return 1; }\n\n"
        b"namespace a {\nint f() { return 2; }\nint g() { return 3; }\n} // namespace a\n"
    )
    chunks = chunk("a.cc", src, count_tokens=count_tokens)
    check(src, chunks, ChunkingSettings().budget)
    assert [(c.kind, c.symbol) for c in chunks] == [
        ("function", "top"),
        ("function", "a::f"),
        ("function", "a::g"),
    ]
    assert chunks[1].content.startswith("namespace a {\nint f()")
    assert chunks[2].content.endswith("} // namespace a")


def test_an_opening_keyword_stays_with_its_statement(
    count_tokens: CountTokens, check: Checker
) -> None:
    """``if sys.platform == 'win32':`` over the budget, after a function over it too: the
    ``if`` begins the next chunk with its condition, not the function's end."""
    body = "".join(f"    x{i} = compute({i}, {i} + 1)\n" for i in range(40))
    methods = "".join(
        f"        def run_{i}(self):\n            return self.step({i}) + {i}\n\n"
        for i in range(30)
    )
    src = (
        f"import sys\n\n\ndef big():\n{body}\n\n"
        f"if sys.platform == 'win32':\n    class WindowsLoop(Base):\n{methods}"
    ).encode()
    budget = 900
    chunks = chunk("m.py", src, ChunkingSettings(budget=budget), count_tokens=count_tokens)
    check(src, chunks, budget)
    assert _mid_line(src, chunks) == []
    (big,) = [c for c in chunks if c.symbol == "big"]
    assert big.content.endswith("x39 = compute(39, 39 + 1)"), big.content[-40:]
    starts = [c for c in _leaves(chunks) if c.content.startswith("if sys.platform")]
    assert len(starts) == 1


C_API = (
    b"#ifndef UI_H\n#define UI_H\n#pragma once\n\n#include <stdio.h>\n\n"
    b'#ifdef __cplusplus\nextern "C" {\n#endif\n\n'
    + b"".join(
        f"/* Sets option {i} of the prompt. */\nint UI_set_option_{i}(UI *ui, int v);\n".encode()
        for i in range(120)
    )
    + b"\n#ifdef __cplusplus\n}\n#endif\n#endif\n"
)


def test_an_extern_c_block_of_declarations_is_plain_glue(
    count_tokens: CountTokens, check: Checker
) -> None:
    """A C header's ``#ifdef __cplusplus`` / ``extern "C" {`` (which the parser reads as
    holding the rest of the file) names no chunk: its declarations are module glue
    packed up to the budget, with no kind-less chunk and no symbol ``__cplusplus``."""
    budget = 1500
    chunks = chunk("ui.h", C_API, ChunkingSettings(budget=budget), count_tokens=count_tokens)
    check(C_API, chunks, budget)
    assert {c.kind for c in chunks} == {"module"}
    assert {c.symbol for c in chunks} == {""}
    assert len(chunks) < 10  # 120 declarations packed, not a chunk per directive
    small = [c.content for c in chunks[:-1] if len(c.content) < 200]
    assert small == [], small


def test_a_tiny_last_line_after_a_definition_ends_its_chunk(
    count_tokens: CountTokens, check: Checker
) -> None:
    """npm's commands end with ``module.exports = Dedupe`` after their class: it ends the
    last chunk instead of standing alone (128 of npm's 137 files had such a chunk).  Glue
    that is not the last (an ``if`` header before a class) or that is not tiny stays."""
    src = (
        b"const BaseCommand = require('../base-cmd.js')\n\n"
        b"class Dedupe extends BaseCommand {\n  async exec () {\n    return this.run()\n  }\n}\n\n"
        b"module.exports = Dedupe\n"
    )
    chunks = chunk("lib/commands/dedupe.js", src, count_tokens=count_tokens)
    check(src, chunks, ChunkingSettings().budget)
    leaves = _leaves(chunks)
    assert leaves[-1].content.endswith("}\n\nmodule.exports = Dedupe")
    assert not [c for c in leaves if c.content == "module.exports = Dedupe"]
    [cls] = [c for c in chunks if c.kind == "class"]
    assert cls.end_line == 7  # the class's own lines
    big = src + b"".join(b"module.exports.helper%d = helper%d\n" % (i, i) for i in range(20))
    chunks = chunk("lib/commands/dedupe.js", big, count_tokens=count_tokens)
    assert _leaves(chunks)[-1].content.startswith("module.exports = Dedupe")


def test_a_doc_comment_too_long_to_join_its_definition_is_named_for_it(
    count_tokens: CountTokens, check: Checker
) -> None:
    """A definition that fits keeps its code whole, and its JSDoc, too long to join it, is
    a ``doc`` chunk named for it (``documentation of map`` in its header): it was module
    code named for nothing, and could merge with the imports before it."""
    doc = "".join(
        f" * Line {i} of what `map` does to each value that the source emits.\n" for i in range(27)
    )
    src = (
        "import { OperatorFunction } from '../types';\n"
        "import { operate } from '../util/lift';\n\n"
        f"/**\n{doc} */\n"
        "export function map<T, R>(project: (value: T) => R): OperatorFunction<T, R> {\n"
        "  return operate((source, subscriber) => {\n"
        "    let index = 0;\n"
        "    source.subscribe(createOperatorSubscriber(subscriber, (value: T) => {\n"
        "      subscriber.next(project(value, index++));\n"
        "    }));\n"
        "  });\n"
        "}\n"
    ).encode()
    chunks = chunk("src/operators/map.ts", src, count_tokens=count_tokens)
    check(src, chunks, ChunkingSettings().budget)
    assert [(c.kind, c.symbol) for c in chunks] == [
        ("module", ""),
        ("doc", "map"),
        ("function", "map"),
    ]
    _, docs, code = chunks
    assert docs.content.startswith("/**") and docs.content.endswith("*/")
    assert docs.header.startswith("documentation of map in file src/operators/map.ts")
    assert code.content.startswith("export function map")
    # in a class, the doc of a method is named as the method is
    cls = (
        "class Subject {\n"
        + src.decode().split("\n\n", 1)[1].replace("export function", "  public")
        + "}\n"
    ).encode()
    chunks = chunk("src/Subject.ts", cls, count_tokens=count_tokens)
    assert ("doc", "Subject.map") in {(c.kind, c.symbol) for c in chunks}
    # a doc comment over the budget is cut at lines, each piece named for the definition
    long = src.replace(doc.encode(), (doc * 3).encode())
    chunks = chunk("src/operators/map.ts", long, count_tokens=count_tokens)
    check(long, chunks, ChunkingSettings().budget)
    kinds = [(c.kind, c.symbol) for c in chunks]
    assert kinds[0] == ("module", "") and kinds[-1] == ("function", "map")
    assert len(kinds) > 3 and set(kinds[1:-1]) == {("doc", "map")}
