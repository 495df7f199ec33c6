"""TokenCounter's count-only fast path gives exactly the tokenizer's counts.

Reference: ``len(tokenizer.encode(text).ids)`` with the bundled model's real
tokenizer.json (no truncation, no padding, special tokens included), on real
code from the Python standard library, on the chunker's embed texts, and on
generated ASCII text that aims at the corners of BERT's pipeline.
"""

from __future__ import annotations

import json
import sysconfig
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from codechunkd.chunking.chunker import chunk
from codechunkd.chunking.tokens import _CACHE_MAX, TokenCounter, counter_for
from codechunkd.config.settings import ChunkingSettings
from codechunkd.embedding.models import bundled_model_path

TOKENIZER_JSON = bundled_model_path() / "tokenizer.json"
_STDLIB = Path(sysconfig.get_paths()["stdlib"])
# a few hundred modules of every package, small enough to keep the test fast
_FILES = [
    p
    for p in sorted(_STDLIB.rglob("*.py"))
    if "site-packages" not in p.parts and p.stat().st_size < 12_000
][::5]

Reference = Callable[[Sequence[str]], list[int]]


def _real(path: Path) -> Tokenizer:
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return tok


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter(TOKENIZER_JSON)


@pytest.fixture(scope="module")
def reference() -> Reference:
    tok = _real(TOKENIZER_JSON)
    return lambda texts: [len(tok.encode(t).ids) for t in texts]


@pytest.fixture(scope="module")
def stdlib_texts() -> list[str]:
    """Whole files, 1,500-character pieces and single lines."""
    texts = []
    for p in _FILES:
        src = p.read_bytes().decode("utf-8", "replace")
        texts.append(src)
        texts.extend(src[i : i + 1500] for i in range(0, len(src), 1500))
        texts.extend(src.splitlines()[:40])
    return texts


def _zero(texts: Sequence[str]) -> list[int]:
    return [0] * len(texts)


def test_the_bundled_tokenizer_gets_the_fast_path(counter: TokenCounter) -> None:
    """Otherwise every other test here would only check the tokenizer against itself."""
    assert counter._fast is not None
    assert isinstance(counter_for(), TokenCounter)
    assert counter_for()._fast is not None


def test_stdlib_code_is_counted_exactly(
    counter: TokenCounter, reference: Reference, stdlib_texts: list[str]
) -> None:
    """Token counts of real stdlib code equal the reference tokenizer's, mostly through
    the ASCII fast path."""
    texts = stdlib_texts
    assert len(_FILES) >= 200
    assert sum(t.isascii() for t in texts) > 0.9 * len(texts), "mostly the fast path"
    assert counter(texts) == reference(texts)


def test_embed_texts_are_counted_exactly(counter: TokenCounter, reference: Reference) -> None:
    """What the chunker counts: an English header, then the code."""
    settings = ChunkingSettings(budget=400)
    texts = [
        c.embed_text
        for p in _FILES[::4]
        for c in chunk(str(p), p.read_bytes(), settings, count_tokens=_zero)
    ]
    assert len(texts) > 100
    assert counter(texts) == reference(texts)


_ASCII = st.characters(max_codepoint=127)
_PIECES = st.one_of(
    st.text(_ASCII, max_size=30),
    st.text(st.sampled_from("\x00\x01\x0b\x0c\x1c\x1f\x7f\t\n\r "), max_size=5),  # control, space
    st.text(st.sampled_from("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"), min_size=1, max_size=8),
    st.text(st.sampled_from("0123456789_"), min_size=1, max_size=12),
    st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzXYZ"), min_size=1, max_size=130),
    st.integers(95, 105).map(lambda n: "a" * n),  # around max_input_chars_per_word (100)
    st.sampled_from(["[CLS]", "[SEP]", "[UNK]", "[MASK]", "[PAD]", "[cls]", "[CLS", "##ing"]),
    st.sampled_from(["def __init__(self):", "Returns the value.", "x1y2z3", "HTTPServer"]),
)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.lists(_PIECES, max_size=12).map("".join), min_size=1, max_size=8))
@example(texts=[""])
@example(texts=[" ", "\t\n\r ", "\x0b\x0c\x1c", "\x00"])
@example(texts=["a" * 100, "a" * 101, "a" * 100 + "!" + "b" * 101, "\x00".join(["a" * 60] * 2)])
def test_generated_ascii_is_counted_exactly(
    counter: TokenCounter, reference: Reference, texts: list[str]
) -> None:
    """Generated ASCII texts get exactly the reference tokenizer's counts."""
    assert counter(texts) == reference(texts)


