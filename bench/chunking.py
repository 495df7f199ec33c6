"""Chunking benchmark: codechunkd side by side with peers, on code nobody here wrote.

    .venv/bin/python bench/chunking.py                      # the Python stdlib
    .venv/bin/python bench/chunking.py --root /usr/lib/node_modules/npm --ext .js
    .venv/bin/python bench/chunking.py --show 5             # print a few chunks of each

Peers (optional, skipped when absent): ``astchunk`` (the cAST reference
implementation) and llama-index's ``CodeSplitter``.  They are not project
dependencies; install them next to the venv without touching it:

    .venv/bin/pip install --target /tmp/bench-peers astchunk llama-index-core

and the benchmark finds them there (``--peers /tmp/bench-peers``).  A fixed-size
line baseline always runs.

Every chunker gets the same budget in non-whitespace characters.  Figures:

- chunks, size distribution (non-whitespace characters), % over budget (leaf
  chunks over the budget that are not a single over-long line);
- coverage: % of the corpus's non-whitespace bytes found in exactly one chunk
  (peers return strings: they are located in the file in order), and % found
  more than once; inexact: % of chunks whose text is not a span of the file
  (astchunk drops the text of long strings, for instance);
- standalone parse: % of chunks that tree-sitter parses without an error node
  (the text is taken from the start of its first line and dedented);
- split definitions: % of functions/methods that fit the budget but do not lie
  whole inside one chunk (decorators included, comments not);
- MB/s: corpus bytes over process CPU time of the chunker alone; codechunkd's
  token counting (the tokenizer of the embedding model) is timed separately;
- tiny%: % of chunks of at most ``TINY`` (40) non-whitespace characters (a lone
  ``namespace llvm {``); midline: chunks that begin after other text on their first line
  (``// namespace x`` cut from its ``}``).

Throughput, after the table: tree-sitter's parse alone, on one core and on
``--workers`` processes (the ceilings of any tree-sitter chunker on this
machine), and ``codechunkd.chunk_many`` on one and on ``--workers`` processes
(default: every CPU), in wall-clock MB/s.  tree-sitter holds the GIL while it
parses, so it is processes that scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import sysconfig
import textwrap
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tree_sitter import Node, Query, QueryCursor

from codechunkd.chunking.chunker import _POOL_MIN_BYTES, chunk, chunk_many
from codechunkd.chunking.languages import detect_language, get_language, get_parser
from codechunkd.chunking.tokens import counter_for
from codechunkd.config.settings import ChunkingSettings

NOT_WS = np.ones(256, dtype=bool)
NOT_WS[list(b" \t\r\n\f\v")] = False

# Node types of "a function or method" per grammar, for the split-definition figure.
DEF_TYPES: dict[str, list[str]] = {
    "python": ["function_definition"],
    "javascript": ["function_declaration", "method_definition", "generator_function_declaration"],
    "typescript": ["function_declaration", "method_definition"],
    "tsx": ["function_declaration", "method_definition"],
    "go": ["function_declaration", "method_declaration"],
    "rust": ["function_item"],
    "java": ["method_declaration", "constructor_declaration"],
    "c": ["function_definition"],
    "cpp": ["function_definition"],
}
WRAPPERS = {"decorated_definition", "export_statement", "template_declaration"}
TINY = 40
"""A chunk of at most this many non-whitespace characters is ``tiny%``: a line like
``namespace llvm {`` or ``} // namespace x`` alone, which no question is answered by."""


@dataclass
class Span:
    start: int
    """Byte offset in the file, -1 when the text is not a span of the file."""
    end: int
    text: str
    lines: tuple[int, int] | None = None
    """1-based line range the chunker reports, used when the text is not a span."""


@dataclass
class Result:
    name: str
    chunks: int = 0
    sizes: list[int] = field(default_factory=list)
    over: int = 0
    covered_once: int = 0
    covered_more: int = 0
    nonws: int = 0
    parsed_ok: int = 0
    parsed: int = 0
    defs_fit: int = 0
    defs_split: int = 0
    seconds: float = 0.0
    token_seconds: float = 0.0
    failures: int = 0
    inexact: int = 0
    tiny: int = 0
    mid_line: int = 0
    examples: list[str] = field(default_factory=list)


def nws(text: str) -> int:
    return sum(1 for ch in text if ch not in " \t\r\n\f\v")


def corpus(roots: list[Path], exts: tuple[str, ...], limit: int | None) -> list[Path]:
    files: list[Path] = []
    for root in roots:
        for p in sorted(root.rglob("*")):
            if p.suffix in exts and p.is_file() and "site-packages" not in p.parts:
                files.append(p)
    return files[:limit] if limit else files


