"""Fuzz every bundled tree-sitter grammar through ``chunk()`` with hostile inputs.

    .venv/bin/python scripts/fuzz_grammars.py                  # every grammar, scale 4, 3 seeds
    .venv/bin/python scripts/fuzz_grammars.py --scale 10 --seeds 20 --lang yaml markdown
    .venv/bin/python scripts/fuzz_grammars.py --quick          # what CI runs (one child, no resume)

Inputs per grammar (see :func:`candidates`): nesting of every bracket and quote kind, of
the language's own containers (Markdown quotes and lists, YAML indentation, HTML tags,
indented blocks, comments), very long lines, many repeated tokens, random bytes.  A grammar
that segfaults, loops or exhausts memory must cost one file, never the process, so each
batch runs in a child process (``--child``) that prints ``try`` before and ``ok`` after
every input: when the child dies, the last ``try`` names the input, which is written to
``--out`` as a reproducer, and the run resumes after it.  Exit status 1 when anything
crashed, failed or yielded no chunk.

The CI test (tests/chunking/test_grammar_fuzz.py) runs ``--child --quick`` once.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Bracket-like openers and closers that some grammar nests.
_PAIRS = [
    ("(", ")"),
    ("[", "]"),
    ("{", "}"),
    ("<", ">"),
    ('"', '"'),
    ("'", "'"),
    ("`", "`"),
    ("/*", "*/"),
    ("(*", "*)"),
    ("{-", "-}"),
    ("#|", "|#"),
    ("${", "}"),
    ("<a>", "</a>"),
    ("begin ", " end"),
]


def _nested(open_: str, close: str, depth: int) -> bytes:
    return (open_ * depth + "x" + close * depth + "\n").encode()


def _special(language: str, depth: int) -> Iterator[tuple[str, bytes]]:
    """The containers each crash-prone family of grammars nests."""
    if language in ("markdown", "rst"):
        yield "quotes", (">" * depth + " hi\n").encode()
        yield "quotes_spaced", ("> " * depth + "hi\n").encode()
        yield "quote_lists", ("> - " * depth + "x\n").encode()
        yield "list_line", ("- " * depth + "x\n").encode()
        yield "ordered_line", ("1. " * depth + "x\n").encode()
        yield "list_indent", "".join("  " * i + "- x\n" for i in range(depth)).encode()
        yield "tab_lists", "".join("\t" * i + "* x\n" for i in range(depth)).encode()
        yield "quote_stairs", "".join(">" * i + " x\n" for i in range(depth)).encode()
    if language in ("yaml", "markdown"):
        yield "map_indent", "".join("  " * i + f"k{i}:\n" for i in range(depth)).encode()
        yield "map_indent1", "".join(" " * i + "k:\n" for i in range(depth)).encode()
        yield "seq_line", ("- " * depth + "x\n").encode()
        yield "complex_keys", ("? " * depth + "x\n").encode()
        yield "compact", ("a:\n" + "".join("  " * i + "- b:\n" for i in range(depth))).encode()
        yield "flow", ("[" * depth + "{a: " * depth + "b" + "}" * depth + "]" * depth).encode()
    # indentation-scoped blocks (Python, Nim, Haskell, GDScript, …)
    # two spaces a level: the depth is what crashes, and four made it 30% of the fuzz time
    yield "indent_blocks", "".join("  " * i + "if x:\n" for i in range(depth)).encode()
    yield "html_tags", ("<div>" * depth + "x" + "</div>" * depth).encode()
    yield "unclosed", ("(" * depth + "[" * depth + "{" * depth).encode()


def candidates(language: str, scale: int, seed: int) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) inputs for one grammar; ``scale`` multiplies depths and lengths.

    Depths start past the 255 levels at which the Markdown and YAML grammars of
    tree-sitter-language-pack 0.13 segfault (measured: FACTS.md, "Grammars that crash").
    """
    rnd = random.Random(f"{language}:{seed}")
    depths = [300] if scale <= 1 else [300, 1000 * scale]
    for depth in depths:
        for open_, close in _PAIRS:
            yield f"nest{open_.strip()}x{depth}", _nested(open_, close, depth)
        for name, data in _special(language, depth):
            yield f"{name}x{depth}", data
    long = 20_000 * scale if scale > 1 else 6_000
    yield "long_line", (" ".join(f"a{i} = b{i}" for i in range(long // 8)) + "\n").encode()
    yield "long_word", b"x" * long + b"\n"
    yield "repeated_tokens", b"x = 1;\n" * (long // 7)
    yield "repeated_defs", b"def f(): pass\nfunction f() {}\nfn f() {}\n" * (long // 40)
    yield "random_ascii", bytes(rnd.randrange(32, 127) for _ in range(long // 2)) + b"\n"
    yield "random_bytes", bytes(rnd.randrange(256) for _ in range(long // 4))
    yield "random_tokens", _random_tokens(rnd, long // 4)


def _random_tokens(rnd: random.Random, n: int) -> bytes:
    tokens = [o for p in _PAIRS for o in p] + ["\n", " ", "    ", "- ", "> ", "x", ":", ";", ","]
    return "".join(rnd.choice(tokens) for _ in range(n // 3)).encode()


def grammars(only: list[str] | None) -> list[str]:
    """Every language of the detection tables that has a bundled grammar."""
    sys.path.insert(0, str(ROOT / "src"))
    from codechunkd.chunking import languages

    names = {*languages._EXTENSIONS.values(), *languages._FILENAMES.values()}
    names |= set(languages._INTERPRETERS.values())
    found = sorted(n for n in names if languages.has_grammar(n))
    return [n for n in found if n in only] if only else found


def _count(texts: Sequence[str]) -> list[int]:
    """A cheap stand-in for the tokenizer: token counts are not what is fuzzed."""
    return [len(t) // 4 for t in texts]


def child(langs: list[str], scale: int, seeds: int, start: int) -> int:
    """Chunk every candidate in this process, printing ``try``/``ok`` lines (see module doc)."""
    from codechunkd.chunking.chunker import chunk

    i = 0
    for lang in langs:
        for seed in range(seeds):
            for name, data in candidates(lang, scale, seed):
                if i >= start:
                    print(f"try {i} {lang} {seed} {name} {len(data)}", flush=True)
                    t0 = time.perf_counter()
                    chunks = chunk(f"fuzz/{name}", data, language=lang, count_tokens=_count)
                    ms = (time.perf_counter() - t0) * 1000
                    kinds = ",".join(sorted({c.language for c in chunks})) or "-"
                    print(f"ok {i} {lang} {seed} {name} {len(chunks)} {kinds} {ms:.0f}", flush=True)
                i += 1
    print("done", flush=True)
    return 0


def _reproduce(lang: str, seed: int, name: str, scale: int, out: Path) -> Path:
    for n, data in candidates(lang, scale, seed):
        if n == name:
            out.mkdir(parents=True, exist_ok=True)
            path = out / re.sub(r"[^A-Za-z0-9_.-]", "_", f"{lang}-{seed}-{n}")
            path.write_bytes(data)
            return path
    raise LookupError(name)


def drive(args: argparse.Namespace, run: Callable[[list[str]], tuple[int, str]]) -> int:
    """Run children until every candidate was tried; report crashes with reproducers."""
    langs = grammars(args.lang)
    base = ["--child", "--scale", str(args.scale), "--seeds", str(args.seeds)]
    base += ["--lang", *langs]
    start, failures, tried = 0, 0, 0
    per_lang: dict[str, int] = {}
    fallbacks: dict[str, int] = {}
    t0 = time.monotonic()
    while True:
        rc, out = run([*base, "--start", str(start)])
        last: list[str] | None = None
        for line in out.splitlines():
            parts = line.split()
            if parts and parts[0] == "try":
                last = parts
            elif parts and parts[0] == "ok":
                last = None
                tried += 1
                per_lang[parts[2]] = per_lang.get(parts[2], 0) + 1
                if parts[5] == "-":
                    failures += 1
                    print(f"NO CHUNKS: {parts[2]} seed {parts[3]} {parts[4]}")
                elif parts[6] != parts[2]:
                    fallbacks[parts[2]] = fallbacks.get(parts[2], 0) + 1
        if rc == 0 and "done" in out:
            break
        if last is None:
            print(f"child exited {rc} outside any input:\n{out[-2000:]}")
            return 1
        _, idx, lang, seed, name, size = last
        failures += 1
        repro = _reproduce(lang, int(seed), name, args.scale, Path(args.out))
        print(f"CRASH rc={rc}: {lang} seed {seed} {name} ({size} bytes); reproducer: {repro}")
        load = f"chunk('x', open('{repro}', 'rb').read(), language='{lang}')"
        print(f'  .venv/bin/python -c "from codechunkd import chunk; {load}"')
        start = int(idx) + 1
    print(f"{tried} inputs over {len(per_lang)} grammars in {time.monotonic() - t0:.0f} s")
    print("inputs per grammar: " + ", ".join(f"{k} {v}" for k, v in sorted(per_lang.items())))
    if fallbacks:
        print("fell back to text: " + ", ".join(f"{k} {v}" for k, v in sorted(fallbacks.items())))
    print(f"failures: {failures}")
    return 1 if failures else 0


def _run_child(argv: list[str]) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, __file__, *argv], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 and proc.stderr:
        print(proc.stderr[-1500:], file=sys.stderr)
    return proc.returncode, proc.stdout


def main() -> int:
    """Parse the command line; ``--child`` chunks in this process, otherwise drive children."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lang", nargs="*", help="only these grammars (default: every one)")
    ap.add_argument("--scale", type=int, default=4, help="depth and length multiplier")
    ap.add_argument("--seeds", type=int, default=3, help="random inputs per grammar")
    ap.add_argument(
        "--out",
        default=str(Path(tempfile.gettempdir()) / "codechunkd-fuzz"),
        help="where reproducers go",
    )
    ap.add_argument("--quick", action="store_true", help="CI size: scale 1, one seed")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.scale, args.seeds = 1, 1
    if args.child:
        return child(grammars(args.lang), args.scale, args.seeds, args.start)
    return drive(args, _run_child)


if __name__ == "__main__":
    sys.exit(main())
