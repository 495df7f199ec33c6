"""The names a file uses: calls, imports, inheritance and type uses, from its tree-sitter tree.

``extract(language, tree, source)`` returns one :class:`Ref` per use, in file order, for the
languages in :data:`QUERIES` (Python, JavaScript, TypeScript/TSX, Go, Rust, Java, C#:
``chunking/refs_csharp.py``, Perl, Bash, PHP, CMake, Ruby: ``chunking/refs_scripts.py``,
C, C++ and CUDA: ``chunking/refs_c.py``); any other language has none.  Each language is
a handful of tree-sitter query patterns (run in C, one pass over the tree) plus a small
function that reads its import statements, because what an import binds (an alias, a
namespace, a list) is easier to say in Python than in a query.

What a ref records is syntax only: the name (``join``), the text before it (``os.path``,
``self``), its kind and line.  Which definition a name means is decided at query time
(``storage/refgraph.py``): same file, then the file's imports, then by name.

Kinds: ``call`` (calls, ``new``, decorators, macros), ``inherit`` (base classes, implemented
interfaces and traits), ``type`` (type annotations and type uses), ``value`` (a name used
as a value: passed, assigned, returned, an attribute read), ``import`` (one per name an
import binds: ``name`` is the local name, ``qualifier`` the name in the module, empty for a
whole module or namespace, ``module`` the module path as written), ``binds`` (a variable
given a class: in Python by an annotation or a constructor call, ``ctx: Context``,
``x = Foo()``; in TypeScript by an annotation or ``new``, ``s: Subscriber<T>``,
``const s = new Subject()``; in Go a receiver, a typed parameter or ``var``, a composite
literal, ``new(T)`` or ``NewT()``, ``m := http.NewServeMux()``: ``name`` is the class,
``qualifier`` the variable, ``module`` the package the class is named through (``http``);
so ``ctx.invoke()`` and ``m.Handle()`` resolve through it), ``export`` (a JS/TS module's
default export, ``export default baz``), and ``defines`` (a name bound outside any
function, ``MAX = 3``: ``chunking/refs_defines.py``), which the store writes as a definition.
"""

from __future__ import annotations

import functools
from typing import Final

from tree_sitter import Node, Query, QueryCursor, Tree

from codechunkd.chunking.imports import IMPORTS, JS_DEFAULT_EXPORTS, MAX_MODULE, Ref
from codechunkd.chunking.languages import get_language
from codechunkd.chunking.names import span
from codechunkd.chunking.predeclared import GO_BUILTIN
from codechunkd.chunking.refs_c import CPP, DECLARING, SCOPED, C, class_named, declares, scope_of
from codechunkd.chunking.refs_csharp import CSHARP
from codechunkd.chunking.refs_defines import DEFINES, qualified
from codechunkd.chunking.refs_defines import KIND as DEFINES_KIND
from codechunkd.chunking.refs_python import PYTHON, PYTHON_BINDS, binds
from codechunkd.chunking.refs_scripts import BASH, CMAKE, PERL, PHP, RUBY, perl_sub_name

__all__ = ["KINDS", "QUERIES", "Ref", "extract"]

KINDS: Final = ("call", "inherit", "type", "value", "import", "binds", "export")
#: When two patterns capture the same name node, the earlier kind here wins.
_PRIORITY: Final = {k: i for i, k in enumerate(KINDS)}
#: The query kinds that make ``binds`` rows (read in :func:`extract`).
_BINDS: Final = frozenset(
    {
        "binds",
        "binds_call",
        "binds_new",
        "binds_c",
        "binds_this",
        "binds_ret",
        "binds_result",
        "binds_field",
    }
)
#: Names longer than this are not names (minified code, generated tables): skipped.
_MAX_NAME: Final = 200


