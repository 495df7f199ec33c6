"""The query patterns of ``chunking/references.py`` for Perl, Bash, PHP, CMake and Ruby:
the languages whose code names things by strings and statements more than by syntax (a
Perl ``use parent 'Foo'``, a PHP ``require_once 'x.php'``, a CMake command in any case, a
Ruby ``include Comparable``); what their imports bind is read in ``chunking/imports.py``."""

from __future__ import annotations

from typing import Final

from tree_sitter import Node

__all__ = ["BASH", "CMAKE", "PERL", "PHP", "RUBY", "perl_sub_name"]

_Q: Final = "(_) @qual"


# Bash: a command that may be a function of the code (``log_info "x"``); ``source f``, ``. f``.
BASH: Final = [
    ("call", "(command name: (command_name (word) @name))"),
    ("import", '(command name: (command_name (word) @cmd (#any-of? @cmd "source" "."))) @import'),
]
# Perl: a sub's name is written with its package or not (``Text::Wrap::fill(…)``, ``&f``),
# a method on an object or a class (``$self->helper``, ``File::Temp->new``); ``use M``.
PERL: Final = [
    ("call", "(function_call_expression function: (function) @name)"),
    ("call", "(ambiguous_function_call_expression function: (function) @name)"),
    ("call", f"(method_call_expression invocant: {_Q} method: (method) @name)"),
    ("import", "(use_statement module: (package)) @import"),
    ("value", '((bareword) @name (#match? @name "^[A-Z][A-Z0-9_]+$"))'),  # ``MAX``: a constant
    *(  # ``our @ISA = qw(Exporter)``, ``@ISA = ('Pod::Simple')``, ``push @ISA, 'X'``: bases
        ("import", f"({node} {left}: {isa}) @import")
        for node, left, isa in (
            ("assignment_expression", "left", '(array (varname) @v (#eq? @v "ISA"))'),
            (
                "assignment_expression",
                "left",
                '(variable_declaration (array (varname) @v (#eq? @v "ISA")))',
            ),
            (
                "ambiguous_function_call_expression",
                "arguments",
                '(array (varname) @v (#eq? @v "ISA"))',
            ),
        )
    ),
]

# CMake: each command is a call (of a function or macro of the code, or a built-in);
# ``include(Module)`` and ``include(path/x.cmake)`` paste a file's in.  Names are read in
# lower case, as CMake reads them (``CMAKE_PUSH_CHECK_STATE()`` calls
# ``macro(cmake_push_check_state)``).
CMAKE: Final = [
    ("call", "(normal_command (identifier) @name)"),
    (
        "import",
        '(normal_command (identifier) @cmd (#match? @cmd "^[iI][nN][cC][lL][uU][dD][eE]$"))'
        " @import",
    ),
]
# PHP: a class is written bare or qualified (``Thing``, ``\\Foo\\Other``): ``new``, a static
# call's or a constant's class, a type, a base; methods on objects and classes, ``use``.
_PHP_CLASS: Final = (
    "(name) @name",
    "(qualified_name prefix: (namespace_name) @qual (name) @name)",
    "(qualified_name (name) @name)",  # ``\\Countable``
)
PHP: Final = [
    *(("call", f"(function_call_expression function: {c})") for c in _PHP_CLASS),
    *(
        ("call", f"({node} object: {_Q} name: (name) @name)")
        for node in ("member_call_expression", "nullsafe_member_call_expression")
    ),
    ("call", f"(scoped_call_expression scope: {_Q} name: (name) @name)"),
    *(("call", f"(object_creation_expression {c})") for c in _PHP_CLASS),
    *(
        ("inherit", f"({node} {c})")
        for node in ("base_clause", "class_interface_clause", "use_declaration")
        for c in _PHP_CLASS
    ),
    *(("type", f"(named_type {c})") for c in _PHP_CLASS),
    ("type", "(scoped_call_expression scope: (name) @name)"),  # ``ApiProxy::makeSyncCall()``
    ("type", "(class_constant_access_expression . (name) @name)"),  # ``Thing::CONST``
    ("value", f"(class_constant_access_expression {_Q} . (name) @name .)"),  # its ``CONST``
    *(  # ``$x = new Thing()``, ``function f(Request $req)``: the variable's class
        ("binds", f"({node} {var} {typ})")
        for node, var, typ in (
            (
                "assignment_expression",
                "left: (variable_name) @var",
                "right: (object_creation_expression [(name) @name (qualified_name (name) @name)])",
            ),
            (
                "simple_parameter",
                "type: [(named_type [(name) @name (qualified_name (name) @name)]) "
                "(optional_type (named_type [(name) @name (qualified_name (name) @name)]))]",
                "name: (variable_name) @var",
            ),
        )
    ),
    ("import", "(namespace_use_declaration) @import"),
    *(
        ("import", f"({node}) @import")  # ``require_once __DIR__ . '/lib/util.php';``
        for node in (
            "require_expression",
            "require_once_expression",
            "include_expression",
            "include_once_expression",
        )
    ),
]
# Ruby: calls with parentheses or a receiver (a bare word may be a local variable);
# ``X.new`` gives a variable its class; ``< Base`` and ``include``/``extend``/``prepend`` are
# bases; ``require``, ``require_relative`` and ``load`` paste a file in.
_RB_CLASS: Final = (
    "(constant) @name",
    "(scope_resolution scope: (_) @qual name: (constant) @name)",
)
RUBY: Final = [
    ("call", f"(call receiver: {_Q} method: (identifier) @name)"),
    ("call", "(call method: (identifier) @name arguments: (argument_list))"),
    ("call", "(call method: (identifier) @name block: (_))"),
    *(("type", f"(call receiver: {c})") for c in _RB_CLASS),  # ``Helper.fee``
    *(("inherit", f"(superclass {c})") for c in _RB_CLASS),
    *(
        (
            "inherit",
            '(call method: (identifier) @m (#any-of? @m "include" "extend" "prepend") '
            f"arguments: (argument_list {c}))",
        )
        for c in _RB_CLASS
    ),
    (
        "binds",
        "(assignment left: [(identifier) (instance_variable)] @var right: (call receiver: "
        '(constant) @name method: (identifier) @m (#eq? @m "new")))',
    ),
    (
        "import",
        '(call method: (identifier) @m (#any-of? @m "require" "require_relative" "load") '
        "arguments: (argument_list (string))) @import",
    ),
]


def perl_sub_name(node: Node) -> bool:
    """Whether the bareword ``node`` names the sub it declares (``sub DEBUG { 0 }``): no use
    of the constant ``DEBUG`` (Perl's ``value`` pattern above captures every such word)."""
    parent = node.parent
    return parent is not None and parent.type.startswith("subroutine")
