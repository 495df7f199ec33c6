"""A definition's signature: its declaration without the body, as the chunk's
``signature`` column shows it, or elided (``...``/``{ ... }``) inside a class outline.

Reads the definition's tree node only when a comment may lie before its body.
"""

from __future__ import annotations

from tree_sitter import Node

from codechunkd.chunking.rules import Rules

__all__ = ["signature_bytes", "signature_text"]


def signature_bytes(
    src: bytes, defn: Node, body: Node | None, start: int, rules: Rules, *, elide: bool
) -> bytes:
    if body is None or body.start_byte <= start:
        end = defn.end_byte
        nl = src.find(b"\n", start, end)
        if elide and nl >= 0:
            return src[start:nl].rstrip() + b" ..."
        return src[start:end].rstrip()
    head = src[start : body.start_byte]
    extras = rules.extras_starts
    if extras and head.isascii() and len(head.translate(None, extras)) == len(head):
        # no comment (nor line continuation) lies before the body: the tree need not be read
        sig = head.rstrip()
    else:
        end = body.start_byte
        prev = body.prev_sibling
        while prev is not None and prev.type.endswith("comment") and prev.start_byte > start:
            end = prev.start_byte
            prev = prev.prev_sibling
        if prev is not None and prev.start_byte >= start:
            end = prev.end_byte
        sig = src[start : max(end, start)].rstrip()
    if not elide:
        return sig
    if src[body.start_byte : body.start_byte + 1] == b"{":
        return sig + b" { ... }"
    return sig + b" ..."


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
