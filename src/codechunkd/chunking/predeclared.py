"""Names a language declares itself, which no repository's definition is meant by.

Light on purpose (no tree-sitter): the reference graph (``storage/refgraph.py``) reads it as
well as the chunker's reference patterns (``chunking/references.py``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["BUILTIN_METHODS", "GO_BUILTIN", "NODE_MODULES"]

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

_PYTHON_TYPES: Final = (
    str,
    bytes,
    bytearray,
    int,
    float,
    complex,
    list,
    tuple,
    dict,
    set,
    frozenset,
)

_JS_METHODS: Final = """
    add apply at bind call catch charAt charCodeAt clear codePointAt concat copyWithin delete
    endsWith entries every exec fill filter finally find findIndex findLast findLastIndex flat
    flatMap forEach get getDate getDay getFullYear getHours getMilliseconds getMinutes getMonth
    getSeconds getTime getTimezoneOffset getUTCDate getUTCDay getUTCFullYear getUTCHours
    getUTCMilliseconds getUTCMinutes getUTCMonth getUTCSeconds has hasOwnProperty includes
    indexOf isPrototypeOf join keys lastIndexOf localeCompare map match matchAll normalize
    padEnd padStart pop propertyIsEnumerable push reduce reduceRight repeat replace replaceAll
    reverse set setDate setFullYear setHours setMilliseconds setMinutes setMonth setSeconds
    setTime setUTCDate setUTCFullYear setUTCHours setUTCMilliseconds setUTCMinutes setUTCMonth
    setUTCSeconds shift slice some sort splice split startsWith substr substring then
    toDateString toExponential toFixed toISOString toJSON toLocaleDateString
    toLocaleLowerCase toLocaleString toLocaleTimeString toLocaleUpperCase toLowerCase
    toPrecision toReversed toSorted toSpliced toString toTimeString toUTCString toUpperCase
    trim trimEnd trimStart unshift valueOf values
"""

BUILTIN_METHODS: Final = {
    "python": frozenset(n for t in _PYTHON_TYPES for n in dir(t) if not n.startswith("_")),
    "js": frozenset(_JS_METHODS.split()),
}
"""The methods of a language's own types, by language family (``storage/refnames.family``):
Python's strings, numbers, lists, tuples, dicts and sets; the prototypes of JavaScript's
``Array``, ``String``, ``Map``, ``Set``, ``Promise``, ``Object``, ``Function``, ``Number``,
``RegExp`` and ``Date`` (less their properties, such as ``length`` and ``name``, and the
deprecated HTML methods, such as ``link``). ``"\\n".join(lines)`` or ``d.items()`` on a
receiver of no known class is that type's method, not the one ``join`` or ``items`` a class
of the repository defines."""

NODE_MODULES: Final = frozenset(
    """
    assert async_hooks buffer child_process cluster console constants crypto dgram
    diagnostics_channel dns domain events fs http http2 https inspector module net os path
    perf_hooks process punycode querystring readline repl stream string_decoder sys timers
    tls trace_events tty url util v8 vm wasi worker_threads zlib
    """.split()  # noqa: SIM905
)
"""Node's own modules (``require('path')``, ``import fs from 'node:fs'``, ``fs/promises``):
no file of a repository, whatever it is named (``cacache/lib/content/path.js``), and before
any package of the same name (the ``events`` package on npm), as Node resolves them."""
