"""Per-language definition rules: which syntax nodes are definitions, and how to read them.

A rule set answers, for one tree-sitter grammar, the questions the chunker asks:

- which node types are *definitions* and how they are chunked (:class:`DefSpec`):
  ``leaf`` (a function: one chunk when it fits), ``class`` (a synthetic header
  chunk plus one chunk per member definition), ``scope`` (a namespace: its
  definitions become chunks, it adds a name to their qualified symbols) or
  ``nest`` (a heading section or a data key: one chunk when it fits, split by
  its children otherwise);
- which nodes merely *wrap* a definition (decorators, ``export``, templates);
- which nodes are comments or attributes that belong to the definition after them;
- which node holds a definition's body (its name: :mod:`codechunkd.chunking.names`).

Languages without a rule set here get :data:`GENERIC`, which recognises the
usual ``*_definition``/``*_declaration``/``*_item`` node names of tree-sitter
grammars, so every grammar of the language pack chunks by definitions where
it can and by the cAST recursion over named children everywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from tree_sitter import Node

__all__ = ["GENERIC", "DefSpec", "Mode", "Rules", "rules_for"]

Mode = Literal["leaf", "class", "scope", "nest"]


@dataclass(frozen=True, slots=True)
class DefSpec:
    """How one definition node type is chunked."""

    kind: str
    """Chunk kind of the definition (``function``, ``class``, ``section``, …)."""
    mode: Mode = "leaf"
    """``leaf``, ``class``, ``scope`` or ``nest`` (see the module docstring)."""


_LEAF_RE = re.compile(
    r"^(?:\w+_)?(function|method|constructor|destructor|procedure|subroutine|operator|macro)"
    r"_(definition|declaration|item)$"
)
_CLASS_RE = re.compile(
    r"^(?:\w+_)?(class|struct|interface|trait|impl|object|enum|protocol|record|union|extension)"
    r"_(definition|declaration|item|specifier)$"
)
_SCOPE_RE = re.compile(r"^(namespace|module|package|mod)_(definition|declaration|item)$")

_MISSING = object()


def _generic_spec(t: str) -> DefSpec | None:
    """The generic patterns: ``*_function_definition``, ``class_declaration``, …"""
    if _LEAF_RE.match(t):
        return DefSpec("function")
    m = _CLASS_RE.match(t)
    if m:
        return DefSpec(m.group(1), "class")
    if _SCOPE_RE.match(t):
        return DefSpec("namespace", "scope")
    return None


_VALUE_DECLS = frozenset({"lexical_declaration", "variable_declaration"})
_FUNCTION = DefSpec("function")
_COMMENTS = frozenset(
    {"comment", "line_comment", "block_comment", "doc_comment", "multiline_comment"}
)
_BODY_TYPES = frozenset(
    {
        "block",
        "body",
        "class_body",
        "declaration_list",
        "field_declaration_list",
        "enum_body",
        "interface_body",
        "body_statement",
        "template_body",
        "protocol_body",
        "enum_class_body",
        "statement_block",
        "compound_statement",
        "function_body",
        "enum_member_declaration_list",
        "object_type",
    }
)


@dataclass(frozen=True, slots=True)
class Rules:
    """Definition rules of one grammar."""

    defs: Mapping[str, DefSpec] = field(default_factory=dict)
    """Node type → how it is chunked; types not listed fall back to the generic patterns."""
    wrappers: frozenset[str] = frozenset()
    """Node types that wrap one definition (``decorated_definition``, ``export_statement``)."""
    attached: frozenset[str] = _COMMENTS
    """Node types that belong to the definition right after them (comments, attributes)."""
    doc_blocks: frozenset[str] = frozenset()
    """Of ``attached``, those that belong to the definition after them across a blank line
    too (Perl's POD: ``=head2 name`` … ``=cut``, a blank line, ``sub name``)."""
    flatten: frozenset[str] = frozenset()
    """Nodes inside a body whose children are members (``enum_body_declarations``)."""
    not_defs: frozenset[str] = frozenset()
    """Node types the generic patterns would take for definitions but are not."""
    generic: bool = True
    """Whether the generic ``*_definition`` patterns apply on top of ``defs``."""
    separator: str = "."
    """Joins scope names into a qualified symbol (``DataLoader.load``, ``impl Foo::bar``)."""
    merge_defs: bool = False
    """Definitions that fit are merged with their neighbours up to the budget (data keys)."""
    python_docstrings: bool = False
    """Docstrings are the first string statement of the body (Python)."""
    extras_starts: bytes = b""
    """First bytes of the grammar's extras other than whitespace (Python: ``#`` comments and
    ``\\`` line continuations), or ``b""`` when not known.  In ASCII text without them,
    only whitespace lies between a definition's declaration and its body."""
    function_values: bool = False
    """``const f = () => …`` counts as a function definition (JavaScript, TypeScript)."""
    scope_statements: bool = False
    """A scope without a body at the top level (PHP's ``namespace App\\Http;``, C#'s
    ``namespace Foo;``, Perl's ``package Foo;``) holds the definitions after it, up to the
    next one: they are named in it as in a scope with a body."""
    _generic: dict[str, DefSpec | None] = field(default_factory=dict, compare=False, repr=False)

    def spec(self, node: Node, t: str | None = None) -> DefSpec | None:
        """How ``node`` (of type ``t``) is chunked when it is a definition, else None."""
        if not node.is_named:
            return None
        if t is None:
            t = node.type
        spec = self.defs.get(t)
        if spec is None and self.function_values:
            if t in _VALUE_DECLS:
                if _is_function_value(node):
                    return _FUNCTION
                if _is_object_of_functions(node):
                    return _OBJECT
            elif (t == "assignment_expression" and _is_function_assignment(node)) or (
                t == "pair" and _is_function_pair(node)
            ):
                return _FUNCTION
        if spec is not None or not self.generic or t in self.not_defs:
            return spec
        cached = self._generic.get(t, _MISSING)
        if cached is _MISSING:
            cached = self._generic[t] = _generic_spec(t)
        return cached  # type: ignore[return-value]

    def plain(self, node: Node) -> bool:
        """Whether every node of ``node``'s kind is plain code.

        Plain: never a definition, a wrapper, an attached comment or a syntax error,
        whatever its content (the answer holds for its ``kind_id`` in its grammar).
        """
        t = node.type
        if t in self.attached or t in self.wrappers or t == "ERROR":
            return False
        if self.function_values and (t in _VALUE_DECLS or t == "pair"):
            return False  # ``const f = () => …`` is a definition, ``const x = 1`` is not
        return self.spec(node, t) is None

    def unwrap(self, node: Node) -> Node | None:
        """The definition inside a wrapper node, or None when it wraps none."""
        inner: Node | None = node
        for _ in range(4):
            if inner is None or inner.type not in self.wrappers:
                break
            found = inner.child_by_field_name("definition") or inner.child_by_field_name(
                "declaration"
            )
            if found is None:
                for c in reversed(inner.named_children):
                    if c.type not in self.attached and c.type not in ("decorator",):
                        found = c
                        break
            inner = found
        if inner is None or inner is node:
            return None
        return inner if self.spec(inner) is not None else None


def body_of(node: Node) -> Node | None:
    """The body node of a definition (``block``, ``class_body``, …), if it has one."""
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    for c in node.children:
        if c.type in _BODY_TYPES:
            return c
    # const f = () => { ... } ; local function in a declaration; arrow functions
    for c in node.named_children:
        if c.type == "variable_declarator":  # ``const api = { … }``: the object's members
            value = _object_value(c)
            if value is not None:
                return value
        if c.type in (
            "variable_declarator",
            "assignment_expression",
            "arrow_function",
            "function_expression",
            "function",
        ):
            inner = body_of(c)
            if inner is not None:
                return inner
        if c.type in ("value",):
            return body_of(c)
    return None


_PY = Rules(
    defs={
        "function_definition": DefSpec("function"),
        "class_definition": DefSpec("class", "class"),
    },
    wrappers=frozenset({"decorated_definition"}),
    generic=False,
    python_docstrings=True,
    extras_starts=b"#\\",
)

_JS_DEFS: dict[str, DefSpec] = {
    "function_declaration": DefSpec("function"),
    "generator_function_declaration": DefSpec("function"),
    "method_definition": DefSpec("function"),
    "class_declaration": DefSpec("class", "class"),
    "abstract_class_declaration": DefSpec("class", "class"),
    "class": DefSpec("class", "class"),
    "interface_declaration": DefSpec("interface"),
    "type_alias_declaration": DefSpec("type"),
    "enum_declaration": DefSpec("enum"),
    "internal_module": DefSpec("namespace", "scope"),
    "module": DefSpec("namespace", "scope"),
    "function_signature": DefSpec("function"),
    "abstract_method_signature": DefSpec("function"),
}
_JS = Rules(
    defs=_JS_DEFS,
    wrappers=frozenset({"export_statement", "expression_statement", "ambient_declaration"}),
    generic=False,
    function_values=True,
)


_FUNCTION_VALUES: Final = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function"}
)
_EXPORTS: Final = frozenset({b"module.exports", b"exports"})


