"""Export and attribute macros blanked before a C++ file is parsed.

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

An attribute macro alone on its line before a declaration (``LLVM_NODISCARD``,
``Q_OBJECT``: upper case with an underscore) made the grammar end a class early (LLVM's
``StringRef`` closed at its first one, and its later methods were scoped under
``operator[]``).  It becomes a line comment of its length (``//`` and spaces), so the
declaration below takes the line as it takes a comment; ``is_line_macro`` keeps it out of
the docstring.  Attribute macros that begin a line before a function's type and name
(``V8_INLINE bool operator==(``) become a ``/* */`` comment the same way: 58 of the 90
headers of V8 and cppgc had a parse error, 29 now.
"""

from __future__ import annotations

import re
from typing import Final

_ARGS: Final = rb"\([^()\n]*\)"  # a macro's arguments, on one line, unnested
_MACRO: Final = rb"[A-Z][A-Z0-9_]*[A-Z0-9]\b(?:%s)?" % _ARGS  # ``TORCH_API``, ``ALIGNAS(8)``
_ATTRIBUTE: Final = rb"\[\[[^\[\]\n]*\]\]"  # ``[[nodiscard]]``: C++ itself, kept
_HEAD: Final = re.compile(  # the macros and attributes between the keyword and the name
    rb"\b(?:class|struct|union)\s+((?:%s\s*)*%s\s+(?:(?:%s|%s)\s*)*)"
    rb"(?=[A-Za-z_]\w*\s*(?:final\b|:(?!:)|\{|<))" % (_ATTRIBUTE, _MACRO, _MACRO, _ATTRIBUTE)
)
_TOKEN: Final = re.compile(_ATTRIBUTE + rb"|" + _MACRO)
#: A macro on a line of its own: an attribute before a declaration (``LLVM_NODISCARD``,
#: ``Q_OBJECT``; upper case with an underscore, and the next line that is not blank begins
#: a declaration: an enum's last ``DARK_RED`` before ``}`` is no macro), or a call that
#: expands to declarations (``DEFINE_ISA_CONVERSION_FUNCTIONS(Binary, LLVMBinaryRef)``).
_NAME: Final = rb"[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]"
_LINE_MACRO: Final = _NAME + rb"(?:%s)?" % _ARGS
_ALONE: Final = re.compile(
    rb"^[ \t]*(%s%s|%s(?=[ \t]*\n(?:[ \t]*\n)*[ \t]*[A-Za-z_~]))[ \t]*$" % (_NAME, _ARGS, _NAME),
    re.M,
)
#: Attribute macros that begin a function's declaration on its line, after the storage
#: words: ``V8_INLINE bool operator==(``, ``static V8_WARN_UNUSED_RESULT MaybeLocal<T> New(``,
#: ``TORCH_API at::Tensor add(``; a type and a name must follow them (``LARGE_INTEGER f(``
#: is a type and a function, kept).
#: Every part matches in one way only (at most four macros; after ``operator`` only an
#: ``=`` that nothing else may take), so a hostile line is read in linear time.
_LEAD: Final = re.compile(
    rb"^[ \t]*(?:(?:static|inline|virtual|explicit|friend|constexpr|extern)[ \t]+)*"
    rb"(%s(?:[ \t]+%s){0,3})[ \t]+"
    rb"([A-Za-z_~](?:[^\n(;={}]|(?:(?<=operator)|(?<=operator[!<>=+*/%%&|^-])|(?<=operator<<)|(?<=operator>>))=)*)\("
    % (_LINE_MACRO, _LINE_MACRO),
    re.M,
)
_WORD: Final = re.compile(rb"[A-Za-z_~]\w*")
_VISIBLE: Final = re.compile(rb"\S")
_MACRO_TEXT: Final = re.compile(_LINE_MACRO.decode())
LANGUAGES: Final = frozenset({"cpp"})


def _blank(text: bytes) -> bytes:
    """``text`` as spaces, its line breaks and tabs kept."""
    return _VISIBLE.sub(b" ", text)


def _declares(rest: bytes) -> bool:
    """What follows the macros up to ``(`` is a type and a name (or an operator)."""
    words = _WORD.findall(rest)
    return b"operator" in words or len([w for w in words if w != b"const"]) >= 2


def is_line_macro(text: str) -> bool:
    """``text`` (a comment's, as the file has it) is an attribute macro that
    ``blank_export_macros`` made a comment: no comment of the file's own."""
    return _MACRO_TEXT.fullmatch(text) is not None


def blank_export_macros(language: str, source: bytes) -> bytes:
    """``source`` with the export macros of its class heads turned to spaces, those that
    begin a function's line to a ``/* */`` comment and a macro alone on its line to a
    ``//`` comment (the same length: a declaration takes its comments, so its chunk keeps
    its whole first line); other languages' sources, and sources with none, are returned
    as they are."""
    if language not in LANGUAGES:
        return source
    spans = []
    if b"class" in source or b"struct" in source:
        for head in _HEAD.finditer(source):
            tokens = _TOKEN.finditer(source, *head.span(1))
            spans += [t.span() for t in tokens if not t.group().startswith(b"[[")]
    alone = [m.span(1) for m in _ALONE.finditer(source)]
    lead = [m.span(1) for m in _LEAD.finditer(source) if _declares(m.group(2))]
    if not spans and not alone and not lead:
        return source
    out = bytearray(source)
    for start, end in spans:
        out[start:end] = _blank(source[start:end])
    for start, end in alone:  # a line comment: the declaration below takes the line
        out[start:end] = b"//" + _blank(source[start + 2 : end])
    for start, end in lead:  # a comment before it: the declaration takes its whole line
        inner = _blank(source[start + 2 : end - 2])
        out[start:end] = b"/*" + inner + b"*/" if end - start >= 4 else _blank(source[start:end])
    return bytes(out)
