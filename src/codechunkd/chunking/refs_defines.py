"""The names a file binds outside any function: module constants and variables, class
attributes and fields (``MAX_RETRIES = 3``, ``Draft7Validator = create(…)``, a dataclass's
``name: str``, Go's ``const``/``var``, a TypeScript ``export const routes = […]`` or class
field, Rust's ``const``/``static``, Java's fields and enum constants, Ruby's constants, C's
``#define X 1``).

Functions and classes are definitions through the chunker (a chunk's ``names``); these are
not chunks of their own, so ``chunking/references.py`` runs :data:`DEFINES`' patterns with
the uses' and records each name as a ``defines`` :class:`~codechunkd.chunking.imports.Ref`
(``qualifier``: the name qualified by its classes, ``Color.RED``), which the store writes
as a definition row of the chunk holding it (``storage/references.py``). So ``defs`` and
``refs`` answer for them, a search that names one finds its chunk, and a use in the same
file resolves to it.

Left out: a function's locals (:func:`qualified` walks up from each name: a function around
it makes it a local; besides, only Python's patterns are not anchored at the top level or
in a class body), dunder names (``__all__``, ``__slots__``: plumbing, in every module), ``_``,
a name the file also imports (``try: from x import y`` / ``except ImportError: y = None``:
the uses mean the import), ``#define``s without a value (include guards, feature flags).
"""

from __future__ import annotations

from typing import Final

from tree_sitter import Node

__all__ = ["DEFINES", "KIND", "qualified"]

KIND: Final = "defines"

_JS_DECLARATIONS: Final = ("lexical_declaration", "variable_declaration")
_TOP_DECLARED: Final = "(variable_declarator name: (identifier) @name)"
_JAVA_DECLARED: Final = _TOP_DECLARED

DEFINES: Final[dict[str, list[str]]] = {
    "python": [  # a function's too: ``qualified`` leaves those out
        f"(assignment left: {t})"
        for t in (
            "(identifier) @name",
            "(pattern_list (identifier) @name)",
            "(tuple_pattern (identifier) @name)",
        )
    ],
    "go": [
        "(source_file (const_declaration (const_spec name: (identifier) @name)))",
        "(source_file (var_declaration (var_spec name: (identifier) @name)))",
        "(source_file (var_declaration (var_spec_list (var_spec name: (identifier) @name))))",
    ],
    "javascript": [
        *(f"(program ({d} {_TOP_DECLARED}))" for d in _JS_DECLARATIONS),
        *(f"(program (export_statement ({d} {_TOP_DECLARED})))" for d in _JS_DECLARATIONS),
        "(class_body (field_definition property: (property_identifier) @name))",
    ],
    "typescript": [
        *(f"(program ({d} {_TOP_DECLARED}))" for d in _JS_DECLARATIONS),
        *(f"(program (export_statement ({d} {_TOP_DECLARED})))" for d in _JS_DECLARATIONS),
        "(class_body (public_field_definition name: (property_identifier) @name))",
    ],
    "rust": [
        "(source_file (const_item name: (identifier) @name))",
        "(source_file (static_item name: (identifier) @name))",
    ],
    "java": [
        f"(class_body (field_declaration declarator: {_JAVA_DECLARED}))",
        f"(interface_body (constant_declaration declarator: {_JAVA_DECLARED}))",
        "(enum_body (enum_constant name: (identifier) @name))",
        f"(enum_body_declarations (field_declaration declarator: {_JAVA_DECLARED}))",
    ],
    "ruby": ["(assignment left: (constant) @name)"],  # ``VERSION = "1.0"``: a constant
    "c": ["(preproc_def name: (identifier) @name value: (preproc_arg))"],
    "cpp": ["(preproc_def name: (identifier) @name value: (preproc_arg))"],
}
DEFINES["tsx"] = DEFINES["typescript"]
DEFINES["cuda"] = DEFINES["cpp"]

_CLASSES: Final = frozenset(
    {
        "class_definition",  # Python
        "class_declaration",  # JavaScript, TypeScript, Java
        "abstract_class_declaration",
        "class",  # JavaScript's class expression, Ruby's class
        "module",  # Ruby
        "interface_declaration",
        "enum_declaration",
        "record_declaration",
    }
)
_FUNCTIONS: Final = frozenset(
    {
        "function_definition",
        "function_declaration",
        "method_definition",
        "method_declaration",
        "arrow_function",
        "function_expression",
        "lambda",
        "method",  # Ruby
        "singleton_method",
    }
)


def qualified(node: Node, name: str, source: bytes) -> str | None:
    """``name`` (bound at ``node``) qualified by the classes around it (``Color.RED``), or
    None when it is not a definition: a dunder name, ``_``, or inside a function (a class
    defined in a function: its attributes are that function's)."""
    if name == "_" or (name.startswith("__") and name.endswith("__")):
        return None
    scopes: list[str] = []
    parent = node.parent
    while parent is not None:
        if parent.type in _FUNCTIONS:
            return None
        if parent.type in _CLASSES:
            named = parent.child_by_field_name("name")
            if named is not None and named.type == "scope_resolution":  # ``class Shop::Cart``
                named = named.child_by_field_name("name") or named  # as the chunker names it
            if named is not None:
                scopes.append(_span(named, source))
            elif parent.type != "module":  # (Python's file is a ``module`` of no name)
                return None  # an anonymous class (``new class { x = 1 }``)
        parent = parent.parent
    return ".".join([*reversed(scopes), name])


def _span(node: Node, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")
