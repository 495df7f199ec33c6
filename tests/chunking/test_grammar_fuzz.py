"""Parsing that cannot take the process down (issue #15 row 1).

Some bundled grammars segfault on deep nesting (Markdown at 255 quotes, YAML at 254
indentation levels, Agda at 257 nested comments): a crash, not an exception.  Inputs that
could crash run in a child process here, so a regression fails a test with the input
named instead of killing pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import Repo, scaled

from codechunkd.chunking import _guard, languages
from codechunkd.chunking.chunker import chunk
from codechunkd.chunking.languages import get_parser

ROOT = Path(__file__).resolve().parents[2]
FUZZ = ROOT / "scripts" / "fuzz_grammars.py"
EXE = str(Path(sys.executable).parent / "codechunkd")

#: The reproductions of the issue: 300 nested quotes (259 bytes crash already), 260 levels.
DEEP_MARKDOWN = b">" * 300 + b" quokka\n"
DEEP_YAML = "".join("  " * i + f"k{i}:\n" for i in range(260)).encode() + b"  " * 260 + b"wombat\n"


def _count(texts: list[str]) -> list[int]:
    return [len(t) // 4 for t in texts]


def _chunk_in_child(path: str, source: bytes) -> list[tuple[str, str]]:
    """(language, content) of ``chunk(path, source)``, computed in a child process."""
    code = (
        "import sys, json\n"
        "from codechunkd.chunking.chunker import chunk\n"
        "cs = chunk(sys.argv[1], sys.stdin.buffer.read(), count_tokens=lambda t: [1] * len(t))\n"
        "print(json.dumps([[c.language, c.content] for c in cs]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, path], input=source, capture_output=True, timeout=120
    )
    assert done.returncode == 0, f"chunk({path!r}) died: rc {done.returncode} {done.stderr!r}"
    last = done.stdout.splitlines()[-1]  # after the log line saying why it is text
    return [(lang, content) for lang, content in json.loads(last)]


@pytest.mark.parametrize(
    ("path", "lang", "source", "word"),
    [
        ("README.md", "markdown", DEEP_MARKDOWN, "quokka"),
        ("README.md", "markdown", b"> - " * 200 + b"quokka\n", "quokka"),
        ("deep.yaml", "yaml", DEEP_YAML, "wombat"),
        ("deep.agda", "agda", b"{-" * 300 + b" quokka " + b"-}" * 300, "quokka"),
        ("quotes.agda", "agda", b"'" * 600 + b"quokka" + b"'" * 600, "quokka"),
    ],
)
def test_inputs_that_crash_a_grammar_are_chunked_as_text(
    path: str, lang: str, source: bytes, word: str
) -> None:
    """Each input segfaults its grammar when parsed directly (checked in a child); through
    chunk() it yields text chunks holding every byte, and the process lives."""
    direct = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from codechunkd.chunking.languages import get_parser; "
            f"get_parser({lang!r}).parse(sys.stdin.buffer.read())",
        ],
        input=source,
        capture_output=True,
        timeout=120,
    )
    assert direct.returncode < 0, "the grammar no longer crashes: the guard may be loosened"
    chunks = _chunk_in_child(path, source)
    assert chunks and {lang for lang, _ in chunks} == {"text"}
    assert word in "".join(content for _, content in chunks)


def test_normal_nesting_is_still_parsed_by_the_grammar() -> None:
    """Below the guard's depth (a margin under the crash), Markdown and YAML keep their
    grammar: sections and keys, not text."""
    md = (
        b"# Title\n\n"
        + b"> " * 20
        + b"quoted\n\n"
        + b"".join(b"  " * i + b"- x\n" for i in range(30))
    )
    yml = b"".join(b"  " * i + f"k{i}:\n".encode() for i in range(60)) + b"  " * 60 + b"v\n"
    assert _guard.too_deep("markdown", md) is None
    assert _guard.too_deep("yaml", yml) is None
    assert {c.language for c in chunk("a.md", md, count_tokens=_count)} == {"markdown"}
    assert {c.language for c in chunk("a.yaml", yml, count_tokens=_count)} == {"yaml"}
    blank_lines = b"k:\n" + b" " * 600 + b"\n  v: 1\n"
    assert _guard.too_deep("yaml", blank_lines) is None


def test_compact_yaml_nesting_is_caught_before_the_parse() -> None:
    """Sequences of mappings at one indentation step per two levels (the grammar dies at
    127 such lines, killed for memory): too deep at 100 lines, fine at 30."""
    compact = b"a:\n" + b"".join(b"  " * i + b"- b:\n" for i in range(100))
    assert _guard.too_deep("yaml", compact) is not None
    assert _guard.too_deep("yaml", compact[: compact.index(b"  " * 30 + b"-")]) is None


def test_risky_input_that_parses_keeps_its_grammar() -> None:
    """A long punctuation run is tried in the child process first; when the grammar
    survives it, the file is chunked by its grammar (the probe costs time, not quality)."""
    source = b"x = [" + b"[" * 400 + b"1" + b"]" * 400 + b"]\n"
    assert _guard.risky("python", source)
    assert _guard.survives("python", source, 10.0) is None
    assert {c.language for c in chunk("a.py", source, count_tokens=_count)} == {"python"}


def test_a_parse_past_its_deadline_gives_up() -> None:
    """tree-sitter's progress callback cancels a parse that runs too long: None, promptly,
    and the parser parses the next file normally."""
    parser = get_parser("json")
    source = b"[" * 200_000 + b"]" * 200_000
    t0 = time.monotonic()
    assert _guard.parse(parser, source, 0.0) is None
    assert time.monotonic() - t0 < scaled(5)
    tree = _guard.parse(parser, b"[1]", 5.0)
    assert tree is not None and str(tree.root_node) == "(document (array (number)))"


def test_a_parse_read_in_slices_is_the_parse_of_the_whole() -> None:
    """The guarded parse hands tree-sitter the source in small slices (``_READ_SLICE``):
    characters of two, three and four bytes across every slice boundary, and Perl, whose
    scanner reads again at each token, give the tree a bytestring gives."""
    sub = "sub f{ my $s = 'ä€😀'; return $s x 2 } # ü\n"
    for language, text in (
        ("python", "x = 'ä€😀'  # ü\n" * 1000),
        ("perl", "package A;\n" + sub * 300 + "=head1 NAME\n\nA - é\n\n=cut\n"),
    ):
        source = text.encode()
        assert len(source) > 20 * _guard._READ_SLICE
        tree = _guard.parse(get_parser(language), source, 30.0)
        assert tree is not None
        assert str(tree.root_node) == str(get_parser(language).parse(source).root_node)
        assert not tree.root_node.has_error


@pytest.mark.slow
def test_every_grammar_survives_the_fuzz_inputs() -> None:
    """scripts/fuzz_grammars.py --quick in a child: nested brackets, quotes, comments, tags,
    Markdown/YAML containers, deep indentation, long lines, repeated tokens and random bytes
    for every bundled grammar; the child exits 0 and every input yields chunks."""
    done = subprocess.run(
        [sys.executable, str(FUZZ), "--child", "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = done.stdout.splitlines()
    tried = [line for line in lines if line.startswith("try ")]
    oks = [line.split() for line in lines if line.startswith("ok ")]
    last = tried[-1] if tried else "(none)"
    assert done.returncode == 0 and lines[-1:] == ["done"], (
        f"the child died (rc {done.returncode}) on: {last}\n{done.stderr[-2000:]}"
    )
    assert len(oks) == len(tried)
    names = {*languages._EXTENSIONS.values(), *languages._FILENAMES.values()}
    names |= set(languages._INTERPRETERS.values())
    bundled = {n for n in names if languages.has_grammar(n)}
    assert {ok[2] for ok in oks} == bundled, "every bundled grammar was fuzzed"
    assert len(oks) >= 20 * len(bundled)
    empty = [" ".join(ok[2:5]) for ok in oks if ok[5] == "0"]
    assert not empty, f"inputs with no chunk: {empty}"


@pytest.mark.slow
def test_index_survives_the_crashing_files_and_finds_them_as_text(
    repo: Repo, index_dir: Path
) -> None:
    """The issue's reproduction, end to end: a committed 300-quote README.md and a 260-level
    YAML file; `codechunkd index` exits 0 with no traceback and no skip, and both files are
    found by a text search."""
    repo.write("README.md", DEEP_MARKDOWN)
    repo.write("conf/deep.yaml", DEEP_YAML)
    repo.write("app.py", "def main():\n    return 1\n")
    repo.commit()
    where = ["--index-dir", str(index_dir)]
    done = subprocess.run(
        [EXE, "index", str(repo.path), *where, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["skipped"] == {}
    for word, path in [("quokka", "README.md"), ("wombat", "conf/deep.yaml")]:
        hits = subprocess.run(
            [EXE, "search", word, "--mode", "text", "--json", *where],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert hits.returncode == 0 and "Traceback" not in hits.stderr, hits.stderr
        assert any(h["path"] == path for h in json.loads(hits.stdout)), hits.stdout
