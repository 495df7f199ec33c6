"""What a ``package.json`` says to the reference graph: the package's name and its entry files.

A JavaScript or TypeScript import of a bare name (``require('@npmcli/arborist')``,
``import {Subject} from 'rxjs'``) names a package, not a path: Node looks for the folder
``node_modules/<name>`` and reads its ``package.json`` for the file the name means; a
workspace (a monorepo's ``packages/core``) is the folder whose ``package.json`` declares the
name.  One ``package`` row per entry file the manifest names, in the order a reader of the
source prefers them (``exports``'s ``"."``, ``source``, ``module``, ``main``, ``types``):
``name`` the package's name, ``module`` the entry as written (``lib/index.js``); one row
with an empty ``module`` when it names none.  Which of them is a file of the source (a
``dist/`` entry is often not committed: its ``src/`` is) is decided at query time
(``storage/refnames.ModulePaths``).

A ``tsconfig.json`` (or ``tsconfig.*.json``, ``jsconfig.json``) maps names to paths for
the files under its folder: ``compilerOptions.paths`` (``"@/*": ["./src/*"]``, from
``baseUrl`` when it is set) and ``baseUrl`` alone (``*``: any bare name is first looked
for there).  One ``package`` row per pattern and path: ``name`` the pattern, ``module``
the path from the config's folder (``src/*``).
"""

from __future__ import annotations

import posixpath
from typing import Final

from tree_sitter import Node

from codechunkd.chunking.imports import MAX_MODULE, Ref

__all__ = ["PACKAGE", "json_refs"]

PACKAGE: Final = "package"
"""``kind`` of the row that says which package a ``package.json`` declares."""
_ENTRY_FIELDS: Final = ("source", "module", "main", "types", "typings")
_MAX_ENTRIES: Final = 8
_MAX_DEPTH: Final = 4
_MAX_PATHS: Final = 200
"""At most this many ``paths`` rows from one config (a generated one can list thousands)."""


def json_refs(path: str, root: Node) -> list[Ref]:
    """The rows of the JSON file ``path`` (its tree's ``root``): a ``package.json``'s, a
    ``tsconfig.json``'s (or ``tsconfig.*.json``, ``jsconfig.json``); none for another."""
    name = path.rpartition("/")[2]
    if name == "package.json":
        return package_refs(root)
    if name in {"tsconfig.json", "jsconfig.json"} or name.startswith("tsconfig."):
        return config_refs(root)
    return []


def _text(node: Node | None) -> str:
    if node is None or node.type != "string":
        return ""
    content = next((c for c in node.named_children if c.type == "string_content"), None)
    return (content.text or b"").decode("utf-8", "replace") if content is not None else ""


def _pairs(node: Node | None) -> list[tuple[str, Node]]:
    """The ``(key, value)`` pairs of a JSON object node, in order (none for another node)."""
    if node is None or node.type != "object":
        return []
    out = []
    for pair in node.named_children:
        if pair.type == "pair":
            value = pair.child_by_field_name("value")
            if value is not None:
                out.append((_text(pair.child_by_field_name("key")), value))
    return out


def _leaves(node: Node, depth: int, out: list[Node]) -> None:
    """The strings of an ``exports`` condition tree (``{"import": …, "require": …}``)."""
    if node.type == "string":
        out.append(node)
    elif depth < _MAX_DEPTH:
        for key, value in _pairs(node):
            if not key.startswith("."):  # a condition, not a subpath (``"./x"``)
                _leaves(value, depth + 1, out)


def _main_export(exports: Node) -> list[Node]:
    """The files ``exports`` gives for the package's own name: a string, the ``"."`` entry,
    or an object of conditions."""
    out: list[Node] = []
    pairs = dict(_pairs(exports))
    if "." in pairs:
        _leaves(pairs["."], 0, out)
    elif exports.type == "string" or not any(k.startswith(".") for k in pairs):
        _leaves(exports, 0, out)
    return out


def package_refs(root: Node) -> list[Ref]:
    """The ``package`` rows of a ``package.json``'s tree (none when it names no package)."""
    top = next((c for c in root.named_children if c.type == "object"), None)
    fields = dict(_pairs(top))
    name_node = fields.get("name")
    name = _text(name_node)
    if name_node is None or not name or len(name) > MAX_MODULE:
        return []
    entries = _main_export(fields["exports"]) if "exports" in fields else []
    entries += [fields[f] for f in _ENTRY_FIELDS if f in fields]
    out: list[Ref] = []
    seen: set[str] = set()
    for node in entries:
        entry = _text(node)
        if entry and entry not in seen and len(entry) <= MAX_MODULE:
            seen.add(entry)
            out.append(Ref(name, "", PACKAGE, node.start_point[0] + 1, node.start_byte, entry))
        if len(out) == _MAX_ENTRIES:
            break
    if not out:
        out.append(Ref(name, "", PACKAGE, name_node.start_point[0] + 1, name_node.start_byte))
    return out


def config_refs(root: Node) -> list[Ref]:
    """The ``package`` rows of a ``tsconfig.json``'s tree: its ``paths`` and ``baseUrl``."""
    top = next((c for c in root.named_children if c.type == "object"), None)
    options = dict(_pairs(dict(_pairs(top)).get("compilerOptions")))
    base_node = options.get("baseUrl")
    base = posixpath.normpath(_text(base_node)) if _text(base_node) else ""
    out: list[Ref] = []
    for pattern, targets in _pairs(options.get("paths")):
        for target in targets.named_children if targets.type == "array" else ():
            path = _text(target)
            if pattern and path and len(pattern) + len(path) <= MAX_MODULE:
                where = posixpath.normpath(posixpath.join(base, path))
                at = target.start_point[0] + 1
                out.append(Ref(pattern, "", PACKAGE, at, target.start_byte, where))
            if len(out) == _MAX_PATHS:
                return out
    if base and base_node is not None and len(base) < MAX_MODULE:
        at = base_node.start_point[0] + 1
        where = posixpath.normpath(posixpath.join(base, "*"))
        out.append(Ref("*", "", PACKAGE, at, base_node.start_byte, where))
    return out
