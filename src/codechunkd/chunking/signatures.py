"""A definition's signature: its declaration without the body, as the chunk's
``signature`` column shows it, or elided (``...``/``{ ... }``) inside a class outline.

Reads the definition's tree node only when a comment may lie before its body.
"""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node

from codechunkd.chunking.rules import Rules

__all__ = ["signature_bytes", "signature_text"]


MAX_SIGNATURE = 1024
"""Bytes read for the signature of a definition without a body (a JSON key, a one-line
assignment): a key of a minified JSON nested 20,000 deep would otherwise hold the rest of
the file, and all of them 1.2 GiB for a 120 KB file."""


def signature_bytes(
    src: bytes, defn: Node, body: Node | None, start: int, rules: Rules, *, elide: bool
) -> bytes:
    if body is None or body.start_byte <= start:  # no body: the first line is the signature
        end = defn.end_byte
        limit = min(end, start + MAX_SIGNATURE)
        nl = src.find(b"\n", start, limit)
        if nl >= 0:
            line = src[start:nl].rstrip()
            return line + b" ..." if elide else line
        if limit < end:  # one line longer than any signature
            return src[start:limit].rstrip() + b" ..."
        return src[start:end].rstrip()
    head = src[start : body.start_byte]
    extras = rules.extras_starts
    if extras and head.isascii() and len(head.translate(None, extras)) == len(head):
        # no comment (nor line continuation) lies before the body: the tree need not be read
        sig = head.rstrip()
    else:
        end = body.start_byte
        for prev in _previous(defn, body):  # comments just before the body are not signature
            if prev.type.endswith("comment") and prev.start_byte > start:
                end = prev.start_byte
                continue
            if prev.start_byte >= start:
                end = prev.end_byte
            break
        sig = src[start : max(end, start)].rstrip()
    if not elide:
        return sig
    if src[body.start_byte : body.start_byte + 1] == b"{":
        return sig + b" { ... }"
    return sig + b" ..."


def _previous(defn: Node, body: Node) -> Iterator[Node]:
    """The siblings before ``body``, nearest first.  Read from ``defn``'s children when the
    body is one of them: tree-sitter finds ``prev_sibling`` by walking down from the root,
    so in 20,000 nested functions each call cost 1.5 ms (the chunking took minutes)."""
    children = defn.children
    for i, child in enumerate(children):
        if child == body:
            yield from reversed(children[:i])
            return
    prev = body.prev_sibling
    while prev is not None:
        yield prev
        prev = prev.prev_sibling


def signature_text(src: bytes, defn: Node, body: Node | None, rules: Rules) -> str:
    """The declaration line(s) of a definition, without its body (multi-line parameters kept).

    ``body`` is ``body_of(defn)``.
    """
    raw = signature_bytes(src, defn, body, defn.start_byte, rules, elide=False)
    text = raw.decode("utf-8", "replace").rstrip()
    if body is None:
        first = text.split("\n", 1)[0]
        return first.rstrip().rstrip("{;").rstrip()
    return text.rstrip("{:;").rstrip()