# -- chunkers: each returns leaf spans (synthetic chunks are not spans of the file) ----------


def codechunkd_chunker(budget: int) -> Callable[[str, bytes, str], list[Span]]:
    settings = ChunkingSettings(budget=budget)

    def run(path: str, src: bytes, language: str) -> list[Span]:
        chunks = chunk(path, src, settings, language=language, count_tokens=_zero)
        return [Span(c.start_byte, c.end_byte, c.content) for c in chunks if not c.synthetic]

    return run


def _zero(texts: Iterable[str]) -> list[int]:
    return [0 for _ in texts]


def line_chunker(budget: int) -> Callable[[str, bytes, str], list[Span]]:
    """Fixed-size baseline: whole lines, greedily, up to the budget."""

    def run(path: str, src: bytes, language: str) -> list[Span]:
        text = src.decode("utf-8")
        out: list[str] = []
        cur: list[str] = []
        size = 0
        for line in text.splitlines(keepends=True):
            n = nws(line)
            if cur and size + n > budget:
                out.append("".join(cur))
                cur, size = [], 0
            cur.append(line)
            size += n
        if cur:
            out.append("".join(cur))
        return locate(src, out)

    return run


def astchunk_chunker(budget: int) -> Callable[[str, bytes, str], list[Span]] | None:
    try:
        from astchunk import ASTChunkBuilder  # type: ignore[import-not-found]
    except Exception:
        return None
    builders: dict[str, object] = {}

    def run(path: str, src: bytes, language: str) -> list[Span]:
        lang = {"python": "python", "java": "java", "csharp": "csharp"}.get(language)
        lang = lang or ("typescript" if language in ("typescript", "tsx") else None)
        if lang is None:
            raise ValueError(f"astchunk has no {language}")
        builder = builders.get(lang)
        if builder is None:
            builder = builders[lang] = ASTChunkBuilder(
                max_chunk_size=budget, language=lang, metadata_template="default"
            )
        chunks = builder.chunkify(src.decode("utf-8"))  # type: ignore[attr-defined]
        spans = locate(src, [c["content"] for c in chunks])
        for s, c in zip(spans, chunks, strict=True):
            meta = c.get("metadata", {})
            if "start_line_no" in meta:  # 0-based, inclusive
                s.lines = (meta["start_line_no"] + 1, meta["end_line_no"] + 1)
        return spans

    return run


def llama_chunker(budget: int) -> Callable[[str, bytes, str], list[Span]] | None:
    try:
        from llama_index.core.node_parser import (  # type: ignore[import-not-found]
            CodeSplitter,
        )
    except Exception:
        return None
    splitters: dict[str, object] = {}

    def run(path: str, src: bytes, language: str) -> list[Span]:
        sp = splitters.get(language)
        if sp is None:
            sp = splitters[language] = CodeSplitter(
                language=language,
                parser=get_parser(language),
                chunk_lines=10_000,
                chunk_lines_overlap=1,  # must be > 0; CodeSplitter cuts by max_chars
                max_chars=budget,
            )
        texts = sp.split_text(src.decode("utf-8"))  # type: ignore[attr-defined]
        return locate(src, texts)

    return run


def locate(src: bytes, texts: list[str]) -> list[Span]:
    """Find peer chunk strings in the file, in order (a string not found is skipped)."""
    data = src.decode("utf-8")
    spans: list[Span] = []
    cursor = 0
    for t in texts:
        t = t.strip()
        i = data.find(t, cursor)
        if i < 0:
            i = data.find(t)
        if i < 0:
            spans.append(Span(-1, -1, t))
            continue
        start = len(data[:i].encode())
        end = start + len(t.encode())
        spans.append(Span(start, end, t))
        cursor = i + len(t)
    return spans


# -- measures ----------------------------------------------------------------------------------


def definitions(language: str, root: Node, src: bytes, budget: int) -> list[tuple[int, int]]:
    """Spans of the functions/methods that fit the budget (decorators included)."""
    types = DEF_TYPES.get(language)
    if not types:
        return []
    query = Query(get_language(language), "[" + " ".join(f"({t})" for t in types) + "] @d")
    spans = []
    for node in QueryCursor(query).captures(root).get("d", []):
        outer = node
        while outer.parent is not None and outer.parent.type in WRAPPERS:
            outer = outer.parent
        a, b = outer.start_byte, outer.end_byte
        if nws(src[a:b].decode("utf-8", "replace")) <= budget:
            spans.append((a, b))
    return spans


