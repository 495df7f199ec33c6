"""Token counts with the embedding model's own tokenizer, without importing torch.

``tokenizers`` (Rust) reads the model's ``tokenizer.json``: loading it takes
milliseconds, where ``import sentence_transformers`` takes seconds.

Only the number of tokens is needed.  For a BERT uncased tokenizer
(BertNormalizer, BertPreTokenizer, WordPiece) and a pure-ASCII text it is:
the special tokens, plus one per ASCII punctuation character, plus the
WordPiece tokens of each alphanumeric word left once control characters are
deleted, the text lowercased and split on whitespace and punctuation.  That is
a few C-level bytes operations per text and a dict cache word → count (filled
by the tokenizer's own WordPiece model): 7-10x less CPU than encoding.  The fast
path is on only when tokenizer.json is exactly that configuration, and only for
ASCII lines holding no added token (``[CLS]``…, matched in the raw text); the
other lines of a text go to the real tokenizer (a newline always ends a word).
tests/chunking/test_tokens.py checks the counts are the tokenizer's, exactly.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codechunkd.config.settings import BUNDLED_MODEL
from codechunkd.embedding.models import model_path

if TYPE_CHECKING:
    from tokenizers.models import Model

# BERT's _is_punctuation on ASCII (Rust's char::is_ascii_punctuation): each is its own token
_PUNCT = bytes([*range(33, 48), *range(58, 65), *range(91, 97), *range(123, 127)])
# deleted by clean_text: control characters, except \t \n \r which are whitespace
_CONTROL = bytes([*range(9), 11, 12, *range(14, 32), 127])
# lowercase, and punctuation to a space so that bytes.split() leaves the words alone
_WORDS_TABLE = bytes(32 if b in _PUNCT else b + 32 if 65 <= b <= 90 else b for b in range(256))
# word → WordPiece count entries kept at most (~90 B each); the Python stdlib has ~63k words
_CACHE_MAX = 100_000


class _WordPieces(dict[bytes, int]):
    """Lowercase ASCII word → its number of WordPiece tokens, asked of the model on first use.

    ``__missing__`` keeps ``sum(map(pieces.__getitem__, words))`` in C on hits.  The
    cache is cleared when full; two threads filling it at once store the same values.
    """

    def __init__(self, model: Model) -> None:
        super().__init__()
        self._model = model

    def __missing__(self, word: bytes) -> int:
        # the tokenizer's own WordPiece (greedy longest match first, [UNK] for a word
        # too long or not matched): ~3 µs a word, once per distinct word
        n = len(self._model.tokenize(word.decode("ascii")))
        if len(self) >= _CACHE_MAX:
            self.clear()
        self[word] = n
        return n


class _BertAsciiCounter:
    """Exact token counts of ASCII lines for a BERT uncased tokenizer (see the module doc)."""

    def __init__(self, specials: int, added: list[bytes], model: Model) -> None:
        self.specials = specials
        self._added = added
        self._pieces = _WordPieces(model)

    @classmethod
    def from_config(cls, config: dict[str, Any], model: Model) -> _BertAsciiCounter | None:
        """The counter of a tokenizer (its JSON and model), None unless it is BERT uncased."""
        norm = config.get("normalizer") or {}
        wordpiece = config.get("model") or {}
        specials = _special_count(config.get("post_processor") or {})
        added = config.get("added_tokens") or []
        vocab = wordpiece.get("vocab")
        if not (
            # handle_chinese_chars and strip_accents do nothing to ASCII: any value will do
            norm.get("type") == "BertNormalizer"
            and norm.get("clean_text") is True
            and norm.get("lowercase") is True
            and config.get("pre_tokenizer") == {"type": "BertPreTokenizer"}
            and wordpiece.get("type") == "WordPiece"
            and isinstance(vocab, dict)
            and wordpiece.get("unk_token") in vocab
            and wordpiece.get("continuing_subword_prefix") == "##"
            and isinstance(wordpiece.get("max_input_chars_per_word"), int)
            and specials is not None
            # added tokens are matched in the raw text; normalized ones would need more,
            # and one spanning lines would break the count by lines
            and all(t.get("normalized") is False and "\n" not in t["content"] for t in added)
        ):
            return None
        contents = [t["content"] for t in added]
        return cls(specials, [c.encode("ascii") for c in contents if c.isascii()], model)

    def count(self, text: str) -> tuple[int, list[str]]:
        """The text's tokens counted here (special tokens included), and the lines left to
        the real tokenizer: non-ASCII ones, and those holding an added token.

        A newline always ends a word and no added token spans one, so a text's count is
        its special tokens plus the counts of its lines, each without special tokens.
        """
        if text.isascii():
            raw = text.encode("ascii")
            if not any(map(raw.__contains__, self._added)):
                return self.specials + self._ascii(raw), []
        n = self.specials
        left: list[str] = []
        for line in text.split("\n"):
            if line.isascii():
                raw = line.encode("ascii")
                if not any(map(raw.__contains__, self._added)):
                    n += self._ascii(raw)
                    continue
            left.append(line)
        return n, left

    def _ascii(self, raw: bytes) -> int:
        """Tokens of ASCII text holding no added token, without special tokens."""
        punct = len(raw) - len(raw.translate(None, _PUNCT))
        # control characters go before the split: "a\x00b" is the single word "ab"
        words = raw.translate(_WORDS_TABLE, _CONTROL).split()
        return punct + sum(map(self._pieces.__getitem__, words))


def _special_count(post: dict[str, Any]) -> int | None:
    """Special tokens the post-processor adds around a single sequence, None if unsupported."""
    if post.get("type") == "BertProcessing":
        return 2
    if post.get("type") != "TemplateProcessing":
        return None
    single = post.get("single") or []
    if [p["Sequence"].get("id") for p in single if "Sequence" in p] != ["A"]:
        return None
    try:
        return sum(
            len(post["special_tokens"][p["SpecialToken"]["id"]]["ids"])
            for p in single
            if "SpecialToken" in p
        )
    except (KeyError, TypeError):
        return None


class TokenCounter:
    """Counts tokens of texts as the model's tokenizer splits them (special tokens included)."""

    def __init__(self, tokenizer_json: Path) -> None:
        from tokenizers import Tokenizer

        text = tokenizer_json.read_text(encoding="utf-8")
        self._tok = Tokenizer.from_str(text)
        self._tok.no_truncation()
        self._tok.no_padding()
        self._fast = _BertAsciiCounter.from_config(json.loads(text), self._tok.model)

    def __call__(self, texts: Sequence[str]) -> list[int]:
        fast = self._fast
        if fast is None:
            return self._encode(texts)
        counts: list[int] = []
        owners: list[int] = []  # text index of each line left to the tokenizer
        left: list[str] = []
        for i, text in enumerate(texts):
            n, lines = fast.count(text)
            counts.append(n)
            if lines:
                owners.extend([i] * len(lines))
                left.extend(lines)
        specials = fast.specials
        for i, n in zip(owners, self._encode(left), strict=True):
            counts[i] += n - specials
        return counts

    def _encode(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        # encode_batch_fast skips the offsets we do not need (~30% less CPU, same ids)
        return [len(e.ids) for e in self._tok.encode_batch_fast(list(texts))]


class CharCounter:
    """Fallback when no tokenizer file is at hand: about 4 characters a token."""

    def __call__(self, texts: Sequence[str]) -> list[int]:
        return [max(1, len(t) // 4) for t in texts]


@functools.cache
def counter_for(model: str = BUNDLED_MODEL) -> TokenCounter | CharCounter:
    """The token counter of a model (cached per model; the tokenizer is immutable)."""
    path = model_path(model)
    if path is not None and (path / "tokenizer.json").is_file():
        return TokenCounter(path / "tokenizer.json")
    return CharCounter()
