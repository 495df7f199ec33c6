"""The name of a definition, as written: ``load``, ``DenseMap::operator=``, ``impl Display
for Foo``, a Markdown heading's text, a data file's key.

``name_of`` reads the ``name`` field where a grammar has one, else looks through the
declarators (C and C++ nest the name in them) and the first named children; a few node
types have a reader of their own (``_NAME_READERS``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from tree_sitter import Node

__all__ = ["MAX_NAME", "name_of", "span"]

_NAME_TYPES = frozenset(
    {
        "identifier",
        "name",
        "type_identifier",
        "field_identifier",
        "property_identifier",
        "simple_identifier",
        "constant",
        "namespace_identifier",
        "qualified_identifier",
        "qualified_name",
        "namespace_name",
        "scoped_identifier",
        "scoped_type_identifier",
        "dot_index_expression",
        "method_index_expression",
        "word",
        "object_reference",
        "bare_key",
        "quoted_key",
        "dotted_key",
        "destructor_name",
        "operator_name",
    }
)


_NAME_HOLDERS: Final = frozenset(
    {"type_spec", "assignment_statement", "variable_list", "function_declaration"}
)
"""Nodes a name is looked for in, besides declarators (Go's ``type X``, Lua's ``x = …``,
Vim script's ``function s:Name()``)."""


def span(node: Node, src: bytes) -> str:
    """A node's text, sliced from the file's bytes ``src``: the same bytes as ``node.text``,
    which costs ~10 µs a call (it copies them out of the tree)."""
    return src[node.start_byte : node.end_byte].decode("utf-8", "replace")


MAX_NAME: Final = 200
"""The most of a name kept (then ``…``): every member's symbol, header and full text repeat
its scope's names (an ``impl`` 50,000 generics deep, 300 methods: 280 MB of rows)."""


def name_of(node: Node, src: bytes) -> str:
    """The name of a definition, as written (``load``, ``impl Display for Foo``), or ``""``;
    at most :data:`MAX_NAME` characters and an ellipsis.

    ``src`` is the source the tree was parsed from.
    """
    special = _NAME_READERS.get(node.type)
    name = special(node, src) if special is not None else _find_name(node, src, 0)
    return name if len(name) <= MAX_NAME else f"{name[:MAX_NAME]}…"


def _impl_name(node: Node, src: bytes) -> str:
    typ = node.child_by_field_name("type")
    trait = node.child_by_field_name("trait")
    if typ is None:
        return "impl"
    if trait:
        return f"impl {span(trait, src)} for {span(typ, src)}"
    return f"impl {span(typ, src)}"


def _method_name(node: Node, src: bytes) -> str:
    recv = node.child_by_field_name("receiver")
    if recv is None:  # not a Go method: a method declaration of another language
        return _find_name(node, src, 0)
    name = node.child_by_field_name("name")
    receiver = span(recv, src).strip("()")
    rtype = receiver.split()[-1].lstrip("*").split("[")[0] if receiver else ""
    if rtype and name is not None:
        return f"{rtype}.{span(name, src)}"
    return span(name, src) if name else ""


def _section_name(node: Node, src: bytes) -> str:
    for c in node.named_children:
        if c.type in ("atx_heading", "setext_heading"):
            return heading_text(c, src)
    return ""


def _pair_name(node: Node, src: bytes) -> str:
    key = node.child_by_field_name("key")
    if key is None:
        for c in node.named_children:
            if c.type in ("bare_key", "quoted_key", "dotted_key", "string", "flow_node"):
                key = c
                break
    return span(key, src).strip().strip("\"'") if key is not None else ""


def _table_name(node: Node, src: bytes) -> str:
    for c in node.named_children:
        if c.type in ("bare_key", "quoted_key", "dotted_key"):
            return span(c, src).strip("\"'")
    return ""


def _command_name(node: Node, src: bytes) -> str:
    """CMake's ``function(name arg …)``, ``macro(name …)``: the command's first argument."""
    command = node.named_child(0)
    for c in command.named_children if command is not None else ():
        if c.type == "argument_list":
            first = c.named_child(0)
            return span(first, src) if first is not None else ""
    return ""


_ASSIGNED_PREFIX: Final = re.compile(r"^(?:module\.exports\.|exports\.|this\.)")


def _assigned_name(node: Node, src: bytes) -> str:
    """``Foo.prototype.bar = function …`` is ``Foo.bar``; ``exports.parse = …`` and
    ``this.onToken = …`` are ``parse`` and ``onToken`` (JavaScript)."""
    left = node.child_by_field_name("left")
    if left is None:
        return ""
    name = _ASSIGNED_PREFIX.sub("", span(left, src)).replace(".prototype.", ".")
    return " ".join(name.split())  # a member expression over several lines


def _find_name(node: Node, src: bytes, depth: int) -> str:
    name = node.child_by_field_name("name")
    if name is not None:
        if name.type in _NAME_TYPES or name.child_count == 0:
            return span(name, src)
        return _find_name(name, src, depth + 1) if depth < 4 else span(name, src)[:80]
    decl = node.child_by_field_name("declarator")
    if decl is not None and depth < 6:
        if decl.type in _NAME_TYPES:
            return span(decl, src)
        if decl.type == "operator_cast" and (cast := decl.child_by_field_name("type")):
            return f"operator {span(cast, src).rsplit('::', 1)[-1]}"  # ``operator bool()``
        return _find_name(decl, src, depth + 1)
    for c in node.named_children:
        t = c.type
        if t in _NAME_TYPES:
            return span(c, src)
        # ``D& operator=(...)``: a C++ reference declarator names no field
        if t.endswith("_declarator") or t in _NAME_HOLDERS:
            return _find_name(c, src, depth + 1) if depth < 6 else ""
    return ""


def heading_text(node: Node, src: bytes) -> str:
    """Text of a Markdown heading without its markers."""
    for c in node.named_children:
        if c.type in ("inline", "paragraph", "heading_content"):
            return span(c, src).strip()
    return span(node, src).strip().lstrip("#").strip()


_NAME_READERS: dict[str, Callable[[Node, bytes], str]] = {
    "impl_item": _impl_name,
    "assignment_expression": _assigned_name,
    "function_def": _command_name,
    "macro_def": _command_name,
    "method_declaration": _method_name,
    "atx_heading": heading_text,
    "setext_heading": heading_text,
    "section": _section_name,
    "pair": _pair_name,
    "block_mapping_pair": _pair_name,
    "flow_pair": _pair_name,
    "table": _table_name,
    "table_array_element": _table_name,
}
"""Node types whose name is not found the generic way (:func:`_find_name`)."""
