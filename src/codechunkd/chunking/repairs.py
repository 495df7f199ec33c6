"""Same-length repairs of a source its grammar misreads, tried only where its tree has errors.

TypeScript written without semicolons (Prettier's ``semi: false``) puts an interface's call
signatures on lines of their own::

    export interface IObservableValueFactory {
        <T>(value: T, options?: CreateObservableOptions): IObservableValue<T>
        <T>(value?: T, options?: CreateObservableOptions): IObservableValue<T | undefined>
    }

tree-sitter-typescript reads the second line as the continuation of the first, closes the
interface after it (a missing ``}``) and leaves the rest of the interface, and often much of
the file after it, an ERROR: MobX's ``observable``, ``action`` and ``computed`` factories
were split mid-interface into unnamed chunks that ran into the next definitions.  A ``;`` in
place of the first indent character of such a line, inside an ERROR, separates the members;
the byte offsets are unchanged (chunks are cut from the source as written).  The repaired
tree is kept only when it has fewer errors than the first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from tree_sitter import Node, Tree

__all__ = ["repair_seconds", "repaired"]

_SIGNATURE_LINE: Final = re.compile(rb"\n([ \t])[ \t]*(?:<[^\n(){};]*>[ \t]*)?\(")
"""A line that begins, after its indent, with a call signature: ``<T>(…`` or ``(…``."""
_LANGUAGES: Final = frozenset({"typescript", "tsx"})
_MAX_ERRORS: Final = 1000
"""Error nodes looked at: a file more broken than this is not repaired."""


def repair_seconds(first: float) -> float:
    """How long the repaired source's parse may take, the first having taken ``first``
    seconds: half a second, plus 4 times the first.  Error recovery can make it slow (50,000
    lines of ``(a`` in an object literal: 0.08 s, repaired 2.4 s); past that, the first tree
    is kept."""
    return 0.5 + 4 * first


def repaired(
    language: str, source: bytes, tree: Tree, parse: Callable[[bytes], Tree | None]
) -> Tree:
    """``tree``, or the tree of ``source`` repaired where ``tree`` has errors, when that one
    has fewer; ``parse`` parses a source (under the caller's deadline)."""
    if language not in _LANGUAGES or not tree.root_node.has_error:
        return tree
    errors = _errors(tree.root_node)
    if not errors or len(errors) >= _MAX_ERRORS:
        return tree
    out = bytearray(source)
    changed = False
    for start, end in errors:
        line = max(source.rfind(b"\n", 0, start), 0)  # from the line the error begins on
        for m in _SIGNATURE_LINE.finditer(source, line, end):
            out[m.start(1)] = ord(";")
            changed = True
    if not changed:
        return tree
    fixed = parse(bytes(out))
    if fixed is None or len(_errors(fixed.root_node)) >= len(errors):
        return tree
    return fixed


def _errors(root: Node) -> list[tuple[int, int]]:
    """The byte spans of the ERROR and missing nodes under ``root`` (at most
    :data:`_MAX_ERRORS`), read down only the branches that hold one."""
    found: list[tuple[int, int]] = []
    todo = [root]
    while todo and len(found) < _MAX_ERRORS:
        node = todo.pop()
        if node.is_error or node.is_missing:
            found.append((node.start_byte, node.end_byte))
            continue
        todo.extend(c for c in node.children if c.has_error)
    return found
