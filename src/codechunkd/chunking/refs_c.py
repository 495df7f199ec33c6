"""The C and C++ (and CUDA: the same grammar) part of ``chunking/references.py``: the query
patterns of :data:`C` and :data:`CPP`, what a name written after ``::`` is qualified by
(``scope_of``), and when a type name is a declaration, not a use (``declares``).

A name written after scopes (``arrow::Status::OK()``) gets the whole path as its qualifier
and its ``module`` (``arrow::Status``): the row then says it was named through scopes, where
``s.ok()`` and ``p->ok()`` (qualifier ``s``, ``p``) name an object.  ``#include`` is an
``import`` row of every name of the file (``*``) from the path as written
(``chunking/imports.py``).  A variable's class (``binds``) comes from a declaration
(``Status s``, ``const Buffer& b``, ``arrow::Buffer* p``, a field ``Buffer* buf_``), a smart
pointer (``std::shared_ptr<Buffer> b``), or ``auto`` with ``new Buffer``, ``Buffer(…)``,
``std::make_shared<Buffer>(…)``; its ``module`` is the class's scope as written.
"""

from __future__ import annotations

from typing import Final

from tree_sitter import Node

__all__ = ["CPP", "DECLARING", "SCOPED", "C", "class_named", "declares", "scope_of"]

_Q: Final = "(_) @qual"
#: A name after ``::`` in a scope: a class, by its capital (``Status::OK()``).
_CAPITAL: Final = '(#match? @name "^[A-Z]")'


def _scopes(name: str, depth: int) -> list[str]:
    """``name`` after one to ``depth`` scopes: ``a::b::f`` nests each scope's
    ``qualified_identifier`` in the one before (``name: (qualified_identifier scope: b
    name: f)``), so a pattern that fixes where the name is (a call's function) says each
    depth; the qualifier, the whole path, is read by ``scope_of``."""
    out, pattern = [], name
    for _ in range(depth):
        pattern = f"(qualified_identifier name: {pattern})"
        out.append(pattern)
    return out


def _alt(*alternatives: str) -> str:
    return f"[{' '.join(alternatives)}]"


def _when(pattern: str, predicate: str) -> str:
    """``pattern`` where ``predicate`` holds (a predicate goes inside the pattern)."""
    return f"({pattern} {predicate})"


_FIELD: Final = f"(field_expression argument: {_Q} field: (field_identifier) @name)"
C: Final = [
    ("call", f"(call_expression function: {_alt('(identifier) @name', _FIELD)})"),
    ("type", "(type_identifier) @name"),
    ("value", "(argument_list (identifier) @name)"),
    ("import", "(preproc_include path: (_)) @import"),
]
"""C: calls (``f(x)``, ``s->ops.f(x)``), type names (``struct list *l``, ``node_t n``),
functions passed as values, ``#include``."""

_FUNCTION: Final = ("(identifier) @name", "(template_function name: (identifier) @name)")
_NAMED: Final = ("(type_identifier) @name", *_scopes("(type_identifier) @name", 3))
_TEMPLATE: Final = "(template_type name: (type_identifier) @name)"
#: A class as written: ``Status``, ``arrow::Status``, ``Result<T>``, ``arrow::Result<T>``.
_TEMPLATES: Final = (_TEMPLATE, *_scopes(_TEMPLATE, 3))
_CLASS: Final = (*_NAMED, *_TEMPLATES)
_VAR: Final = (
    "(identifier) @var",
    "(pointer_declarator declarator: (identifier) @var)",
    "(reference_declarator (identifier) @var)",
)
_FIELD_VAR: Final = (
    "(field_identifier) @var",
    "(pointer_declarator declarator: (field_identifier) @var)",
)
_DECLARED: Final = _alt(*_VAR, f"(init_declarator declarator: {_alt(*_VAR)})")
_AUTO: Final = (  # ``auto x = …``
    "(declaration type: (placeholder_type_specifier) declarator: (init_declarator "
    f"declarator: {_alt(*_VAR)} value: "
)
_IN_NAMESPACE: Final = (
    "(qualified_identifier scope: (namespace_identifier) @ns name: (identifier) @name)"
)
#: ``make_shared<Buffer>``, ``std::make_unique<arrow::Buffer>``: the class is the argument.
_MAKE: Final = (
    '(template_function name: (identifier) @fn (#match? @fn "^make_(unique|shared)$") '
    "arguments: (template_argument_list . (type_descriptor type: (_) @cls)))"
)
_STATIC_NAMES: Final = tuple(
    f"(qualified_identifier scope: (namespace_identifier) @name name: {f})"
    for f in ("(identifier)", "(template_function)")
)
#: ``Status::OK()``, ``arrow::Status::OK()``: the scope right before a call's name.
_STATIC: Final = tuple(p for inner in _STATIC_NAMES for p in (inner, *_scopes(inner, 3)))
_TEMPLATE_METHOD: Final = "(template_method name: (field_identifier) @name)"
#: ``f(x)``, ``f<T>(x)``, ``a::b::f(x)``, ``s.f()``, ``p->f()``, ``s.get<T>()``, ``s.template
#: get<T>()``
_CALLED: Final = (
    *_FUNCTION,
    *(s for f in _FUNCTION for s in _scopes(f, 4)),
    _FIELD,
    f"(field_expression argument: {_Q} field: {_TEMPLATE_METHOD})",
    f"(field_expression argument: {_Q} field: (dependent_name {_TEMPLATE_METHOD}))",
)
CPP: Final = [
    ("call", f"(call_expression function: {_alt(*_CALLED)})"),
    ("call", f"(new_expression type: {_alt(*_CLASS)})"),
    ("type", _when(f"(call_expression function: {_alt(*_STATIC)})", _CAPITAL)),
    ("inherit", f"(base_class_clause {_alt(*_CLASS)})"),
    ("type", "(type_identifier) @name"),
    ("value", "(argument_list (identifier) @name)"),
    ("import", "(preproc_include path: (_)) @import"),
    *(  # ``Status s``, ``const Buffer& b``, ``arrow::Buffer* p``, ``Buffer* buf_;``: the
        # class the declared type names (``class_named``)
        ("binds_c", f"({node} type: (_) @cls declarator: {var})")
        for node, var in (
            ("declaration", _DECLARED),
            ("parameter_declaration", _alt(*_VAR)),
            ("optional_parameter_declaration", _alt(*_VAR)),
            ("field_declaration", _alt(*_FIELD_VAR)),
        )
    ),
    ("binds_c", f"{_AUTO}(new_expression type: (_) @cls)))"),  # ``new Buffer(…)``
    # ``auto s = Status(…)``, ``auto t = at::Tensor(…)``: by convention (a capital) a
    # class's constructor; not ``auto s = Status::OK()``, a class's function
    ("binds_call", f"{_AUTO}(call_expression function: (identifier) @name)))"),
    (
        "binds_call",
        _when(
            f"{_AUTO}(call_expression function: "
            f"{_alt(_IN_NAMESPACE, *_scopes(_IN_NAMESPACE, 2))})))",
            '(#match? @ns "^[a-z_]")',
        ),
    ),
    (  # ``auto p = std::make_shared<Buffer>(…)``
        "binds_c",
        f"{_AUTO}(call_expression function: {_alt(_MAKE, *_scopes(_MAKE, 1))})))",
    ),
]
"""C++ and CUDA: C's, and calls through scopes and templates (``arrow::internal::f(x)``,
``std::make_unique<T>()``, ``obj.template get<T>()``), ``new``, a class named as a call's
scope (``Status::OK()``: a use of ``Status``), base classes, variables' classes."""