_OBJECT: Final = DefSpec("object", "class")
_OBJECT_WRAPPERS: Final = frozenset(
    {"as_expression", "satisfies_expression", "parenthesized_expression"}
)
_OBJECT_MEMBERS: Final = 2
"""An object literal holding at least this many functions is a definition (``_OBJECT``)."""


def _is_function_pair(node: Node) -> bool:
    """``box: function (value) {…}``, ``map: (x) => …``: a function as an object's member."""
    value = node.child_by_field_name("value")
    return value is not None and value.type in _FUNCTION_VALUES


def _value(declarator: Node) -> Node | None:
    """The value a declarator gives its variable, cast or not (``= x``, ``= x as T``,
    ``= x satisfies T``, ``= (x)``)."""
    value = declarator.child_by_field_name("value")
    for _ in range(3):
        if value is None or value.type not in _OBJECT_WRAPPERS:
            break
        value = value.named_child(0)
    return value


def _object_value(declarator: Node) -> Node | None:
    """The object literal a declarator gives its variable (``= { … }``, ``= { … } as T``,
    ``= { … } satisfies T``), or None."""
    value = _value(declarator)
    return value if value is not None and value.type == "object" else None


def _is_object_of_functions(node: Node) -> bool:
    """``const api = { box(v) {…}, map: (x) => … }``: one declared object literal with
    functions as members (at least :data:`_OBJECT_MEMBERS`) is, like a class, a definition
    whose functions are its members."""
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    value = _object_value(declarators[0]) if len(declarators) == 1 else None
    if value is None:
        return False
    functions = 0
    for c in value.named_children:
        if c.type == "method_definition" or (c.type == "pair" and _is_function_pair(c)):
            functions += 1
            if functions >= _OBJECT_MEMBERS:
                return True
    return False


