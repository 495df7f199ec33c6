"""The names a file binds outside any function: module constants and variables, class
attributes and fields (``MAX_RETRIES = 3``, ``Draft7Validator = create(…)``, a dataclass's
``name: str``, Go's ``const``/``var`` and struct fields, a TypeScript ``export const routes =
[…]``, class field, interface property or enum member, Rust's ``const``/``static``, Java's
fields and enum constants, Ruby's constants, C's ``#define X 1``).

Functions and classes are definitions through the chunker (a chunk's ``names``); these are
not chunks of their own, so ``chunking/references.py`` runs :data:`DEFINES`' patterns with
the uses' and records each name as a ``defines`` :class:`~codechunkd.chunking.imports.Ref`
(``qualifier``: the name qualified by its classes, ``Color.RED``), which the store writes
as a definition row of the chunk holding it (``storage/references.py``). So ``defs`` and
``refs`` answer for them, a search that names one finds its chunk, and a use in the same
file resolves to it.

Left out: a function's locals (:func:`qualified` walks up from the statement's holder: a
function around it makes it a local; Python's patterns match an assignment in any block,
the others only at the top level or in a class body), dunder names (``__all__``,
``__slots__``: plumbing, in every module), ``_``, a name the file also imports (``try:
from x import y`` / ``except ImportError: y = None``: the uses mean the import), and
``#define``s without a value (include guards, feature flags).
"""

from __future__ import annotations

from typing import Final

from tree_sitter import Node

from codechunkd.chunking.names import span

__all__ = ["DEFINES", "KIND", "qualified"]

KIND: Final = "defines"

_JS_DECLARATIONS: Final = ("lexical_declaration", "variable_declaration")
_TOP_DECLARED: Final = "(variable_declarator name: (identifier) @name)"
_JAVA_DECLARED: Final = _TOP_DECLARED
#: ``const x = …``, and destructured: ``const {isArray, b: c} = Array``, ``const [a, b] = f()``
_JS_DECLARED: Final = (
    _TOP_DECLARED,
    "(variable_declarator name: (object_pattern (shorthand_property_identifier_pattern) @name))",
    "(variable_declarator name: (object_pattern (pair_pattern value: (identifier) @name)))",
    "(variable_declarator name: (array_pattern (identifier) @name))",
)
_JS_TOP: Final = tuple(
    f"(program {stmt}) @scope"
    for d in _JS_DECLARATIONS
    for declared in _JS_DECLARED
    for stmt in (f"({d} {declared})", f"(export_statement ({d} {declared}))")
)