def test_non_ascii_texts_get_the_real_count_in_order(
    counter: TokenCounter, reference: Reference
) -> None:
    """Non-ASCII texts fall back to the real tokenizer and keep their order in the
    answer; an empty list gives an empty list."""
    texts = ["café naïve", "plain ascii", "中文 and 😀", "[CLS] x", "", "Ünïcödé\u00a0space", "x"]
    assert counter(texts) == reference(texts)
    assert counter([]) == []


def test_lines_left_to_the_tokenizer_add_up_to_the_text(
    counter: TokenCounter, reference: Reference
) -> None:
    """A text with a few non-ASCII (or [CLS]) lines: those lines go to the tokenizer."""
    texts = [
        "def f():\n    return 'café'  # naïve\n\nx = 1\n",
        "\n\n中文\n",
        "a [SEP] b\nc\r\nd ü\n[MASK]\n",
        "\u0301accent first\n\u0301\n",
        "é",
    ]
    assert counter(texts) == reference(texts)


_ANY = st.one_of(
    _PIECES,
    st.text(max_size=12),
    st.sampled_from(["é", "\u0301", "中", "😀", "\u00a0", "\u2028", "\ufeff", "\r\n", "\n"]),
)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.lists(_ANY, max_size=16).map("".join), min_size=1, max_size=8))
def test_generated_text_with_non_ascii_lines_is_counted_exactly(
    counter: TokenCounter, reference: Reference, texts: list[str]
) -> None:
    """Generated texts mixing ASCII and non-ASCII lines get exactly the reference counts."""
    assert counter(texts) == reference(texts)


def test_the_word_cache_stays_bounded(reference: Reference) -> None:
    """The word cache never grows past its bound, and counts stay exact after it overflows."""
    counter = TokenCounter(TOKENIZER_JSON)
    assert counter._fast is not None
    sample = ["def parse_args(argv): return ArgumentParser().parse(argv[1:])  # CLI"]
    assert counter(sample) == reference(sample)
    counter([" ".join(f"w{i}x" for i in range(_CACHE_MAX + 5000))])  # more words than it keeps
    assert 0 < len(counter._fast._pieces) <= _CACHE_MAX
    assert counter(sample) == reference(sample)


def test_threads_sharing_a_counter_get_exact_counts(
    reference: Reference, stdlib_texts: list[str]
) -> None:
    """Four threads filling one counter's empty cache at once each get exact counts."""
    counter = TokenCounter(TOKENIZER_JSON)  # an empty cache, filled by the four at once
    texts = stdlib_texts[::5]
    expected = reference(texts)
    results: list[list[int]] = []

    def run(offset: int) -> None:
        mine = texts[offset:] + texts[:offset]
        got = counter(mine)
        results.append(got[len(texts) - offset :] + got[: len(texts) - offset])

    threads = [threading.Thread(target=run, args=(i * 97,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 4


def _edit(config: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    for k in parents:
        config = config[int(k)] if isinstance(config, list) else config[k]
    config[last] = value


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("normalizer.lowercase", False),
        ("normalizer.clean_text", False),
        ("normalizer", {"type": "Lowercase"}),
        ("pre_tokenizer", {"type": "Whitespace"}),
        ("model.continuing_subword_prefix", "@@"),
        ("post_processor", None),
        ("post_processor", {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True}),
        ("added_tokens.1.normalized", True),
        ("added_tokens.1.content", "[A\nB]"),
    ],
)
def test_other_configurations_use_the_tokenizer(tmp_path: Path, key: str, value: Any) -> None:
    """A tokenizer.json the fast path does not model (other normalizer, pre-tokenizer,
    post-processor, added tokens) disables it, and counts come from the real tokenizer."""
    config = json.loads(TOKENIZER_JSON.read_text(encoding="utf-8"))
    _edit(config, key, value)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    counter = TokenCounter(path)
    assert counter._fast is None
    tok = _real(path)
    texts = ["Parse ARGS:\tdef f(x_1, y): return x_1 ** 2  # [UNK]", "", "naïve"]
    assert counter(texts) == [len(tok.encode(t).ids) for t in texts]


def test_a_template_with_more_special_tokens_is_counted(tmp_path: Path) -> None:
    """[CLS] [CLS] text [SEP]: the count follows the template, not a constant 2."""
    config = json.loads(TOKENIZER_JSON.read_text(encoding="utf-8"))
    single = config["post_processor"]["single"]
    config["post_processor"]["single"] = [single[0], *single]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    counter = TokenCounter(path)
    assert counter._fast is not None
    tok = _real(path)
    texts = ["def f(x): return x", ""]
    assert counter(texts) == [len(tok.encode(t).ids) for t in texts] == [11, 3]