def standalone_ok(language: str, src: bytes, span: Span) -> bool:
    if span.start < 0:
        return False
    line_start = src.rfind(b"\n", 0, span.start) + 1
    text = src[line_start : span.end].decode("utf-8", "replace")
    text = textwrap.dedent(text)
    tree = get_parser(language).parse(text.encode())
    return not tree.root_node.has_error


def measure(
    res: Result,
    fn: Callable[[str, bytes, str], list[Span]],
    files: list[tuple[str, bytes, str]],
    budget: int,
    show: int,
) -> None:
    for path, src, language in files:
        t0 = time.process_time()
        try:
            spans = fn(path, src, language)
        except Exception:
            res.failures += 1
            spans = []
        res.seconds += time.process_time() - t0
        res.chunks += len(spans)
        cover = np.zeros(len(src), dtype=np.int32)
        for s in spans:
            n = nws(s.text)
            res.sizes.append(n)
            if n > budget and "\n" in s.text.strip():
                res.over += 1
            res.tiny += n <= TINY
            if s.start >= 0:
                cover[s.start : s.end] += 1
                line_start = src.rfind(b"\n", 0, s.start) + 1
                res.mid_line += bool(src[line_start : s.start].strip())
            res.parsed += 1
            res.parsed_ok += standalone_ok(language, src, s)
            if len(res.examples) < show and 200 < n < 1200:
                res.examples.append(s.text)
        mask = NOT_WS[np.frombuffer(src, dtype=np.uint8)]
        res.nonws += int(mask.sum())
        res.covered_once += int(((cover == 1) & mask).sum())
        res.covered_more += int(((cover > 1) & mask).sum())
        tree = get_parser(language).parse(src)
        line_starts = [0] + [i + 1 for i, b in enumerate(src) if b == 10] + [len(src)]
        located = []
        for s in spans:
            if s.start >= 0:
                located.append((s.start, s.end))
            elif s.lines is not None:
                res.inexact += 1
                first, last = s.lines
                end = line_starts[min(last, len(line_starts) - 1)]
                located.append((line_starts[min(first - 1, len(line_starts) - 1)], end))
            else:
                res.inexact += 1
        for a, b in definitions(language, tree.root_node, src, budget):
            res.defs_fit += 1
            if not any(sa <= a and b <= sb for sa, sb in located):
                res.defs_split += 1


def throughput(
    files: list[tuple[str, bytes, str]], total: int, cpu_seconds: float, budget: int, workers: int
) -> None:
    """Parse-alone ceiling, one process and ``chunk_many`` on ``workers`` processes."""
    t0 = time.process_time()
    for _, src, language in files:
        get_parser(language).parse(src)
    parse = time.process_time() - t0
    settings = ChunkingSettings(budget=budget)
    pairs = [(path, src) for path, src, _ in files]
    t0 = time.perf_counter()
    n = sum(len(cs) for cs in chunk_many(pairs, settings, workers=1, count_tokens=_zero))
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = sum(len(cs) for cs in chunk_many(pairs, settings, workers=workers, count_tokens=_zero))
    many = time.perf_counter() - t0
    assert n == m, (n, m)
    t0 = time.perf_counter()
    parse_many(files, workers)
    parse_wall = time.perf_counter() - t0
    mb = total / 1e6
    print("\nthroughput (MB of source per second)")
    print(f"  tree-sitter parse alone, 1 core (CPU time)      {mb / parse:6.2f}")
    print(
        f"  tree-sitter parse alone, {workers} processes (wall)"
        f"{'':{max(0, 6 - len(str(workers)))}}{mb / parse_wall:6.2f}"
        "   (the ceiling of any tree-sitter chunker here)"
    )
    print(f"  codechunkd chunk(), 1 core (CPU time)           {mb / cpu_seconds:6.2f}")
    print(f"  codechunkd chunk_many, 1 process (wall)         {mb / one:6.2f}")
    print(
        f"  codechunkd chunk_many, {workers} processes (wall)"
        f"{'':{max(0, 8 - len(str(workers)))}}{mb / many:6.2f}"
        f"   ({one / many:.2f}x one process)"
        + ("; under 2 MiB it works in-process" if total < _POOL_MIN_BYTES else "")
    )


