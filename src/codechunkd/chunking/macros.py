"""Export macros blanked before a C++ file is parsed.

Libraries mark the classes they export with a macro: ``class TORCH_API Tensor : public
TensorBase {``, ``struct PROTOBUF_EXPORT Arena {``, ``class LLVM_LIBRARY_VISIBILITY X``.
tree-sitter sees no preprocessor, so it reads such a class as a function named ``Tensor``
returning ``class TORCH_API``, its body a block: the chunk loses its class, the class its
definition, the methods their owner. In PyTorch's installed headers 5,900 of 11,400 class
and struct heads carry one.

The macro is an upper-case word (or several, with or without arguments:
``PROTOBUF_ALIGNAS(8)``; beside attributes: ``ARROW_EXPORT [[nodiscard]]``) between
``class``, ``struct`` or ``union`` and the name, where the name is followed by what only a
definition can follow it with (``{``, ``:``, ``final``, ``<``). Nothing valid without a
macro has that shape, so the macros are replaced by as many spaces: every byte keeps its
offset, and the chunks' text, read from the original source, is unchanged.
"""

from __future__ import annotations

import re
from typing import Final

_MACRO: Final = rb"[A-Z][A-Z0-9_]*[A-Z0-9]\b(?:\([^()\n]*\))?"  # ``TORCH_API``, ``ALIGNAS(8)``
_ATTRIBUTE: Final = rb"\[\[[^\[\]\n]*\]\]"  # ``[[nodiscard]]``: C++ itself, kept
_HEAD: Final = re.compile(  # the macros and attributes between the keyword and the name
    rb"\b(?:class|struct|union)\s+((?:%s\s*)*%s\s+(?:(?:%s|%s)\s*)*)"
    rb"(?=[A-Za-z_]\w*\s*(?:final\b|:(?!:)|\{|<))" % (_ATTRIBUTE, _MACRO, _MACRO, _ATTRIBUTE)
)
_TOKEN: Final = re.compile(_ATTRIBUTE + rb"|" + _MACRO)
LANGUAGES: Final = frozenset({"cpp"})


def blank_export_macros(language: str, source: bytes) -> bytes:
    """``source`` with the export macros of its class heads turned to spaces (the same
    length); other languages' sources, and sources with none, are returned as they are."""
    if language not in LANGUAGES or (b"class" not in source and b"struct" not in source):
        return source
    out: bytearray | None = None
    for head in _HEAD.finditer(source):
        for token in _TOKEN.finditer(source, *head.span(1)):
            if token.group().startswith(b"[["):
                continue
            if out is None:
                out = bytearray(source)
            start, end = token.span()
            out[start:end] = re.sub(rb"\S", b" ", source[start:end])
    return source if out is None else bytes(out)
