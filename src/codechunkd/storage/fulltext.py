"""The full-text side of a chunk row: ``fts_text``, and the words of identifiers.

Owns what the writer puts in ``fts_text`` (a row's names line, summary, content and the
words of its identifiers) and the identifier words a query gains (``code_words``, used by
``storage/search.py``), so that the index and a query hold the same words.  Pure text: it
must not touch LanceDB or any table (how the index tokenizes ``fts_text`` is
``FTS_CONFIG``, ``storage/upkeep.py``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codechunkd.chunking.chunker import Chunk

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def identifier_words(name: str) -> str:
    """``DataLoader.load_all`` -> ``data loader load all``."""
    return " ".join(w.lower() for w in _WORD.findall(name))


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"[A-Za-z0-9]+")
"""What the full-text index's tokenizer (``simple``) makes of an identifier: it cuts at
``_`` and keeps ``addBusinessDays`` whole."""


def code_words(text: str) -> str:
    """The words of the identifiers in ``text`` that the full-text tokenizer does not see.

    Identifiers are words run together, and the tokenizer cuts only at punctuation:
    ``addBusinessDays`` gains ``add business days`` and ``parse_header_links`` gains its
    whole, ``parseheaderlinks``. Each word once, in every language; the index and the
    query get the same words, so ``addBusinessDays``, ``add_business_days`` and "add
    business days" all meet.
    """
    seen: set[str] = set()
    out: list[str] = []
    for name in dict.fromkeys(_IDENTIFIER.findall(text)):
        words = [w.lower() for w in _WORD.findall(name)]
        if len(words) < 2:
            continue
        tokens = {t.lower() for t in _TOKEN.findall(name)}
        for w in (*words, "".join(words)):
            if len(w) > 1 and w not in tokens and w not in seen:
                seen.add(w)
                out.append(w)
    return " ".join(out)


def fts_text(chunk: Chunk, summary: str) -> str:
    """The full-text side of a chunk: a line of its names and context header, then its
    summary and content (the header's words: +0.03 BM25 Recall@5, bench/retrieval.py),
    then the words of the content's identifiers (``code_words``)."""
    names = list(dict.fromkeys([chunk.symbol, *chunk.names] if chunk.symbol else chunk.names))
    words = " ".join(f"{n} {identifier_words(n)}" for n in names)
    header = " ".join(chunk.header.split())
    return f"{words} {header}\n{summary}\n{chunk.content}\n{code_words(chunk.content)}"


def fts_text_with_summary(old: str, summary: str, content: str) -> str:
    """An ``fts_text`` with its summary replaced (the names line is kept)."""
    return f"{old.split(chr(10), 1)[0]}\n{summary}\n{content}\n{code_words(content)}"