_Q = "(_) @qual"
_JS_COMMON: Final = [
    ("call", "(call_expression function: (identifier) @name)"),
    (
        "call",
        f"(call_expression function: (member_expression object: {_Q} "
        "property: (property_identifier) @name))",
    ),
    (
        "call",
        f"(call_expression function: (member_expression object: {_Q} "
        "property: (private_property_identifier) @name))",
    ),
    ("call", "(new_expression constructor: (identifier) @name)"),
    (
        "call",
        f"(new_expression constructor: (member_expression object: {_Q} "
        "property: (property_identifier) @name))",
    ),
    ("value", "(arguments (identifier) @name)"),
    ("value", f"(member_expression object: {_Q} property: (property_identifier) @name)"),
    ("import", "(import_statement) @import"),
    ("import", "(export_statement source: (string)) @import"),  # a re-export: ``export * from``
    *(  # ``const x = require('m')``; ``module.exports = require('./x')``: a re-export
        (
            "import",
            f"({node} (call_expression function: (identifier) @fn"
            ' (#eq? @fn "require") arguments: (arguments (string)))) @import',
        )
        for node in ("variable_declarator value:", "assignment_expression right:")
    ),
    (  # ``module.exports = { publish: require('./publish.js') }``: a re-export each
        "import",
        "(assignment_expression right: (object (pair value: (call_expression function: "
        '(identifier) @fn (#eq? @fn "require") arguments: (arguments (string)))) @import))',
    ),
    (  # ``const getError = require('./error.js').getError``: the module's ``getError``
        "import",
        "(variable_declarator name: (identifier) value: (member_expression object: "
        '(call_expression function: (identifier) @fn (#eq? @fn "require") '
        "arguments: (arguments (string))) property: (property_identifier))) @import",
    ),
    *(("export", pattern) for pattern in JS_DEFAULT_EXPORTS),  # ``export default baz``
    (  # ``const arb = new Arborist(opts)``: ``arb.reify()`` is ``Arborist``'s
        "binds",
        "(variable_declarator name: (identifier) @var value: (new_expression "
        "constructor: (identifier) @name))",
    ),
    (  # ``this.cache = new Cache()`` in a method: ``this.cache`` in every one of the class
        "binds_this",
        "(assignment_expression left: (member_expression object: (this) "
        "property: (property_identifier) @var) right: (new_expression "
        "constructor: (identifier) @name))",
    ),
]
#: ``<Button onClick={go}>``, ``<Tabs.Panel />``: a component rendered is called (a name in
#: lower case, ``<div>``, is an HTML element).  JavaScript's grammar and TSX's read JSX.
_JSX: Final = [
    ("call", f'({element} name: {name} (#match? @name "^[A-Z]"))')
    for element in ("jsx_opening_element", "jsx_self_closing_element")
    for name in ("(identifier) @name", f"(member_expression object: {_Q} property: (_) @name)")
]
_JAVASCRIPT: Final = [*_JS_COMMON, *_JSX, ("inherit", "(class_heritage (identifier) @name)")]
#: A TypeScript type that names a class: ``Subscriber``, ``Subscriber<T>``.
_TS_TYPES: Final = ("(type_identifier) @name", "(generic_type name: (type_identifier) @name)")
_TYPESCRIPT: Final = [
    *_JS_COMMON,
    ("inherit", "(extends_clause value: (identifier) @name)"),
    ("inherit", "(implements_clause (type_identifier) @name)"),
    ("inherit", "(implements_clause (generic_type name: (type_identifier) @name))"),
    ("inherit", "(extends_type_clause type: (type_identifier) @name)"),
    ("type", "(type_identifier) @name"),
    *(  # ``subscriber: Subscriber<T>``, ``const s = new Subject()``: the variable's class
        ("binds", f"({node} {var}: (identifier) @var type: (type_annotation {typ}))")
        for node, var in (
            ("required_parameter", "pattern"),
            ("optional_parameter", "pattern"),
            ("variable_declarator", "name"),
        )
        for typ in _TS_TYPES
    ),
    *(  # ``private scheduler: SchedulerLike``, ``x = new Bar()``: a field's class, in the class
        ("binds", f"(public_field_definition name: (property_identifier) @var {field})")
        for field in (
            *(f"type: (type_annotation {t})" for t in _TS_TYPES),
            "value: (new_expression constructor: (identifier) @name)",
        )
    ),
    *(  # ``constructor(private readonly s: Scheduler)``: the field ``this.s``
        (
            "binds_this",
            f"(required_parameter (accessibility_modifier) pattern: (identifier) @var "
            f"type: (type_annotation {t}))",
        )
        for t in _TS_TYPES
    ),
    *(  # ``function make(): Session``, a method's, an arrow function's: a ``make()`` row
        ("binds_ret", f"({node} return_type: (type_annotation {t})){close}")
        for node, close in (
            ("function_declaration name: (identifier) @var", ""),
            ("method_definition name: (property_identifier) @var", ""),
            ("variable_declarator name: (identifier) @var value: (arrow_function", ")"),
        )
        for t in _TS_TYPES
    ),
    *(  # ``const s = make()``, ``const s = this.make()``: what the function gives
        (
            "binds_result",
            f"(variable_declarator name: (identifier) @var !type value: "
            f"(call_expression function: {callee}))",
        )
        for callee in (
            "(identifier) @name",
            "(member_expression object: [(identifier) (this)] @pkg "
            "property: (property_identifier) @name)",
        )
    ),
]
#: A type by its name, ``Writer``, or through a package the file imports, ``bufio.Writer``.
_GO_NAMED: Final = (
    "(type_identifier) @name",
    "(qualified_type package: (package_identifier) @pkg name: (type_identifier) @name)",
)
#: The type of a composite literal or of ``new``: named, or generic, ``List[T]``.
_GO_VALUES: Final = (*_GO_NAMED, *(f"(generic_type type: {t})" for t in _GO_NAMED))
_GO_TYPES: Final = (*_GO_VALUES, *(f"(pointer_type {t})" for t in _GO_VALUES))
_GO_FIRST: Final = "(short_var_declaration left: (expression_list . (identifier) @var) right: "
_GO_NEW: Final = (  # ``NewWriter(…)``, ``bufio.NewReader(…)``: Go's constructors are ``NewT``
    "(call_expression function: [(identifier) @name "
    "(selector_expression operand: (_) @pkg field: (field_identifier) @name)])"
)
_GO_EMBEDDED: Final = ("field_declaration !name type:", "type_elem")
_GO: Final = [
    # ``struct { *Reader; io.Writer }``, an interface's ``Reader``: embedded, promoted: a base
    *(("inherit", f"({holder} {t})") for holder in _GO_EMBEDDED for t in _GO_NAMED),
    *(  # ``func (b *Writer) …``, ``w *bufio.Writer`` parameters, ``var b Builder``: its type
        ("binds", f"({node} name: (identifier) @var type: {typ})")
        for node in ("parameter_declaration", "var_spec")
        for typ in _GO_TYPES
    ),
    *(  # ``type Server struct { conn *net.Conn }``: ``Server.conn``'s type, which types
        # ``s.conn.Close()`` (``storage/reftyped.py``)
        (
            "binds_field",
            "(type_spec name: (type_identifier) @cls type: (struct_type (field_declaration_list"
            f" (field_declaration name: (field_identifier) @var type: {typ}))))",
        )
        for typ in _GO_TYPES
    ),
    *(  # ``w := NewWriter(…)``, ``var m = http.NewServeMux()``
        ("binds_new", f"{first}(expression_list . {_GO_NEW}))")
        for first in (_GO_FIRST, "(var_spec . name: (identifier) @var !type value: ")
    ),
    *(  # ``w := &Writer{…}``, ``b := strings.Builder{}``, ``m := new(sync.Map)``
        ("binds", f"{_GO_FIRST}(expression_list . {lit}))")
        for typ in _GO_VALUES
        for lit in (
            f"(composite_literal type: {typ})",
            f"(unary_expression operand: (composite_literal type: {typ}))",
            '(call_expression function: (identifier) @fn (#eq? @fn "new") '
            f"arguments: (argument_list . {typ} .))",
        )
    ),
    *(  # ``func Parse(s string) (*Template, error)``: a ``Parse()`` row, the first result's
        ("binds_ret", f"({node} @var result: {result})")
        for node in (
            "function_declaration name: (identifier)",
            "method_declaration name: (field_identifier)",
            "method_elem name: (field_identifier)",  # an interface's: ``Header() Header``
        )
        for typ in _GO_TYPES
        for result in (typ, f"(parameter_list . (parameter_declaration type: {typ}))")
    ),
    *(  # ``t := New("x")``, ``resp, err := http.Get(u)``: what the function gives
        ("binds_result", f"{first}(expression_list . (call_expression function: {callee})))")
        for first in (_GO_FIRST, "(var_spec . name: (identifier) @var !type value: ")
        for callee in (
            "(identifier) @name",
            "(selector_expression operand: (identifier) @pkg field: (field_identifier) @name)",
        )
    ),
    ("call", "(call_expression function: (identifier) @name)"),
    (
        "call",
        f"(call_expression function: (selector_expression operand: {_Q} "
        "field: (field_identifier) @name))",
    ),
    ("type", "(qualified_type package: (package_identifier) @qual name: (type_identifier) @name)"),
    ("type", "(type_identifier) @name"),
    ("value", "(argument_list (identifier) @name)"),
    *(  # ``return ErrClosed``, ``x := DefaultMaxHeaderBytes``, ``case StatusOK:``
        ("value", f"({node} (expression_list (identifier) @name))")
        for node in (
            "return_statement",
            "short_var_declaration right:",
            "assignment_statement right:",
            "var_spec value:",
            "expression_case value:",
        )
    ),
    ("value", "(literal_value (literal_element (identifier) @name))"),  # ``[]T{A, B}``
    ("value", "(keyed_element value: (literal_element (identifier) @name))"),  # ``{K: V}``
    # ``s.Addr``, ``http.StatusOK`` read (a call's is its ``call`` row: one row per name)
    ("value", f"(selector_expression operand: {_Q} field: (field_identifier) @name)"),
    ("import", "(import_spec) @import"),
]
_TYPE_NAME: Final = '(#match? @name "^[A-Z]")'
_RUST_TYPES: Final = (
    "(type_identifier) @name",
    "(generic_type type: (type_identifier) @name)",
    "(reference_type type: (type_identifier) @name)",
    "(reference_type type: (generic_type type: (type_identifier) @name))",
)
_RUST: Final = [
    ("call", "(call_expression function: (identifier) @name)"),
    (
        "call",
        f"(call_expression function: (scoped_identifier path: {_Q} name: (identifier) @name))",
    ),
    (
        "call",
        f"(call_expression function: (field_expression value: {_Q} "
        "field: (field_identifier) @name))",
    ),
    ("call", "(call_expression function: (generic_function function: (identifier) @name))"),
    ("call", "(macro_invocation macro: (identifier) @name)"),
    ("inherit", "(impl_item trait: (type_identifier) @name)"),
    ("inherit", "(impl_item trait: (generic_type type: (type_identifier) @name))"),
    (
        "inherit",
        f"(impl_item trait: (scoped_type_identifier path: {_Q} name: (type_identifier) @name))",
    ),
    ("type", f"(scoped_type_identifier path: {_Q} name: (type_identifier) @name)"),
    ("type", "(type_identifier) @name"),
    *(  # a type named in a path: ``Kind::Bell``, ``Span::new()``, ``ast::Group::new()``
        ("type", f"({node} path: {path} {_TYPE_NAME})")
        for node in ("scoped_identifier", "scoped_type_identifier")
        for path in (
            "(identifier) @name",
            f"(scoped_identifier path: {_Q} name: (identifier) @name)",
        )
    ),
    ("value", "(arguments (identifier) @name)"),
    ("macro_call", "(token_tree (identifier) @name . (token_tree) @args)"),
    *(  # ``matcher: &ArgMatcher``, ``let v: Vec<T>``: the variable's type
        ("binds", f"({node} pattern: (identifier) @var type: {typ})")
        for node in ("parameter", "let_declaration")
        for typ in _RUST_TYPES
    ),
    (  # ``let p = Parser::new(…)``: by convention a type's constructor gives that type
        "binds_call",
        "(let_declaration pattern: (identifier) @var value: (call_expression function: "
        "(scoped_identifier path: (identifier) @name)))",
    ),
    ("import", "(use_declaration) @import"),
]
_JAVA: Final = [
    ("call", f"(method_invocation object: {_Q} name: (identifier) @name)"),
    ("call", "(method_invocation name: (identifier) @name)"),
    ("call", "(object_creation_expression type: (type_identifier) @name)"),
    ("inherit", "(superclass (type_identifier) @name)"),
    ("inherit", "(super_interfaces (type_list (type_identifier) @name))"),
    ("inherit", "(super_interfaces (type_list (generic_type (type_identifier) @name)))"),
    ("inherit", "(superclass (generic_type (type_identifier) @name))"),
    ("inherit", "(extends_interfaces (type_list (type_identifier) @name))"),
    ("type", f"(scoped_type_identifier {_Q} . (type_identifier) @name)"),  # ``Thread.State``
    ("type", "(type_identifier) @name"),
    *(  # ``State.RUNNING``, ``Executors.newFixedThreadPool()``: a class named as a qualifier
        ("type", f"({node} object: (identifier) @name {_TYPE_NAME})")
        for node in ("field_access", "method_invocation")
    ),
    ("value", "(method_reference (_) @qual (identifier) @name)"),
    *(  # ``AtomicInteger count``, ``Node<K> p``, ``(Map<K, V> m)``: the variable's class
        ("binds", f"({node} type: {typ} {var})")
        for node, var in (
            (
                "local_variable_declaration",
                "declarator: (variable_declarator name: (identifier) @var)",
            ),
            ("field_declaration", "declarator: (variable_declarator name: (identifier) @var)"),
            ("formal_parameter", "name: (identifier) @var"),
        )
        for typ in ("(type_identifier) @name", "(generic_type (type_identifier) @name)")
    ),
    ("import", "(import_declaration) @import"),
]


