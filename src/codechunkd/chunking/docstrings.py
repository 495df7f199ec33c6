"""A definition's documentation as the chunker reads it: a Python docstring, the doc
comments above a definition (``//``, ``#``, ``/** */``, Perl's POD), and the first sentence
of either (the context header's note)."""

from __future__ import annotations

import inspect
import re
from typing import Final

from tree_sitter import Node

from codechunkd.chunking.macros import is_line_macro
from codechunkd.chunking.names import MAX_NAME
from codechunkd.chunking.rules import Rules

__all__ = ["docstring", "module_summary", "summary"]

_COMMENT_MARK: Final = re.compile(r"^\s*(?:///?|//!|/\*+!?|\*+(?!/)|#+|--+|;+|%+|'|REM\b)?[ \t]?")
_STR_PREFIXES: Final = "rRbBuUfF"
_DOCSTRING_START: Final = re.compile(rb"[ \t\r\n\f\v]*[rRbBuUfF]*['\"]")
_SENTENCE: Final = re.compile(r"(.+?[.!?])(?:\s|$)")


def module_summary(root: Node) -> str:
    """First sentence of a Python module's docstring, or ``""``."""
    if not root.named_child_count:
        return ""
    first = root.named_child(0)
    if first is not None and first.type == "expression_statement":
        first = first.named_child(0)
    if first is None or first.type != "string":
        return ""
    return summary(_clean_string((first.text or b"").decode("utf-8", "replace")))


def summary(doc: str) -> str:
    """The first sentence of a docstring, at most 16 words and :data:`MAX_NAME` characters
    (every chunk of its module or class repeats it: one 100 KB word made 60 MB of rows)."""
    text = " ".join(doc.split())
    m = _SENTENCE.match(text)
    words = (m.group(1) if m else text).split()
    short = " ".join(words[:16])
    if len(short) > MAX_NAME:
        return f"{short[:MAX_NAME]} …"
    return short + (" …" if len(words) > 16 else "")


def docstring(src: bytes, body: Node | None, comments: tuple[Node, ...], rules: Rules) -> str:
    """A definition's docstring (Python) or the doc comments before it; ``body`` is its body."""
    # the body's first statement is a string only if the body starts like one: the tree is
    # read for those only (most definitions have no docstring)
    if (
        rules.python_docstrings
        and body is not None
        and body.named_child_count
        and _DOCSTRING_START.match(src, body.start_byte) is not None
    ):
        first = body.named_child(0)
        if first is not None and first.type == "expression_statement" and first.named_child_count:
            first = first.named_child(0)
        if first is not None and first.type in ("string", "concatenated_string"):
            raw = src[first.start_byte : first.end_byte]
            return _clean_string(raw.decode("utf-8", "replace"))
    if not comments:
        return ""
    lines: list[str] = []
    for c in comments:
        if c.type == "pod":  # Perl: the paragraphs, without the commands (``=head2 x``, ``=cut``)
            pod = src[c.start_byte : c.end_byte].decode("utf-8", "replace").splitlines()
            lines.extend(x.rstrip() for x in pod if not x.startswith("="))
            continue
        if c.type not in ("comment", "line_comment", "block_comment", "doc_comment"):
            continue
        text = src[c.start_byte : c.end_byte].decode("utf-8", "replace").strip()
        if is_line_macro(text):  # ``LLVM_NODISCARD`` above a method: parsed as a comment
            continue
        if text.endswith("*/"):
            text = text[:-2]
        for line in text.splitlines():
            lines.append(_COMMENT_MARK.sub("", line, count=1).rstrip())
    return inspect.cleandoc("\n".join(lines)).strip()


def _clean_string(text: str) -> str:
    text = text.lstrip(_STR_PREFIXES)
    for q in ('"""', "'''", '"', "'"):
        if text.startswith(q) and text.endswith(q) and len(text) >= 2 * len(q):
            text = text[len(q) : -len(q)]
            break
    return inspect.cleandoc(text).strip()