def parse_many(files: list[tuple[str, bytes, str]], workers: int) -> None:
    """Parse every file on ``workers`` spawned processes, in batches as ``chunk_many`` does."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    batches: list[list[tuple[bytes, str]]] = [[]]
    size = 0
    for _, src, language in files:
        batches[-1].append((src, language))
        size += len(src)
        if size >= 256 * 1024:
            batches.append([])
            size = 0
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        for _ in pool.map(_parse_batch, batches):
            pass


def _parse_batch(batch: list[tuple[bytes, str]]) -> None:
    for src, language in batch:
        get_parser(language).parse(src)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root", type=Path, action="append", help="corpus directory (repeatable)")
    ap.add_argument("--ext", action="append", help="file extensions (default .py)")
    ap.add_argument("--budget", type=int, default=1500)
    ap.add_argument("--limit", type=int, default=None, help="at most this many files")
    ap.add_argument("--show", type=int, default=0, help="print this many chunks of each")
    ap.add_argument("--peers", default="/tmp/bench-peers", help="extra site dir with the peers")
    ap.add_argument("--only", action="append", help="run only these chunkers")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="for chunk_many")
    args = ap.parse_args(argv)
    if args.peers and Path(args.peers).is_dir():
        sys.path.append(args.peers)
    roots = args.root or [Path(sysconfig.get_paths()["stdlib"])]
    exts = tuple(args.ext or [".py"])
    paths = corpus(roots, exts, args.limit)
    files = []
    for p in paths:
        data = p.read_bytes().decode("utf-8", "replace").encode()
        files.append((str(p), data, detect_language(str(p), data[:256])))
    total = sum(len(s) for _, s, _ in files)
    print(f"corpus: {len(files)} files, {total / 1e6:.1f} MB from {', '.join(map(str, roots))}")
    print(f"budget: {args.budget} non-whitespace characters\n")

    chunkers: list[tuple[str, Callable[[str, bytes, str], list[Span]] | None]] = [
        ("codechunkd", codechunkd_chunker(args.budget)),
        ("astchunk", astchunk_chunker(args.budget)),
        ("llama-index CodeSplitter", llama_chunker(args.budget)),
        ("fixed lines", line_chunker(args.budget)),
    ]
    results = []
    for name, fn in chunkers:
        if args.only and name not in args.only:
            continue
        if fn is None:
            print(f"{name}: not installed, skipped")
            continue
        res = Result(name)
        measure(res, fn, files, args.budget, args.show)
        results.append(res)
    # codechunkd's token counting, timed on its own
    counter = counter_for()
    if any(r.name == "codechunkd" for r in results):
        settings = ChunkingSettings(budget=args.budget)
        texts = [
            c.embed_text
            for path, src, lang in files
            for c in chunk(path, src, settings, language=lang, count_tokens=_zero)
        ]
        t0 = time.process_time()
        for i in range(0, len(texts), 512):
            counter(texts[i : i + 512])
        results[0].token_seconds = time.process_time() - t0
    print()
    header = (
        f"{'chunker':26} {'chunks':>7} {'p50':>5} {'p90':>5} {'max':>6} {'over%':>6} "
        f"{'cover%':>7} {'dup%':>6} {'inexact%':>8} {'parse%':>7} {'split%':>7} {'MB/s':>6} "
        f"{'tiny%':>6} {'midline':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        sizes = sorted(r.sizes) or [0]
        p90 = sizes[int(0.9 * (len(sizes) - 1))]
        print(
            f"{r.name:26} {r.chunks:7d} {int(statistics.median(sizes)):5d} {p90:5d} "
            f"{sizes[-1]:6d} {100 * r.over / max(1, r.chunks):6.2f} "
            f"{100 * r.covered_once / max(1, r.nonws):7.2f} "
            f"{100 * r.covered_more / max(1, r.nonws):6.2f} "
            f"{100 * r.inexact / max(1, r.chunks):8.2f} "
            f"{100 * r.parsed_ok / max(1, r.parsed):7.2f} "
            f"{100 * r.defs_split / max(1, r.defs_fit):7.2f} "
            f"{total / 1e6 / max(r.seconds, 1e-9):6.2f} "
            f"{100 * r.tiny / max(1, r.chunks):6.2f} {r.mid_line:7d}"
            + (f"  ({r.failures} files failed)" if r.failures else "")
        )
    for r in results:
        if r.token_seconds:
            print(
                f"\n{r.name}: token counting of all embed texts took {r.token_seconds:.1f} s CPU "
                f"({total / 1e6 / (r.seconds + r.token_seconds):.2f} MB/s with it)"
            )
    if any(r.name == "codechunkd" for r in results):
        throughput(files, total, results[0].seconds, args.budget, args.workers)
    for r in results:
        for text in r.examples:
            print(f"\n===== {r.name} =====\n{text}")


if __name__ == "__main__":
    main()