QUERIES: Final[dict[str, list[tuple[str, str]]]] = {
    "python": PYTHON,
    "javascript": _JAVASCRIPT,
    "typescript": _TYPESCRIPT,
    "tsx": [*_TYPESCRIPT, *_JSX],
    "go": _GO,
    "rust": _RUST,
    "java": _JAVA,
    "perl": PERL,
    "bash": BASH,
    "php": PHP,
    "cmake": CMAKE,
    "csharp": CSHARP,
    "ruby": RUBY,
    "c": C,
    "cpp": CPP,
    "cuda": CPP,
}
"""Per language: (kind, one tree-sitter query pattern) pairs."""
for _language, _patterns in DEFINES.items():  # names bound outside functions: refs_defines
    QUERIES[_language] = [*QUERIES[_language], *((DEFINES_KIND, p) for p in _patterns)]

# Node types whose ``name`` field is the name a definition declares (not a use of it).
_DECLARES: Final = frozenset(
    {
        "class_declaration",
        "interface_declaration",
        "type_alias_declaration",
        "enum_declaration",
        "abstract_class_declaration",
        "type_spec",
        "type_alias",
        "struct_item",
        "enum_item",
        "trait_item",
        "type_item",
        "union_item",
        "type_parameter",
        "record_declaration",
        "annotation_type_declaration",
    }
)


