"""Summaries of chunks: extractive at index time, LLM ones from a versioned prompt.

Extractive summaries are made at index time with no LLM: the first paragraph of
the docstring when there is one, else the signature, marked ``extractive``.

LLM summaries are keyed by (content hash, model, :data:`PROMPT_VERSION`) and
marked ``llm:<model>@<prompt version>`` (:func:`llm_source`).  This module
decides what is worth sending (:func:`eligible`), builds the prompt
(:func:`build_messages`: a method gets its class's signature as context, the
code is capped at ``max_input_tokens``) and cleans the answer
(:func:`clean_summary`: code fences and preambles stripped, length capped,
empty or error-looking text rejected with :class:`~codechunkd.errors.BadAnswer`).
Bump :data:`PROMPT_VERSION` whenever the prompt or the cleaning changes: every
LLM summary becomes stale and is regenerated, within the budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from codechunkd.chunking.chunker import Chunk
from codechunkd.errors import BadAnswer

__all__ = [
    "EXTRACTIVE",
    "MAX_SUMMARY_CHARS",
    "PROMPT_VERSION",
    "SummaryInput",
    "build_messages",
    "clean_summary",
    "eligible",
    "extractive_summary",
    "llm_source",
]

EXTRACTIVE = "extractive"
MAX_SUMMARY_CHARS = 300

#: Version of the prompt template and of the answer cleaning (part of every summary's key).
PROMPT_VERSION = "1"

#: Kinds and languages that are prose or data already: their extractive summary suffices.
SKIPPED_KINDS = frozenset({"section", "text", "key", "table"})
SKIPPED_LANGUAGES = frozenset({"markdown", "rst", "text", "json", "yaml", "toml", "csv", "ini"})

SYSTEM_PROMPT = (
    "You summarize source code for a code search index. In one paragraph of plain "
    "English (at most three sentences), say what the code does, what it takes and "
    "returns, and anything a caller must know. Use the names in the code. Do not "
    "repeat the code, do not use Markdown, and do not start with a preamble."
)


def extractive_summary(chunk: Chunk) -> str:
    doc = chunk.docstring.strip()
    if doc:
        first = doc.split("\n\n", 1)[0]
        text = " ".join(first.split())
    else:
        text = " ".join(chunk.signature.split())
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[: MAX_SUMMARY_CHARS - 1].rstrip() + "…"
    return text


def llm_source(model: str) -> str:
    """The ``summary_source`` of a summary made by ``model`` with the current prompt."""
    return f"llm:{model}@{PROMPT_VERSION}"


def eligible(*, kind: str, language: str, token_count: int, min_tokens: int) -> bool:
    """Whether a chunk is worth an LLM summary (code, and not tiny)."""
    return (
        token_count >= min_tokens
        and kind not in SKIPPED_KINDS
        and language not in SKIPPED_LANGUAGES
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryInput:
    """What the prompt is made of, for one chunk."""

    path: str
    """Path of the file (gives the model a hint of the module's purpose)."""
    language: str
    kind: str
    symbol: str
    content: str
    """The chunk's code."""
    context: str = ""
    """Signature of the enclosing class (for a method), else empty."""


def _cap(content: str, max_chars: int) -> str:
    """``content`` cut at a line break to at most ``max_chars`` characters, marked as cut."""
    if len(content) <= max_chars:
        return content
    head = content[:max_chars]
    cut = head.rfind("\n")
    if cut > max_chars // 2:
        head = head[:cut]
    return head.rstrip() + "\n… (rest of the code omitted)"


def build_messages(item: SummaryInput, *, max_input_tokens: int) -> list[dict[str, str]]:
    """The chat messages for one chunk; the code is capped at ``max_input_tokens`` (≈4 chars)."""
    what = f"{item.kind} {item.symbol}".strip() if item.symbol else item.kind
    lines = [f"File: {item.path}", f"Language: {item.language}", f"Chunk: {what}"]
    if item.context:
        lines.append(f"Defined inside: {' '.join(item.context.split())}")
    code = _cap(item.content, max_input_tokens * 4)
    lines += ["", "Code:", f"```{item.language}", code, "```"]
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(lines)},
    ]


# Every pattern here runs on text a server chose: none has two adjacent quantifiers that
# can match the same characters (``\s+(?:a)?\s*`` made a 2,000-character answer take a
# minute, holding the GIL), and the answer is cut to a bound before any of them runs.
_LANGUAGE_TAG = re.compile(r"[\w+-]*")
_PREAMBLE = re.compile(
    r"\s*(?:(?:sure|certainly|of course|okay|ok)[,!.]?\s*)?"
    r"(?:here(?:'s| is)\s+(?:(?:a|an|the|my)\s+)?(?:(?:brief|short|concise|one-paragraph)\s+)?"
    r"(?:summary|description|explanation)[^:\n]*:|"
    r"(?:summary|description)\s*:)\s*",
    re.IGNORECASE,
)
_THINK_OPEN = re.compile("<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile("</think>", re.IGNORECASE)
_ERRORISH = re.compile(
    r"^\s*(?:error\b|exception\b|traceback\b|i'?m sorry|i am sorry|sorry,|"
    r"i can(?:not|'t)\b|as an ai\b|unable to\b|internal server error|rate limit)",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def _drop_thinking(text: str) -> str:
    """``text`` without its ``<think>…</think>`` blocks, in one pass (an unclosed one stays)."""
    parts: list[str] = []
    pos = 0
    while (start := _THINK_OPEN.search(text, pos)) and (
        end := _THINK_CLOSE.search(text, start.end())
    ):
        parts.append(text[pos : start.start()])
        pos = end.end()
    parts.append(text[pos:])
    return "".join(parts)


def _unfence(text: str) -> str:
    """The inside of a code fence that wraps all of ``text`` (its language tag dropped)."""
    if len(text) < 6 or not (text.startswith("```") and text.endswith("```")):
        return text
    inner = text[3:-3]
    tag = _LANGUAGE_TAG.match(inner)
    return inner[tag.end() if tag else 0 :].strip()


def clean_summary(text: str, *, max_chars: int) -> str:
    """The answer made fit to store, or :class:`BadAnswer` when it is not a summary.

    Linear in the answer's length: reasoning blocks are dropped in one pass, then the
    rest is cut to ``4 * max_chars`` characters before any other pattern runs on it.
    """
    text = _drop_thinking(text).strip()[: 4 * max_chars].strip()
    text = _unfence(text)
    preamble = _PREAMBLE.match(text)
    if preamble:
        text = text[preamble.end() :]
    text = text.strip()
    text = " ".join(text.replace("**", "").replace("`", "").split())
    if not text:
        raise BadAnswer("empty summary")
    if _ERRORISH.match(text):
        raise BadAnswer(f"looks like an error, not a summary: {text[:80]!r}")
    if len(text) < 12 or len(text.split()) < 3:
        raise BadAnswer(f"too short to be a summary: {text!r}")
    if len(text) > max_chars:
        head = text[:max_chars]
        ends = [m.end() for m in _SENTENCE_END.finditer(head)]
        if ends and ends[-1] > max_chars // 2:
            text = head[: ends[-1]]
        else:
            text = head[: head.rfind(" ")].rstrip(",;:") + "…" if " " in head else head
    return text