DEFINES: Final[dict[str, list[str]]] = {
    # ``@scope``: the node the binding is a statement of, where :func:`qualified` begins
    "python": [  # a function's block too: ``qualified`` leaves those out
        *(
            f"({holder} (assignment left: {t})) @scope"
            for holder in ("module", "block")
            for t in (
                "(identifier) @name",
                "(pattern_list (identifier) @name)",
                "(tuple_pattern (identifier) @name)",
            )
        ),
        "(assignment right: (assignment left: (identifier) @name)) @scope",  # ``a = b = 1``
    ],
    "go": [
        "(source_file (const_declaration (const_spec name: (identifier) @name))) @scope",
        "(source_file (var_declaration (var_spec name: (identifier) @name))) @scope",
        "(source_file (var_declaration (var_spec_list (var_spec name: (identifier) @name))))"
        " @scope",
        "(source_file (type_declaration (type_spec type: (struct_type (field_declaration_list"
        " (field_declaration name: (field_identifier) @name) @scope)))))",  # ``Server.Addr``
        "(source_file (type_declaration (type_spec type: (interface_type"  # ``Reader.Read``
        " (method_elem name: (field_identifier) @name) @scope))))",
    ],
    "javascript": [
        *_JS_TOP,
        "(class_body (field_definition property: (property_identifier) @name)) @scope",
    ],
    "typescript": [
        *_JS_TOP,
        "(class_body (public_field_definition name: (property_identifier) @name)) @scope",
        "(interface_body (property_signature name: (property_identifier) @name)) @scope",
        "(enum_body name: (property_identifier) @name) @scope",  # ``enum Level { Info }``
        "(enum_body (enum_assignment name: (property_identifier) @name)) @scope",
    ],
    "rust": [
        "(source_file (const_item name: (identifier) @name)) @scope",
        "(source_file (static_item name: (identifier) @name)) @scope",
    ],
    "java": [
        f"(class_body (field_declaration declarator: {_JAVA_DECLARED})) @scope",
        f"(interface_body (constant_declaration declarator: {_JAVA_DECLARED})) @scope",
        "(enum_body (enum_constant name: (identifier) @name)) @scope",
        f"(enum_body_declarations (field_declaration declarator: {_JAVA_DECLARED})) @scope",
    ],
    "php": [  # ``const MAX = 3;`` in a class, an interface, or at a file's top
        "(declaration_list (const_declaration (const_element (name) @name)) @scope)",
        "(program (const_declaration (const_element (name) @name)) @scope)",
    ],
    "perl": [  # ``use constant MAX => 3;``, ``use constant {A => 1, B => 2};``
        f'(use_statement module: (package) @m (#eq? @m "constant") {names}) @scope'
        for names in (
            "(list_expression . (autoquoted_bareword) @name)",
            "(anonymous_hash_expression (list_expression (autoquoted_bareword) @name))",
        )
    ],
    "ruby": [  # ``VERSION = "1.0"``: a constant
        f"({holder} (assignment left: (constant) @name)) @scope"
        for holder in ("program", "body_statement")
    ],
    # a macro is global wherever it is defined: no ``@scope``
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
        "type_spec",  # Go's ``type Server struct {…}``
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


def qualified(
    name: str,
    holder: Node | None,
    source: bytes,
    scopes: dict[tuple[int, int, str], str | None],
    language: str = "",
) -> str | None:
    """``name``, bound by a statement of ``holder`` (a ``@scope`` capture; None for a C
    macro, global wherever it is), qualified by the classes around it (``Color.RED``), or
    None when it is not a definition: a dunder name, ``_``, or inside a function (a class
    defined in a function: its attributes are that function's).  ``scopes`` remembers each
    node's answer for one file, so the names of one block walk up from it once: a node's
    ``parent`` costs as much as the node is deep (tree-sitter finds it from the root), and
    90,000 fields of a class 450 classes deep took minutes, a walk from each."""
    if name == "_" or (name.startswith("__") and name.endswith("__")):
        return None
    scope = "" if holder is None else _scope(holder, source, scopes)
    if language in _PACKAGES and scope is not None and holder is not None:  # as the chunker
        parts = [_package(holder, source, _PACKAGES[language]), *scope.split("."), name]
        return "::".join(p for p in parts if p)  # names them: ``google\\net::Decoder::MAX``
    return None if scope is None else f"{scope}.{name}" if scope else name


#: The statement that names the package of what follows it (or of its block), per language.
_PACKAGES: Final = {"php": "namespace_definition", "perl": "package_statement"}


def _package(node: Node, source: bytes, statement: str) -> str:
    """The namespace (PHP) or package (Perl) a statement is in: of the ``statement`` last
    before it at the file's top (``namespace A\\B;``, ``package Foo::Bar;``), or of one
    around it (``namespace A\\B { … }``); ``""`` for none."""
    top = node
    while top.parent is not None and top.parent.parent is not None and top.type != statement:
        top = top.parent
    if top.type != statement:
        root = top.parent
        before = [
            c
            for c in (root.children if root is not None else ())
            if c.type == statement and c.start_byte < top.start_byte
        ]
        top = before[-1] if before else top
    named = top.child_by_field_name("name") if top.type == statement else None
    return span(named, source) if named is not None else ""


def _scope(node: Node, source: bytes, memo: dict[tuple[int, int, str], str | None]) -> str | None:
    """The classes ``node`` is or is in, outermost first, joined by ``.`` (``""`` for none),
    or None inside a function or an anonymous class."""
    walked: list[Node] = []
    scope: str | None = ""
    at: Node | None = node
    while at is not None:
        key = (at.start_byte, at.end_byte, at.type)
        if key in memo:
            scope = memo[key]
            break
        walked.append(at)
        at = at.parent
    for n in reversed(walked):  # outermost first
        if scope is not None and n.type in _FUNCTIONS:
            scope = None
        elif scope is not None and n.type in _CLASSES:
            named = n.child_by_field_name("name")
            if named is not None and named.type == "scope_resolution":  # ``class Shop::Cart``
                named = named.child_by_field_name("name") or named  # as the chunker names it
            if named is not None:
                scope = f"{scope}.{span(named, source)}" if scope else span(named, source)
            elif n.type != "module":  # (Python's file is a ``module`` of no name)
                scope = None  # an anonymous class (``new class { x = 1 }``)
        memo[(n.start_byte, n.end_byte, n.type)] = scope
    return scope