@functools.cache
def _query(language: str) -> tuple[Query, tuple[str, ...]]:
    patterns = QUERIES[language]
    query = Query(get_language(language), "\n".join(p for _, p in patterns))
    return query, tuple(k for k, _ in patterns)


def _qualifier(node: Node, source: bytes, end: int | None = None) -> str:
    """The text before a used name (``node``'s, or from its start to byte ``end``),
    whitespace folded, at most ``_MAX_NAME`` characters.

    Read from the head of ``source`` alone: ``node.text`` copies the whole expression, and
    in a chain of calls each call's object holds the calls inside it, so copying each whole
    was quadratic in the chain (a third of a first index's time on the standard library)."""
    stop = node.end_byte if end is None else end
    head = source[node.start_byte : min(stop, node.start_byte + 8 * _MAX_NAME)]
    return " ".join(head.decode("utf-8", "replace").split())[:_MAX_NAME]


def _package(pkg: list[Node] | None, source: bytes) -> str:
    """The package a Go ``binds`` class is named through (``http`` of ``&http.ServeMux{}``
    or ``http.NewServeMux()``), as written; empty for a class named alone, or a
    constructor on anything but a name (``s.conn.NewReader()``)."""
    if not pkg or pkg[0].type not in {"identifier", "package_identifier"}:
        return ""
    return span(pkg[0], source)[:_MAX_NAME]


