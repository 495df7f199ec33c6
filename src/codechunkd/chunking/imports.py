"""What an import statement binds, per language: the ``import`` rows of
``chunking/references.py``, and ``Ref``, the row every use is.

Each reader takes the statement's node and returns one ``Ref`` per name bound: ``name`` the
local name, ``qualifier`` the name in the module (empty: the whole module or namespace),
``module`` the module path as written.  It must not run queries (references.py does).
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from tree_sitter import Node

__all__ = ["IMPORTS", "MAX_MODULE", "Ref"]

MAX_MODULE: Final = 400
"""An import whose module path is longer than this is no import (a generated or hostile
file): skipped, as each name it binds would carry a copy of the path (a 100 KB path
importing 5,000 names took 1.7 GB to index; nested Rust use lists, a longer path per
level, took 4 GB for a 240 KB file)."""


class Ref(NamedTuple):
    """One use of a name in a file."""

    name: str
    """The name used, without qualifier (``join``); for an import, the local name bound."""
    qualifier: str
    """Text before the name (``os.path``, ``self``, ``crate::util``); for an import, the
    name in the module (``""``: the whole module or namespace)."""
    kind: str
    """One of :data:`KINDS`."""
    line: int
    """1-based line of the name."""
    byte: int
    """Byte offset of the name (which chunk holds it)."""
    module: str = ""
    """For an import: the module path as written (``.models``, ``./util``, ``net/http``); for
    a Go ``binds``, the package its class is named through, as written (``http``)."""


def _text(node: Node | None) -> str:
    return (node.text or b"").decode("utf-8", "replace") if node is not None else ""


def _ref(node: Node, name: str, original: str, module: str) -> Ref:
    return Ref(name, original, "import", node.start_point[0] + 1, node.start_byte, module)


def _python_imports(node: Node) -> list[Ref]:
    """``import a.b [as x]`` binds ``a.b`` (or ``x``); ``from m import y [as z]`` binds ``y``
    (or ``z``) from module ``m`` (leading dots kept: relative)."""
    out: list[Ref] = []
    module = ""
    if node.type == "import_from_statement":
        module = _text(node.child_by_field_name("module_name"))
        if any(c.type == "wildcard_import" for c in node.named_children):
            return [_ref(node, "*", "", module)]
    for child in node.children_by_field_name("name"):
        if child.type == "aliased_import":
            original = _text(child.child_by_field_name("name"))
            local = _text(child.child_by_field_name("alias"))
        else:
            original = local = _text(child)
        if node.type == "import_statement":
            out.append(_ref(child, local, "", original))
        else:
            out.append(_ref(child, local, original, module))
    return out


def _js_require(node: Node) -> list[Ref]:
    """``const x = require('m')`` binds x to m; ``const {a, b: c} = require('m')`` binds
    a to m's a and c to m's b, ``const x = require('m').y`` x to m's y;
    ``module.exports = require('m')`` passes every name of m on (``*``),
    ``exports.x = require('m')`` (or ``module.exports.x``) binds x to m."""
    assigned = node.type == "assignment_expression"
    call = node.child_by_field_name("right" if assigned else "value")
    picked = ""  # ``require('m').x``: m's x
    if call is not None and call.type == "member_expression":
        picked = _text(call.child_by_field_name("property"))
        call = call.child_by_field_name("object")
    module = _required(call)
    name = node.child_by_field_name("left" if assigned else "name")
    if name is None or not module:
        return []
    if assigned and name.type == "member_expression":
        target = _text(name)
        if target == "module.exports":
            return [_ref(name, "*", "", module)]
        prop = name.child_by_field_name("property")
        owner = _text(name.child_by_field_name("object"))
        if prop is not None and owner in {"exports", "module.exports"}:
            return [_ref(prop, _text(prop), "", module)]
        return []
    if name.type == "identifier":
        return [_ref(name, _text(name), picked, module)]
    out = []
    if name.type == "object_pattern" and not picked:
        for part in name.named_children:
            if part.type == "shorthand_property_identifier_pattern":
                out.append(_ref(part, _text(part), _text(part), module))
            elif part.type == "pair_pattern":
                key, value = part.child_by_field_name("key"), part.child_by_field_name("value")
                if key is not None and value is not None and value.type == "identifier":
                    out.append(_ref(part, _text(value), _text(key), module))
    return out


def _exported_require(pair: Node) -> list[Ref]:
    """``module.exports = {publish: require('./publish.js'), …}``: the key ``pair`` binds
    (``publish``) to the module."""
    obj = pair.parent
    assignment = obj.parent if obj is not None else None
    left = assignment.child_by_field_name("left") if assignment is not None else None
    key, value = pair.child_by_field_name("key"), pair.child_by_field_name("value")
    if _text(left) not in {"module.exports", "exports"} or key is None or value is None:
        return []
    module = _required(value)
    return [_ref(key, _text(key).strip("'\""), "", module)] if module else []


def _required(call: Node | None) -> str:
    """The module a ``require('m')`` call names (``m``), ``""`` for none."""
    args = call.child_by_field_name("arguments") if call is not None else None
    string = args.named_children[0] if args is not None and args.named_children else None
    return _text(string).strip("'\"`")


JS_DEFAULT_EXPORTS = (
    '(export_statement "default" declaration: [(function_declaration name: (identifier) @name)'
    " (generator_function_declaration name: (identifier) @name)"
    " (class_declaration name: (_) @name)])",
    '(export_statement "default" value: (identifier) @name)',
    *(
        "(assignment_expression left: (member_expression object: (identifier) @m property: "
        f'(property_identifier) @p) right: {value} (#eq? @m "module") (#eq? @p "exports"))'
        for value in (
            "(identifier) @name",
            "[(function_expression name: (identifier) @name) (class name: (_) @name)]",
        )
    ),
)
"""A JS/TS module's default export, by name (``export default function baz``, ``export
default baz``, ``module.exports = baz``): ``export`` rows, which the reference graph reads
for ``import foo from './bar'`` and ``const foo = require('./bar')`` (storage/refgraph.py)."""


def _js_imports(node: Node) -> list[Ref]:
    if node.type in {"variable_declarator", "assignment_expression"}:
        return _js_require(node)
    if node.type == "pair":
        return _exported_require(node)
    source = node.child_by_field_name("source")
    module = _text(source).strip("'\"`")
    if node.type == "export_statement":
        return _js_reexports(node, module)
    out: list[Ref] = []
    clause = next((c for c in node.named_children if c.type == "import_clause"), None)
    if clause is None:
        return out
    for part in clause.named_children:
        if part.type == "identifier":
            out.append(_ref(part, _text(part), "default", module))
        elif part.type == "namespace_import":
            ident = next((c for c in part.named_children if c.type == "identifier"), None)
            if ident is not None:
                out.append(_ref(ident, _text(ident), "", module))
        elif part.type == "named_imports":
            out += _specifiers(part, "import_specifier", module)
    return out


def _specifiers(clause: Node, kind: str, module: str) -> list[Ref]:
    """``{a, b as c}`` of an import or a re-export: a (m's a) and c (m's b)."""
    out = []
    for spec in clause.named_children:
        if spec.type == kind:
            original = _text(spec.child_by_field_name("name"))
            alias = spec.child_by_field_name("alias")
            out.append(_ref(spec, _text(alias) if alias else original, original, module))
    return out


def _js_reexports(node: Node, module: str) -> list[Ref]:
    """``export * from 'm'`` passes every name of m on (``*``); ``export {a, b as c} from
    'm'`` passes a and c (m's b) on; ``export * as ns from 'm'`` binds ns to m."""
    if not module:
        return []
    for part in node.named_children:
        if part.type == "export_clause":
            return _specifiers(part, "export_specifier", module)
        if part.type == "namespace_export":
            ident = next((c for c in part.named_children if c.type == "identifier"), None)
            return [_ref(ident, _text(ident), "", module)] if ident is not None else []
    return [_ref(node, "*", "", module)]


def _go_imports(node: Node) -> list[Ref]:
    path = _text(node.child_by_field_name("path")).strip('"`')
    alias = node.child_by_field_name("name")
    local = _text(alias) if alias is not None else path.rsplit("/", 1)[-1]
    return [_ref(node, local, "", path)] if path else []


def _rust_imports(node: Node) -> list[Ref]:
    out: list[Ref] = []
    argument = node.child_by_field_name("argument")
    if argument is not None:
        _rust_use(argument, "", out)
    return out


def _join(a: str, b: str) -> str:
    return f"{a}::{b}" if a and b else a or b


def _rust_use(node: Node, prefix: str, out: list[Ref]) -> None:
    """Walk one use tree: ``a::b::{C, D as E, f::*}``.  With a stack, not recursion: a
    file can nest lists thousands deep, and past Python's recursion limit ``node.text``
    crashed the process (tree-sitter 0.25 passes the RecursionError's NULL on)."""
    stack = [(node, prefix)]
    while stack:
        node, prefix = stack.pop()
        kind = node.type
        if kind == "self" and prefix:  # ``use crate::ast::{self, …}`` binds ``ast``
            module, _, name = prefix.rpartition("::")
            out.append(_ref(node, name, name, module))
        elif kind in {"identifier", "self", "crate", "super"}:
            name = _text(node)
            out.append(_ref(node, name, name, prefix))
        elif kind == "scoped_identifier":
            path = _join(prefix, _text(node.child_by_field_name("path")))
            name = _text(node.child_by_field_name("name"))
            out.append(_ref(node, name, name, path))
        elif kind == "use_as_clause":
            inner = node.child_by_field_name("path")
            alias = _text(node.child_by_field_name("alias"))
            full = _join(prefix, _text(inner))
            path, _, name = full.rpartition("::")
            out.append(_ref(node, alias, name, path))
        elif kind == "use_wildcard":
            path = _join(prefix, _text(node.named_children[0]) if node.named_children else "")
            out.append(_ref(node, "*", "", path))
        elif kind == "scoped_use_list":
            path = _join(prefix, _text(node.child_by_field_name("path")))
            lst = node.child_by_field_name("list")
            if lst is not None and len(path) <= MAX_MODULE:
                stack.append((lst, path))
        elif kind == "use_list":  # in file order
            stack += [(child, prefix) for child in reversed(node.named_children)]


def _java_imports(node: Node) -> list[Ref]:
    named = [c for c in node.named_children if c.type in {"scoped_identifier", "identifier"}]
    if not named:
        return []
    full = _text(named[0])
    if any(c.type == "asterisk" for c in node.named_children):
        return [_ref(node, "*", "", full)]
    module, _, name = full.rpartition(".")
    return [_ref(node, name, name, module)]


def _c_includes(node: Node) -> list[Ref]:
    """``#include "arrow/status.h"`` or ``#include <arrow/status.h>`` pastes every name of
    the file in: ``*``, from the path as written (``#include MACRO`` names no path)."""
    path = node.child_by_field_name("path")
    if path is None or path.type not in {"string_literal", "system_lib_string"}:
        return []
    module = _text(path).strip().strip('"<>').strip()
    return [_ref(node, "*", "", module)] if module else []


_PERL_WORD: Final = re.compile(r"(?<![$@%&:\w])[A-Za-z_]\w*")
"""A sub's name in a ``use`` list (``qw(wrap fill)``, ``'wrap'``), not a variable
(``$columns``) or a tag (``:ALL``)."""


def _perl_imports(node: Node) -> list[Ref]:
    """``use Text::Wrap qw(wrap fill);`` binds ``wrap`` and ``fill`` from ``Text::Wrap``; a
    ``use`` without a list imports what the module exports by default, which only the module
    knows: every name of it (``*``).  Pragmas (``use strict``) and ``use 5.010`` name no
    module file; an empty list (``use POSIX ()``) imports nothing."""
    if node.type != "use_statement":  # ``our @ISA = qw(Exporter)``, ``push @ISA, 'X'``
        return _perl_bases(node)
    module = node.child_by_field_name("module")
    if module is None:
        return []
    path = _text(module)
    if path in {"parent", "base"}:  # ``use parent -norequire, 'Foo::Base';``
        return _perl_bases(node)
    if path[:1].islower() and "::" not in path:  # a pragma: strict, warnings, …
        return []
    lists = [c for c in node.named_children if c.start_byte != module.start_byte]
    if not lists:
        return [_ref(node, "*", "", path)]
    words = " ".join(_text(c) for c in lists)
    names = [w for w in _PERL_WORD.findall(words) if w != "qw"]
    return [_ref(node, w, w, path) for w in names]


_PERL_PACKAGE: Final = re.compile(r"[A-Za-z_]\w*(?:::\w+)*")


def _perl_bases(node: Node) -> list[Ref]:
    """The base classes ``use parent``/``use base`` or ``@ISA`` names: ``inherit`` rows of
    the package the statement is in (their ``module``), each named by its last part
    (``Object`` of ``TAP::Object``) and qualified by the rest, as a class of another
    language is."""
    words = [w for c in _descendants(node) if c.type == "string_content" for w in _text(c).split()]
    package = _perl_package(node)
    out = []
    for word in words:
        if _PERL_PACKAGE.fullmatch(word) and len(word) <= MAX_MODULE:
            qual, _, name = word.rpartition("::")
            line = node.start_point[0] + 1
            out.append(Ref(name, qual, "inherit", line, node.start_byte, package))
    return out


def _perl_package(node: Node, limit: int = 2000) -> str:
    """The package a statement is in: the nearest ``package`` statement before it, or the
    ``package X { … }`` around it (``main`` when none; at most ``limit`` statements back)."""
    at: Node | None = node
    steps = 0
    while at is not None and steps < limit:
        before = at.prev_named_sibling
        while before is not None and steps < limit:
            if before.type == "package_statement":
                return _text(before.child_by_field_name("name"))
            before, steps = before.prev_named_sibling, steps + 1
        at = at.parent
        if at is not None and at.type == "package_statement":
            return _text(at.child_by_field_name("name"))
    return "main"


_SHELL_VARIABLE: Final = re.compile(r"^.*(?:\$\{[^}]*\}|\$\w+|\$\([^)]*\))")


def _bash_sources(node: Node) -> list[Ref]:
    """``source lib/common.sh``, ``. "$DIR/lib/common.sh"`` pastes every name of the file in
    (``*``), by its path after the last variable, as written (``/lib/common.sh``)."""
    arg = node.child_by_field_name("argument")
    if arg is None or arg.end_byte - arg.start_byte > MAX_MODULE:
        return []
    path = _SHELL_VARIABLE.sub("", _text(arg).strip("\"'")).lstrip("/")
    path = path[2:] if path.startswith("./") else path
    return [_ref(node, "*", "", path)] if path and "$" not in path else []


def _php_uses(node: Node) -> list[Ref]:
    """``use Foo\\Bar;``, ``use Foo\\Bar as Baz;``, ``use function Foo\\helper;`` and
    ``use Foo\\{A, B as C};`` bind ``Bar``, ``Baz``, ``helper``, ``A`` and ``C``: each the
    last part of a name in the namespace before it (``Foo``), under its alias if any.
    ``require``/``include`` (``_once``) pastes every name of a file in (``*``), by its path
    as the last string of the expression writes it (``__DIR__ . '/lib/util.php'``)."""
    if node.type != "namespace_use_declaration":
        strings = [c for c in _descendants(node) if c.type == "string_content"]
        path = _text(strings[-1]) if strings else ""
        while path.startswith(("/", "./", "../")):
            path = path.split("/", 1)[1] if "/" in path else ""
        return [_ref(node, "*", "", path)] if path and len(path) <= MAX_MODULE else []
    body = node.child_by_field_name("body")
    group = next((c for c in node.named_children if c.type == "namespace_name"), None)
    prefix = _text(group).strip("\\") if body is not None and group is not None else ""
    out: list[Ref] = []
    for clause in (body if body is not None else node).named_children:
        if clause.type != "namespace_use_clause":
            continue
        alias = clause.child_by_field_name("alias")
        named = [
            c
            for c in clause.named_children
            if c.type in {"name", "qualified_name"}
            and (alias is None or c.start_byte != alias.start_byte)
        ]
        if not named:
            continue
        full = "\\".join(p for p in (prefix, _text(named[0]).strip("\\")) if p)
        module, _, original = full.rpartition("\\")
        if original:
            out.append(_ref(clause, _text(alias) or original, original, module))
    return out


def _cmake_includes(node: Node) -> list[Ref]:
    """``include(CheckCSourceCompiles)`` and ``include(${DIR}/Helpers.cmake)`` paste every
    name of the file in (``*``): a module by its name (``CheckCSourceCompiles.cmake`` in a
    module folder), a path after its last variable (``Helpers.cmake``)."""
    args = next((c for c in node.named_children if c.type == "argument_list"), None)
    first = args.named_children[0] if args is not None and args.named_children else None
    if first is None or first.end_byte - first.start_byte > MAX_MODULE:
        return []
    path = _SHELL_VARIABLE.sub("", _text(first).strip("\"'")).lstrip("/")
    return [_ref(node, "*", "", path)] if path and "$" not in path else []


def _csharp_usings(node: Node) -> list[Ref]:
    """``using Foo.Bar;`` and ``using static Foo.Util.Helpers;`` bring every type (or static
    member) of a namespace (class) into scope (``*``); ``using Baz = Foo.Qux.Baz;`` binds
    ``Baz`` to ``Baz`` of ``Foo.Qux``."""
    alias = node.child_by_field_name("name")
    named = [
        c
        for c in node.named_children
        if c.type in {"qualified_name", "identifier", "generic_name"}
        and (alias is None or c.start_byte != alias.start_byte)
    ]
    if not named:
        return []
    full = _text(named[-1]).removeprefix("global::")
    if alias is None:
        return [_ref(node, "*", "", full)]
    module, _, original = full.rpartition(".")
    return [_ref(node, _text(alias), original, module)]


def _ruby_requires(node: Node) -> list[Ref]:
    """``require "shop/cart"`` and ``load`` paste every name of a file in (``*``), by its
    path from any load path (``…/shop/cart.rb``); ``require_relative "helper"`` from the
    requiring file's folder (``./helper``)."""
    method = node.child_by_field_name("method")
    strings = [c for c in _descendants(node) if c.type == "string_content"]
    if method is None or len(strings) != 1 or len(_text(strings[0])) > MAX_MODULE:
        return []
    path = _text(strings[0]).removesuffix(".rb")
    if _text(method) == "require_relative" and not path.startswith("../"):
        path = "./" + path.removeprefix("./")
    return [_ref(node, "*", "", path)] if path.strip("./") else []


def _descendants(node: Node, limit: int = 200) -> list[Node]:
    """The nodes under ``node``, in order, at most ``limit`` of them."""
    out: list[Node] = []
    stack = list(reversed(node.children))
    while stack and len(out) < limit:
        n = stack.pop()
        out.append(n)
        stack += reversed(n.children)
    return out


IMPORTS: Final = {
    "python": _python_imports,
    "javascript": _js_imports,
    "typescript": _js_imports,
    "tsx": _js_imports,
    "go": _go_imports,
    "rust": _rust_imports,
    "java": _java_imports,
    "perl": _perl_imports,
    "bash": _bash_sources,
    "php": _php_uses,
    "cmake": _cmake_includes,
    "csharp": _csharp_usings,
    "ruby": _ruby_requires,
    "c": _c_includes,
    "cpp": _c_includes,
    "cuda": _c_includes,
}
