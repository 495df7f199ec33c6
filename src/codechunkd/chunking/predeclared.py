"""Names a language declares itself, which no repository's definition is meant by.

Light on purpose (no tree-sitter): the reference graph (``storage/refgraph.py``) reads it as
well as the chunker's reference patterns (``chunking/references.py``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["GO_BUILTIN"]

GO_BUILTIN: Final = frozenset(
    [
        "bool",
        "byte",
        "complex64",
        "complex128",
        "error",
        "float32",
        "float64",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "rune",
        "string",
        "uint",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "uintptr",
        "any",
        "comparable",
        "append",
        "cap",
        "clear",
        "close",
        "complex",
        "copy",
        "delete",
        "imag",
        "len",
        "make",
        "max",
        "min",
        "new",
        "panic",
        "print",
        "println",
        "real",
        "recover",
    ]
)
"""Go's predeclared types and functions: a variable of one, or given one's result, has no
class a repository defines (no ``binds`` row: a third of a Go source's), and a bare
``len(b)`` or ``string(b)`` is not a method ``len`` or ``string`` of the package's."""