def _scope(language: str, node: Node, source: bytes) -> str:
    """C++: the scopes written before a name (``arrow::Status`` of ``arrow::Status::OK``),
    whitespace folded; ``""`` for a name written without, or in another language."""
    top = scope_of(node) if language in SCOPED else None
    if top is None or top.start_byte >= node.start_byte:
        return ""
    return _qualifier(top, source, end=node.start_byte).rstrip(": ")


MAX_DEPTH = 1000
"""No reference is looked for deeper than this in the syntax tree: the query's time grows
with the square of the nesting (50,000 nested calls, a 100 KB file, took 93 s), and the
deepest tree of 1,400 real files (the standard library, Go, TypeScript, minified
JavaScript) is 50 deep."""


def extract(language: str, tree: Tree, source: bytes) -> list[Ref]:
    """The refs of one parsed file, in file order (one per name node)."""
    if language not in QUERIES:
        return []
    query, kinds = _query(language)
    found: dict[int, Ref] = {}
    imports: list[Ref] = []
    defines: list[Ref] = []
    scopes: dict[tuple[int, int, str], str | None] = {}  # ``qualified``'s, for this file
    cursor = QueryCursor(query)
    cursor.set_max_start_depth(MAX_DEPTH)
    for index, caps in cursor.matches(tree.root_node):
        kind = kinds[index]
        if kind == "import":
            for node in caps.get("import", ()):
                imports += [r for r in IMPORTS[language](node) if len(r.module) <= MAX_MODULE]
            continue
        if kind in PYTHON_BINDS and language == "python":  # ``self.t: mod.T[Any]``, ``-> T``
            imports += binds(kind, caps, source)
            continue
        if kind in _BINDS:  # ``ctx: Context``
            imports += _bind(language, kind, caps, source)
            continue
        names = caps.get("name")
        if not names:
            continue
        node = names[0]
        if kind == DEFINES_KIND:
            name = span(node, source)
            holder = caps["scope"][0] if caps.get("scope") else None
            fits = len(name) <= _MAX_NAME
            qual = qualified(name, holder, source, scopes, language) if fits else None
            if qual is not None and len(qual) <= _MAX_NAME:
                defines.append(Ref(name, qual, kind, node.start_point[0] + 1, node.start_byte))
            continue
        if kind == "macro_call":  # ``assert_eq!(x, f(y))``: a macro's tokens are not parsed
            got = _token_call(node, caps.get("args"), source)
            if got is None:
                continue
            kind, qual = got
            name = span(node, source)
            if len(name) <= _MAX_NAME and node.start_byte not in found:
                found[node.start_byte] = Ref(
                    name, qual, kind, node.start_point[0] + 1, node.start_byte
                )
            continue
        if kind == "type" and _declares(node):
            continue
        if language == "perl" and kind == "value" and perl_sub_name(node):
            continue  # ``sub DEBUG { 0 }``: its name, not a use of it
        name = span(node, source) if node.end_byte - node.start_byte <= 4 * _MAX_NAME else ""
        if not name or len(name) > _MAX_NAME:
            continue
        quals = caps.get("qual")
        qual = _qualifier(quals[0], source) if quals else ""
        if language == "cmake":
            name = name.lower()
        if language == "perl" and kind == "call" and (not quals or "::" in name):
            qual, _, name = name.lstrip("&").rpartition("::")  # ``&Text::Wrap::fill``,
            if not name:  # ``$self->SUPER::new``
                continue
        scope = _scope(language, node, source)
        qual = scope or qual  # ``arrow::Status::OK``: ``arrow::Status``, also its module
        ref = Ref(name, qual, kind, node.start_point[0] + 1, node.start_byte, scope)
        old = found.get(node.start_byte)
        if old is None or (_PRIORITY[kind], not qual) < (_PRIORITY[old.kind], not old.qualifier):
            found[node.start_byte] = ref
    imported = {r.name for r in imports if r.kind == "import"}
    defines = [d for d in defines if d.qualifier != d.name or d.name not in imported]
    refs = list(found.values()) + imports + defines
    refs.sort(key=lambda r: r.byte)
    return refs