SCOPED: Final = frozenset({"cpp", "cuda"})
"""Languages whose names can be written after scopes (``arrow::Status``): ``scope_of``."""
_TEMPLATED: Final = frozenset({"template_function", "template_type", "template_method"})
_MAX_SCOPES: Final = 16
"""Scopes climbed before a name at most: a path is a few namespaces and classes deep."""


def scope_of(node: Node) -> Node | None:
    """The whole ``qualified_identifier`` a name is written at the end of (or in the scope
    of): ``arrow::Status::OK`` for ``OK`` (and for ``Status``); its text up to the name is
    the name's scope.  None for a name written without ``::``, or under more scopes than
    any real path has."""
    top = None
    up = node.parent
    if up is not None and up.type in _TEMPLATED:  # ``make_unique<T>``
        up = up.parent
    for _ in range(_MAX_SCOPES):
        if up is None or up.type != "qualified_identifier":
            return top
        top, up = up, up.parent
    return None


_POINTERS: Final = frozenset({b"unique_ptr", b"shared_ptr", b"weak_ptr"})
"""Smart pointers: what ``->`` on ``std::shared_ptr<Buffer>`` reaches is a Buffer."""


def class_named(node: Node, source: bytes) -> Node | None:
    """The class name a C++ type names (``Buffer`` of ``const arrow::Buffer&``'s type
    ``arrow::Buffer``, of ``Result<Buffer>``'s ``Result``, of ``std::shared_ptr<Buffer>``:
    a smart pointer's first argument); None for a built-in type, ``auto``, a dependent or
    nested type deeper than any real one."""
    at: Node | None = node
    for _ in range(_MAX_SCOPES):
        if at is None:
            return None
        kind = at.type
        if kind == "type_identifier":
            return at
        if kind == "qualified_identifier":
            at = at.child_by_field_name("name")
        elif kind == "template_type":
            name = at.child_by_field_name("name")
            if name is None or source[name.start_byte : name.end_byte] not in _POINTERS:
                return name
            args = at.child_by_field_name("arguments")
            first = args.named_children[0] if args is not None and args.named_children else None
            at = first.child_by_field_name("type") if first is not None else None
        elif kind in {"class_specifier", "struct_specifier"}:  # ``struct Buffer* p``
            at = at.child_by_field_name("name")
        else:
            return None
    return None


#: C and C++ nodes that can declare a type name (``declares`` says when they do).
DECLARING: Final = frozenset(
    {
        "class_specifier",
        "struct_specifier",
        "union_specifier",
        "enum_specifier",
        "type_definition",
        "alias_declaration",
        "type_parameter_declaration",
        "optional_type_parameter_declaration",
        "variadic_type_parameter_declaration",
    }
)
_TYPE_PARAMETERS: Final = frozenset(
    {"type_parameter_declaration", "variadic_type_parameter_declaration"}
)


def declares(node: Node, parent: Node) -> bool:
    """Whether the type name ``node`` is what its ``parent`` (of :data:`DECLARING`)
    declares: a class, struct, union or enum's name when it has a body (``struct s *p``
    uses ``s``), a ``typedef``'s declarator (``typedef struct s s_t``: ``s_t``), the name of
    ``using X = …`` and a template's parameter (``typename T``)."""
    if parent.type == "type_definition":
        return any(
            d.start_byte == node.start_byte for d in parent.children_by_field_name("declarator")
        )
    if parent.type in _TYPE_PARAMETERS:
        return True
    if parent.type.endswith("_specifier") and parent.child_by_field_name("body") is None:
        return False
    named = parent.child_by_field_name("name")
    return named is not None and named.start_byte == node.start_byte