def _is_function_assignment(node: Node) -> bool:
    """``res.send = function (body) {…}``, ``Foo.prototype.bar = async () => …``: a function
    assigned to a property (not ``module.exports`` itself) counts as a function."""
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    return (
        left is not None
        and right is not None
        and right.type in _FUNCTION_VALUES
        and left.type == "member_expression"
        and left.text not in _EXPORTS
    )


def _is_function_value(node: Node) -> bool:
    """``const f = () => …`` / ``function () {}`` declarations count as functions (cast
    too: ``= function computed(a) {…} as any``)."""
    for c in node.named_children:
        if c.type == "variable_declarator":
            v = _value(c)
            if v is not None and v.type in _FUNCTION_VALUES:
                return True
    return False


_GO = Rules(
    defs={
        "function_declaration": DefSpec("function"),
        "method_declaration": DefSpec("method"),
        "type_declaration": DefSpec("type"),
    },
    generic=False,
)
_RUST = Rules(
    defs={
        "function_item": DefSpec("function"),
        "function_signature_item": DefSpec("function"),
        "impl_item": DefSpec("impl", "class"),
        "trait_item": DefSpec("trait", "class"),
        "mod_item": DefSpec("module", "scope"),
        "struct_item": DefSpec("struct"),
        "enum_item": DefSpec("enum"),
        "union_item": DefSpec("union"),
        "type_item": DefSpec("type"),
        "macro_definition": DefSpec("macro"),
    },
    attached=_COMMENTS | {"attribute_item"},
    generic=False,
    separator="::",
)
_JAVA = Rules(
    defs={
        "method_declaration": DefSpec("function"),
        "constructor_declaration": DefSpec("function"),
        "compact_constructor_declaration": DefSpec("function"),
        "class_declaration": DefSpec("class", "class"),
        "interface_declaration": DefSpec("interface", "class"),
        "enum_declaration": DefSpec("enum", "class"),
        "record_declaration": DefSpec("record", "class"),
        "annotation_type_declaration": DefSpec("interface", "class"),
    },
    flatten=frozenset({"enum_body_declarations"}),
    generic=False,
)
_C_DEFS: dict[str, DefSpec] = {
    "function_definition": DefSpec("function"),
    "struct_specifier": DefSpec("struct", "class"),
    "union_specifier": DefSpec("union", "class"),
    "enum_specifier": DefSpec("enum"),
    "class_specifier": DefSpec("class", "class"),
    "type_definition": DefSpec("type"),
    "namespace_definition": DefSpec("namespace", "scope"),
    "preproc_ifdef": DefSpec("", "scope"),
    "preproc_if": DefSpec("", "scope"),
    "preproc_else": DefSpec("", "scope"),
    "preproc_elif": DefSpec("", "scope"),
    "linkage_specification": DefSpec("", "scope"),
    "preproc_function_def": DefSpec("macro"),
}
_C = Rules(defs=_C_DEFS, wrappers=frozenset({"template_declaration"}), generic=False)
_CPP = Rules(
    defs=_C_DEFS, wrappers=frozenset({"template_declaration"}), generic=False, separator="::"
)
_CSHARP = Rules(
    defs={
        "namespace_declaration": DefSpec("namespace", "scope"),
        "file_scoped_namespace_declaration": DefSpec("namespace", "scope"),
        "class_declaration": DefSpec("class", "class"),
        "struct_declaration": DefSpec("struct", "class"),
        "interface_declaration": DefSpec("interface", "class"),
        "record_declaration": DefSpec("record", "class"),
        "enum_declaration": DefSpec("enum"),
        "method_declaration": DefSpec("function"),
        "constructor_declaration": DefSpec("function"),
        "destructor_declaration": DefSpec("function"),
        "operator_declaration": DefSpec("function"),
        "local_function_statement": DefSpec("function"),
    },
    generic=False,
    scope_statements=True,
)
_RUBY = Rules(
    defs={
        "class": DefSpec("class", "class"),
        "module": DefSpec("module", "class"),
        "singleton_class": DefSpec("class", "class"),
        "method": DefSpec("function"),
        "singleton_method": DefSpec("function"),
    },
    flatten=frozenset({"body_statement"}),
    generic=False,
)
_PHP = Rules(
    defs={
        "function_definition": DefSpec("function"),
        "method_declaration": DefSpec("function"),
        "class_declaration": DefSpec("class", "class"),
        "interface_declaration": DefSpec("interface", "class"),
        "trait_declaration": DefSpec("trait", "class"),
        "enum_declaration": DefSpec("enum", "class"),
        "namespace_definition": DefSpec("namespace", "scope"),
    },
    generic=False,
    separator="::",
    scope_statements=True,
)
_KOTLIN = Rules(
    defs={
        "function_declaration": DefSpec("function"),
        "class_declaration": DefSpec("class", "class"),
        "object_declaration": DefSpec("object", "class"),
        "companion_object": DefSpec("object", "class"),
        "secondary_constructor": DefSpec("function"),
    },
    generic=False,
)
_SWIFT = Rules(
    defs={
        "function_declaration": DefSpec("function"),
        "init_declaration": DefSpec("function"),
        "deinit_declaration": DefSpec("function"),
        "class_declaration": DefSpec("class", "class"),
        "protocol_declaration": DefSpec("protocol", "class"),
    },
    generic=False,
)
_SCALA = Rules(
    defs={
        "function_definition": DefSpec("function"),
        "class_definition": DefSpec("class", "class"),
        "object_definition": DefSpec("object", "class"),
        "trait_definition": DefSpec("trait", "class"),
        "enum_definition": DefSpec("enum", "class"),
    },
    generic=False,
)
_BASH = Rules(defs={"function_definition": DefSpec("function")}, generic=False)
_PERL = Rules(
    defs={
        "subroutine_declaration_statement": DefSpec("function"),
        "method_declaration_statement": DefSpec("function"),
        "package_statement": DefSpec("package", "scope"),
        "class_statement": DefSpec("class", "class"),
    },
    attached=_COMMENTS | {"pod"},
    doc_blocks=frozenset({"pod"}),
    generic=False,
    separator="::",
    scope_statements=True,
)
_CMAKE = Rules(
    defs={"function_def": DefSpec("function"), "macro_def": DefSpec("macro")},
    attached=_COMMENTS | {"bracket_comment"},
    generic=False,
)
_TCL = Rules(defs={"procedure": DefSpec("function")}, generic=False)
_LUA = Rules(
    defs={
        "function_declaration": DefSpec("function"),
        "function_definition_statement": DefSpec("function"),
    },
    generic=False,
)
_SQL = Rules(
    defs={
        "create_table": DefSpec("table"),
        "create_view": DefSpec("view"),
        "create_function": DefSpec("function"),
        "create_index": DefSpec("index"),
        "create_type": DefSpec("type"),
        "create_materialized_view": DefSpec("view"),
        "create_trigger": DefSpec("trigger"),
    },
    wrappers=frozenset({"statement"}),
    attached=_COMMENTS | {"marginalia"},
    generic=False,
)
_HTML = Rules(
    defs={"script_element": DefSpec("script"), "style_element": DefSpec("style")}, generic=False
)
_CSS = Rules(
    defs={
        "media_statement": DefSpec("media", "nest"),
        "keyframes_statement": DefSpec("keyframes"),
        "supports_statement": DefSpec("supports", "nest"),
    },
    generic=False,
)
_MARKDOWN = Rules(
    defs={"section": DefSpec("section", "nest")},
    attached=frozenset({"html_block"}) - {"html_block"},
    generic=False,
    separator=" > ",
)
_JSON = Rules(
    defs={"pair": DefSpec("key", "nest")},
    wrappers=frozenset(),
    generic=False,
    merge_defs=True,
)
_YAML = Rules(
    defs={"block_mapping_pair": DefSpec("key", "nest"), "flow_pair": DefSpec("key", "nest")},
    generic=False,
    merge_defs=True,
)
_TOML = Rules(
    defs={
        "pair": DefSpec("key", "nest"),
        "table": DefSpec("table", "nest"),
        "table_array_element": DefSpec("table", "nest"),
    },
    generic=False,
    merge_defs=True,
)

GENERIC = Rules()
"""Rules for every grammar without its own: the usual ``*_definition`` node names."""

_RULES: dict[str, Rules] = {
    "python": _PY,
    "javascript": _JS,
    "typescript": _JS,
    "tsx": _JS,
    "go": _GO,
    "rust": _RUST,
    "java": _JAVA,
    "c": _C,
    "cpp": _CPP,
    "csharp": _CSHARP,
    "ruby": _RUBY,
    "php": _PHP,
    "kotlin": _KOTLIN,
    "swift": _SWIFT,
    "scala": _SCALA,
    "bash": _BASH,
    "perl": _PERL,
    "cmake": _CMAKE,
    "tcl": _TCL,
    "lua": _LUA,
    "sql": _SQL,
    "html": _HTML,
    "css": _CSS,
    "scss": _CSS,
    "markdown": _MARKDOWN,
    "json": _JSON,
    "yaml": _YAML,
    "toml": _TOML,
}


def rules_for(language: str) -> Rules:
    """The rule set of a grammar (:data:`GENERIC` when it has none of its own)."""
    return _RULES.get(language, GENERIC)