def _bind(language: str, kind: str, caps: dict[str, list[Node]], source: bytes) -> list[Ref]:
    """The ``binds`` row of one match of a :data:`_BINDS` pattern (or none): ``name`` the
    class (or, for a call's result, the function called), ``qualifier`` the variable
    (``this.s`` for a TypeScript parameter property, ``make()`` for what ``make`` returns),
    ``module`` what the class is named through (a package, ``this``, C++ scopes)."""
    var, typ = caps.get("var"), caps.get("name")
    if kind == "binds_c":  # C++: the class its declared type names
        cls_node = class_named(caps["cls"][0], source) if caps.get("cls") else None
        typ = [cls_node] if cls_node is not None else None
    if not var or not typ:
        return []
    cls = span(typ[0], source)
    constructor = cls.startswith("New") and cls[3:4].isupper()  # Go's ``NewWriter``
    if kind == "binds_new":
        if not constructor:
            return []  # ``x := f()``: a function's result
        cls = cls[3:]
    if kind == "binds_call" and not cls.lstrip("_")[:1].isupper():
        return []  # ``x = make()``: a function's result, not (by convention) a class
    if len(cls) > _MAX_NAME or (language == "go" and cls in GO_BUILTIN and not caps.get("pkg")):
        return []  # ``s string``, ``n := len(b)``: no class of the source's
    if language == "go" and kind == "binds_result" and constructor:
        return []  # ``binds_new``'s
    bound = span(var[0], source)
    if kind == "binds_this":  # a parameter property: the field
        bound = f"this.{bound}"
    elif kind == "binds_field":  # a Go struct's field: ``Server.conn``
        bound = f"{span(caps['cls'][0], source)}.{bound}"
    elif kind == "binds_ret":  # what calling the function gives
        bound = f"{bound}()"
    pkg = caps.get("pkg")
    module = _package(pkg, source) or _scope(language, typ[0], source)
    if pkg and pkg[0].type == "this":
        module = "this"
    at = typ[0]
    return [Ref(cls, bound[:_MAX_NAME], "binds", at.start_point[0] + 1, at.start_byte + 1, module)]


