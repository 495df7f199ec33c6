"""Property tests of the chunker: coverage, exact spans, budget and determinism.

Run on real files nobody on this project wrote (the Python standard library) and
on generated sources, in several languages, at random budgets.
"""

from __future__ import annotations

import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from codechunkd.chunking.chunker import chunk, chunk_many
from codechunkd.config.settings import ChunkingSettings

Checker = Any
_STDLIB = Path(sysconfig.get_paths()["stdlib"])
_FILES = sorted(p for p in _STDLIB.glob("*.py") if p.stat().st_size < 200_000)
_FAST = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _zero(texts: Sequence[str]) -> list[int]:
    return [0] * len(texts)


@_FAST
@given(path=st.sampled_from(_FILES), budget=st.integers(min_value=40, max_value=4000))
def test_stdlib_files_keep_the_invariants(path: Path, budget: int, check: Checker) -> None:
    """Every stdlib module: full coverage, exact spans, leaves within the budget."""
    source = path.read_bytes().decode("utf-8", "replace").encode()
    chunks = chunk(str(path), source, ChunkingSettings(budget=budget), count_tokens=_zero)
    check(source, chunks, budget)
    assert chunks == chunk(str(path), source, ChunkingSettings(budget=budget), count_tokens=_zero)


_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_STATEMENT = st.one_of(
    _NAMES.map(lambda n: f"{n} = {n}({n}, 1)"),
    _NAMES.map(lambda n: f"return {n}"),
    _NAMES.map(lambda n: f"# {n} comment"),
    _NAMES.map(lambda n: f'"""{n} doc"""'),
    st.just("pass"),
    st.just('x = """multi\nline\n string"""'),
    st.just("if x:\n    y = [1,\n 2, 3]"),
)


@st.composite
def _python_block(draw: st.DrawFn, depth: int = 0) -> str:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        choice = draw(st.integers(0, 9 if depth < 3 else 5))
        if choice <= 5:
            lines.append(draw(_STATEMENT))
        else:
            name = draw(_NAMES)
            head = draw(
                st.sampled_from(
                    [f"def {name}(a, b=1):", f"class {name}(Base):", f"async def {name}():"]
                )
            )
            deco = draw(st.sampled_from(["", "@decorator\n", "# leading\n"]))
            body = draw(_python_block(depth + 1))
            lines.append(deco + head + "\n" + _indent(body))
        lines.append(draw(st.sampled_from(["", "\n", "\n\n"])))
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("    " + line if line.strip() else line for line in text.split("\n"))


@_FAST
@given(
    source=_python_block(),
    budget=st.integers(min_value=5, max_value=400),
    crlf=st.booleans(),
    merge=st.booleans(),
)
def test_generated_python_keeps_the_invariants(
    source: str, budget: int, crlf: bool, merge: bool, check: Checker
) -> None:
    """Generated (sometimes invalid) Python at tiny budgets, with LF or CRLF line ends."""
    text = source.replace("\n", "\r\n") if crlf else source
    data = text.encode()
    cfg = ChunkingSettings(budget=budget, merge_siblings=merge)
    chunks = chunk("gen.py", data, cfg, count_tokens=_zero)
    check(data, chunks, budget)


_ALPHABET = st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs", "Cc"])


@_FAST
@example(text="0\x1f0", path="a.txt", budget=1)  # \x1f is not whitespace to the budget
@given(
    text=st.text(alphabet=_ALPHABET, max_size=600),
    path=st.sampled_from(
        ["a.txt", "README.md", "a.json", "a.yaml", "a.toml", "a.js", "a.rs", "a.go", "doc.rst"]
    ),
    budget=st.integers(min_value=1, max_value=200),
)
def test_arbitrary_text_in_any_language_keeps_the_invariants(
    text: str, path: str, budget: int, check: Checker
) -> None:
    """Random text (mostly syntax errors) parsed by each grammar still tiles exactly."""
    data = text.encode()
    chunks = chunk(path, data, ChunkingSettings(budget=budget), count_tokens=_zero)
    check(data, chunks, budget)


@_FAST
@example(items=[("_0", 0)], nested=1, budget=8)  # closing braces once overflowed a key
@given(
    items=st.lists(st.tuples(_NAMES, st.integers(0, 10**9)), min_size=1, max_size=30),
    nested=st.integers(0, 5),
    budget=st.integers(min_value=5, max_value=300),
)
def test_generated_data_files_keep_the_invariants(
    items: list[tuple[str, int]], nested: int, budget: int, check: Checker
) -> None:
    """JSON, YAML and TOML made of random keys, nested a few levels."""
    inner = ", ".join(f'"{k}{i}": {v}' for i, (k, v) in enumerate(items))
    js = "".join(f'{{"k{i}": ' for i in range(nested)) + "{" + inner + "}" + "}" * nested
    yml = "\n".join(f"{k}{i}:\n  v: {v}\n  w: [{v}, {v}]" for i, (k, v) in enumerate(items))
    tml = "\n".join(f"[t{i}]\n{k} = {v}\nx = 'y'" for i, (k, v) in enumerate(items))
    for path, text in (("a.json", js), ("a.yaml", yml), ("a.toml", tml)):
        data = text.encode()
        chunks = chunk(path, data, ChunkingSettings(budget=budget), count_tokens=_zero)
        check(data, chunks, budget)


def nws(text: str) -> int:
    return sum(1 for ch in text if ch not in " \t\r\n\f\v")


@pytest.mark.slow
def test_every_stdlib_file_keeps_the_invariants_at_the_default_budget() -> None:
    """The benchmark corpus, all of it (bench/chunking.py): coverage, spans, budget, parents."""
    import numpy as np

    budget = ChunkingSettings().budget
    not_ws = np.ones(256, dtype=bool)
    not_ws[list(b" \t\r\n\f\v")] = False
    files = [
        (str(p), p.read_bytes().decode("utf-8", "replace").encode())
        for p in sorted(_STDLIB.rglob("*.py"))
        if "site-packages" not in p.parts
    ]
    assert len(files) > 1000
    pairs = iter(files)
    for (path, source), chunks in zip(
        files, chunk_many(pairs, workers=2, count_tokens=_zero), strict=True
    ):
        cover = np.zeros(len(source), dtype=np.int32)
        ids = {c.id for c in chunks}
        assert len(ids) == len(chunks), path
        for c in chunks:
            assert c.parent_id is None or c.parent_id in ids, path
            if c.synthetic:
                continue
            assert c.content == source[c.start_byte : c.end_byte].decode(), (path, c.symbol)
            cover[c.start_byte : c.end_byte] += 1
            if len(c.content) > budget and nws(c.content) > budget:
                assert len(c.content.split()) == 1, (path, c.kind, c.symbol, c.start_line)
        counted = not_ws[np.frombuffer(source, dtype=np.uint8)]
        assert bool((cover[counted] == 1).all()), (path, int((cover[counted] != 1).sum()))
