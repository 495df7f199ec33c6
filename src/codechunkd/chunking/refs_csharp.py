"""The C# part of ``chunking/references.py``: the query patterns of :data:`CSHARP`.

C# writes a type as a bare name (``User``), generic (``List<User>``) or qualified
(``Foo.Bar.User``); calls are on a name (``Validate(u)``), a member (``_repo.Get(id)``,
``this.Log()``, ``base.Init()``, ``x?.Clean()``) or a type (``Helpers.Check(u)``), and
``new`` names a class.  A variable's class (``binds``) comes from its declared type
(``User other``, a field ``IRepo _repo``, a parameter ``IRepo repo``, ``foreach (User u in
users)``) or from ``var u = new User()``.  ``using`` directives are ``import`` rows
(``chunking/imports.py``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["CSHARP"]

_Q: Final = "_ @qual"  # any node: ``this`` and ``base`` are not named ones
_TYPES: Final = (
    "(identifier) @name",
    "(generic_name (identifier) @name)",
    "(qualified_name qualifier: (_) @qual name: (identifier) @name)",
    "(qualified_name name: (generic_name (identifier) @name))",
)
_TYPE_NAME: Final = '(#match? @name "^[A-Z]")'

CSHARP: Final = [
    ("call", "(invocation_expression function: (identifier) @name)"),
    ("call", "(invocation_expression function: (generic_name (identifier) @name))"),
    *(
        ("call", f"(invocation_expression function: (member_access_expression {m}))")
        for m in (
            f"expression: {_Q} name: (identifier) @name",
            f"expression: {_Q} name: (generic_name (identifier) @name)",
        )
    ),
    (  # ``Baz.Make(u)?.Clean()``: on what is before ``?.``
        "call",
        "(invocation_expression function: (conditional_access_expression "
        "condition: (_) @qual (member_binding_expression name: (identifier) @name)))",
    ),
    *(("call", f"(object_creation_expression type: {t})") for t in _TYPES),
    *(("inherit", f"(base_list {t})") for t in _TYPES),
    *(
        ("type", f"({node} {field}: {t})")
        for node, field in (
            ("variable_declaration", "type"),
            ("parameter", "type"),
            ("method_declaration", "returns"),
            ("property_declaration", "type"),
            ("nullable_type", "type"),
            ("array_type", "type"),
        )
        for t in _TYPES
    ),
    ("type", "(type_argument_list (identifier) @name)"),
    ("type", "(typeof_expression type: (identifier) @name)"),
    ("type", f"(member_access_expression expression: (identifier) @name {_TYPE_NAME})"),
    *(  # ``User other``, a field ``IRepo _repo``, a parameter ``IRepo repo``
        ("binds", f"(variable_declaration type: {t} (variable_declarator name: (identifier) @var))")
        for t in ("(identifier) @name", "(generic_name (identifier) @name)")
    ),
    *(  # a parameter ``IRepo repo``; ``foreach (Package p in packages)``
        ("binds", f"({node} type: {t} {var}: (identifier) @var)")
        for node, var in (("parameter", "name"), ("foreach_statement", "left"))
        for t in ("(identifier) @name", "(generic_name (identifier) @name)")
    ),
    (  # ``var u = new User(id)``
        "binds",
        "(variable_declaration type: (implicit_type) (variable_declarator name: (identifier) @var "
        "(object_creation_expression "
        "type: [(identifier) @name (generic_name (identifier) @name)])))",
    ),
    ("import", "(using_directive) @import"),
]