_CHAIN: Final = frozenset({"identifier", "self", "super", "crate"})


def _token_call(node: Node, args: list[Node] | None, source: bytes) -> tuple[str, str] | None:
    """In a macro's token tree, a name right before parentheses is a call (``f(x)``,
    ``Span::new(a)``, ``self.span()``), with the names chained before it by ``.`` or ``::``
    as its qualifier; a capitalised name right before braces is a type (``Foo { a: 1 }``).
    (kind, qualifier), or None when the tokens are no such use."""
    after = node.next_sibling
    if not args or after is None or after.start_byte != args[0].start_byte:
        return None  # ``x, (y)`` or ``vec![…]``: not written against the name
    opener = source[after.start_byte : after.start_byte + 1]
    if opener == b"{":
        return ("type", "") if span(node, source)[:1].isupper() else None
    if opener != b"(":
        return None
    start: Node | None = None
    sep = node.prev_sibling
    while sep is not None and sep.type in {".", "::"}:
        before = sep.prev_sibling
        if before is not None and before.type == "token_tree":  # ``f(x).g()``
            start, before = before, before.prev_sibling
        if before is None or before.type not in _CHAIN:
            break
        start = before
        sep = before.prev_sibling
    if start is None:
        return "call", ""
    dot = node.prev_sibling
    assert dot is not None
    return "call", _qualifier(start, source, end=dot.start_byte)


def _declares(node: Node) -> bool:
    parent = node.parent
    if parent is None:
        return False
    if parent.type in DECLARING:
        return declares(node, parent)
    if parent.type not in _DECLARES:
        return False
    named = parent.child_by_field_name("name")
    return named is not None and named.start_byte == node.start_byte
