"""Python's reference patterns (``chunking/references.py`` runs them), and the class a
Python annotation names.

A variable's class (a ``binds`` row) comes from what the code says of it:

- an annotation, whatever its form: ``ctx: Context``, ``t: types.ParamType[t.Any]``,
  ``p: Context | None``, ``Optional["Command"]`` (the class is ``Context``, ``ParamType``
  through the module ``types``, ``Command``);
- a call, ``e = Engine(cfg)``, ``x = make()``, ``with open_session() as s``: the callee's
  result (a class by its capital, else what the function's ``-> Session`` says: the graph
  decides, ``storage/reftyped.py``);
- ``self.x = x`` in a method: the class of the method's parameter ``x``, so ``self.x`` in
  any method of the class has it;
- ``def make() -> Session``: a row ``make()`` bound to ``Session``, in ``make``'s chunk.
"""

from __future__ import annotations

from typing import Final

from tree_sitter import Node

from codechunkd.chunking.imports import Ref
from codechunkd.chunking.names import span

__all__ = ["PYTHON", "PYTHON_BINDS", "binds"]

_Q = "(_) @qual"
_SELF_ATTR: Final = "(attribute object: (identifier) @obj) @var"
_THROUGH: Final = "(attribute object: (identifier) @pkg attribute: (identifier) @name)"
"""A callee named through a module (``requests.Session``) or its own class (``self.make``)."""
_VALUED: Final = ("pair", "default_parameter", "typed_default_parameter")
"""Nodes whose ``value`` is a name used as a value (a dictionary's value, a default)."""

PYTHON: Final = [
    ("call", "(call function: (identifier) @name)"),
    ("call", f"(call function: (attribute object: {_Q} attribute: (identifier) @name))"),
    ("call", "(decorator (identifier) @name)"),
    ("call", f"(decorator (attribute object: {_Q} attribute: (identifier) @name))"),
    *(  # ``class A(Base)``, ``(mod.Base)``, ``(Base[T])``, ``(mod.Base[T])``
        ("inherit", f"(class_definition superclasses: (argument_list {base}))")
        for named in (
            "(identifier) @name",
            f"(attribute object: {_Q} attribute: (identifier) @name)",
        )
        for base in (named, f"(subscript value: {named})")
    ),
    ("type", "(type (identifier) @name)"),
    ("type", "(generic_type (identifier) @name)"),
    ("type", f"(type (attribute object: {_Q} attribute: (identifier) @name))"),
    ("value", "(argument_list (identifier) @name)"),
    ("value", "(keyword_argument value: (identifier) @name)"),
    ("value", "(assignment right: (identifier) @name)"),
    ("value", "(return_statement (identifier) @name)"),
    *(  # ``return a, b``, ``(f, g)``, ``[f]``
        ("value", f"({node} (identifier) @name)")
        for node in ("expression_list", "list", "tuple", "set")
    ),
    *(("value", f"({node} value: (identifier) @name)") for node in _VALUED),
    ("value", f"(attribute object: {_Q} attribute: (identifier) @name)"),
    ("import", "(import_statement) @import"),
    ("import", "(import_from_statement) @import"),
    ("binds_py", "(typed_parameter (identifier) @var type: (type) @type)"),
    ("binds_py", "(typed_default_parameter name: (identifier) @var type: (type) @type)"),
    ("binds_py", "(assignment left: (identifier) @var type: (type) @type)"),
    ("binds_py", f'((assignment left: {_SELF_ATTR} type: (type) @type) (#eq? @obj "self"))'),
    (  # ``self.parent = parent``: the parameter's class
        "binds_alias",
        f'((assignment left: {_SELF_ATTR} right: (identifier) @alias) (#eq? @obj "self"))',
    ),
    (  # ``v = RunVar[int]("v")``
        "binds_call",
        "(assignment left: (identifier) @var right: (call function: "
        "(subscript value: (identifier) @name)))",
    ),
    # ``e = Engine(cfg)``, ``x = make()``, ``with open_session() as s``, ``self.e = Engine()``,
    # and through a module, ``s = requests.Session()``, ``with sessions.Session() as s``
    *(
        ("binds_result", f"{head}(call function: {callee}){tail}")
        for head, tail in (
            ("((assignment left: (identifier) @var !type right: ", "))"),
            ("((with_item value: (as_pattern ", " alias: (as_pattern_target (identifier) @var))))"),
            (f"((assignment left: {_SELF_ATTR} !type right: ", ') (#eq? @obj "self"))'),
        )
        for callee in ("(identifier) @name", _THROUGH)
    ),
    ("binds_ret", "(function_definition name: (identifier) @var return_type: (type) @type)"),
]
PYTHON_BINDS: Final = frozenset({"binds_py", "binds_alias", "binds_ret"})
"""The kinds :func:`binds` reads (``binds_result`` and ``binds_call`` are read as in any
language)."""

_WRAPPERS: Final = frozenset(
    f"{m}{w}" for m in ("", "t.", "typing.") for w in ("Optional", "Type", "type")
)
"""Wrappers whose one argument is the class (``Optional[Context]``; ``type[Backend]``,
whose class methods are called on it)."""
_MAX: Final = 200


def annotated(node: Node | None, source: bytes, depth: int = 0) -> tuple[str, str] | None:
    """The class an annotation names, and the module it is named through (``""`` for a
    bare name): ``Context``, ``types.ParamType[t.Any]``, ``Context | None``,
    ``Optional[Context]``, ``"Context"``; None for anything else (``list[int] | str``)."""
    if node is None or depth > 8:
        return None
    kind = node.type
    if kind in {"type", "parenthesized_expression"}:
        inner = [c for c in node.named_children if c.type != "comment"]
        return annotated(inner[0], source, depth + 1) if len(inner) == 1 else None
    if kind == "identifier":
        return span(node, source), ""
    if kind == "attribute":
        obj, attr = node.child_by_field_name("object"), node.child_by_field_name("attribute")
        if obj is not None and obj.type == "identifier" and attr is not None:
            return span(attr, source), span(obj, source)
        return None
    if kind == "string":  # a forward reference
        body = span(node, source).strip("'\"")
        head, _, last = body.rpartition(".")
        return (last, head) if last.isidentifier() and "." not in head else None
    if kind == "binary_operator":  # ``Context | None``
        sides = [node.child_by_field_name("left"), node.child_by_field_name("right")]
        kept = [s for s in sides if s is not None and s.type != "none"]
        return annotated(kept[0], source, depth + 1) if len(kept) == 1 else None
    if kind == "subscript":  # ``Optional[Context]``; ``ParamType[t.Any]`` is a ParamType
        value = node.child_by_field_name("value")
        if value is not None and span(value, source) in _WRAPPERS:
            return annotated(node.child_by_field_name("subscript"), source, depth + 1)
        return annotated(value, source, depth + 1)
    if kind == "generic_type":  # ``Optional[Context]`` written as a type
        name = node.named_children[0] if node.named_children else None
        if name is not None and span(name, source) in _WRAPPERS:
            params = [c for c in node.named_children[1:] if c.type == "type_parameter"]
            kids = params[0].named_children if params else []
            return annotated(kids[0], source, depth + 1) if len(kids) == 1 else None
        return annotated(name, source, depth + 1)
    return None


def _parameter(node: Node, name: str) -> Node | None:
    """The annotation of the parameter ``name`` of the function ``node`` is in."""
    fn = node.parent
    while fn is not None and fn.type != "function_definition":
        fn = fn.parent
    params = fn.child_by_field_name("parameters") if fn is not None else None
    for p in params.named_children if params is not None else ():
        if p.type == "typed_parameter":
            named = next((c for c in p.named_children if c.type == "identifier"), None)
        elif p.type == "typed_default_parameter":
            named = p.child_by_field_name("name")
        else:
            continue
        if named is not None and named.text == name.encode():
            return p.child_by_field_name("type")
    return None


def binds(kind: str, caps: dict[str, list[Node]], source: bytes) -> list[Ref]:
    """The ``binds`` row of one match of a :data:`PYTHON_BINDS` pattern (or none)."""
    var = caps.get("var")
    if not var:
        return []
    if kind == "binds_alias":
        alias = caps.get("alias")
        typ = _parameter(var[0], span(alias[0], source)) if alias else None
    else:
        typ = caps["type"][0] if caps.get("type") else None
    named = annotated(typ, source)
    if typ is None or named is None or len(named[0]) > _MAX or not named[0].isidentifier():
        return []
    bound = span(var[0], source) + ("()" if kind == "binds_ret" else "")
    at = var[0] if kind == "binds_alias" else typ  # the chunk that holds the row
    line, byte = at.start_point[0] + 1, at.start_byte + 1
    return [Ref(named[0], bound[:_MAX], "binds", line, byte, named[1][:_MAX])]
