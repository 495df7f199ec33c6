"""Which language a file is in, and its tree-sitter parser.

Detection looks, in order, at the configured ``extensions`` mapping (exact
file names first, then extensions), well-known file names (``Makefile``,
``Dockerfile``, …), the extension, and the shebang line.  Anything else is
``text``.  Names are those of ``tree-sitter-language-pack`` (``python``,
``tsx``, ``csharp``, …); its 0.13 wheel bundles the compiled grammars, so
nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from tree_sitter import Language, Parser

from codechunkd.errors import UnsupportedLanguage

__all__ = [
    "TEXT",
    "detect_language",
    "get_language",
    "get_parser",
    "has_grammar",
    "known_languages",
]

TEXT = "text"
"""The language of files we know no grammar for: chunked by paragraphs, then lines."""

_FILENAMES: dict[str, str] = {
    "makefile": "make",
    "gnumakefile": "make",
    "dockerfile": "dockerfile",
    "containerfile": "dockerfile",
    "cmakelists.txt": "cmake",
    "gemfile": "ruby",
    "rakefile": "ruby",
    "podfile": "ruby",
    "vagrantfile": "ruby",
    "jenkinsfile": "groovy",
    "build": "starlark",
    "build.bazel": "starlark",
    "workspace": "starlark",
    ".bashrc": "bash",
    ".bash_profile": "bash",
    ".profile": "bash",
    ".zshrc": "bash",
    "pkgbuild": "bash",
    "go.mod": "gomod",
    "cargo.lock": "toml",
    "pipfile": "toml",
    "poetry.lock": "toml",
    ".gitignore": "gitignore",
    ".dockerignore": "gitignore",
    ".gitattributes": "gitattributes",
    "meson.build": "meson",
    "requirements.txt": "requirements",
    "requirements-dev.txt": "requirements",
}

_EXTENSIONS: dict[str, str] = {
    "py": "python", "pyi": "python", "pyw": "python",
    "js": "javascript", "mjs": "javascript", "cjs": "javascript", "jsx": "javascript",
    "ts": "typescript", "mts": "typescript", "cts": "typescript", "tsx": "tsx",
    "go": "go", "rs": "rust", "java": "java",
    "c": "c", "h": "c",
    "cc": "cpp", "cpp": "cpp", "cxx": "cpp", "c++": "cpp", "hh": "cpp", "hpp": "cpp",
    "hxx": "cpp", "h++": "cpp", "ipp": "cpp", "inl": "cpp",
    "cs": "csharp", "rb": "ruby", "rake": "ruby", "gemspec": "ruby",
    "php": "php", "phtml": "php",
    "kt": "kotlin", "kts": "kotlin", "swift": "swift", "scala": "scala", "sc": "scala",
    "sh": "bash", "bash": "bash", "zsh": "bash", "ksh": "bash",
    "lua": "lua", "sql": "sql", "tcl": "tcl", "tm": "tcl",
    "html": "html", "htm": "html", "xhtml": "html",
    "css": "css", "scss": "scss",
    "md": "markdown", "markdown": "markdown", "mdx": "markdown",
    "rst": "rst", "json": "json", "jsonc": "json", "json5": "json", "geojson": "json",
    "yaml": "yaml", "yml": "yaml", "toml": "toml",
    "txt": TEXT, "text": TEXT, "log": TEXT,
    "xml": "xml", "xsd": "xml", "xsl": "xml", "svg": "xml", "plist": "xml",
    "ex": "elixir", "exs": "elixir", "erl": "erlang", "hrl": "erlang",
    "hs": "haskell", "ml": "ocaml", "mli": "ocaml_interface", "elm": "elm",
    "clj": "clojure", "cljs": "clojure", "edn": "clojure",
    "dart": "dart", "jl": "julia", "r": "r", "nim": "nim", "zig": "zig", "v": "verilog",
    "sv": "verilog", "vhd": "vhdl", "vhdl": "vhdl",
    "pl": "perl", "pm": "perl", "groovy": "groovy", "gradle": "groovy",
    "tf": "hcl", "hcl": "hcl", "nix": "nix", "proto": "proto", "graphql": "graphql",
    "gql": "graphql", "vue": "vue", "svelte": "svelte", "dockerfile": "dockerfile",
    "mk": "make", "cmake": "cmake", "f90": "fortran", "f95": "fortran", "f": "fortran",
    "m": "objc", "mm": "objc", "sol": "solidity", "fish": "fish", "ps1": "powershell",
    "vim": "vim", "el": "elisp", "scm": "scheme", "rkt": "racket", "lisp": "commonlisp",
    "hx": "haxe", "cu": "cuda", "glsl": "glsl", "hlsl": "hlsl", "wgsl": "wgsl",
    "ini": "ini", "cfg": "ini", "bib": "bibtex", "tex": "latex", "csv": "csv",
    "tsv": "tsv", "diff": "diff", "patch": "diff", "cmd": "batch", "bat": "batch",
    "jinja": "jinja2", "j2": "jinja2", "twig": "twig", "pug": "pug", "purs": "purescript",
    "gd": "gdscript", "odin": "odin", "gleam": "gleam", "fnl": "fennel", "star": "starlark",
    "bzl": "starlark", "kdl": "kdl", "ron": "ron", "thrift": "thrift", "capnp": "capnp",
    "smithy": "smithy", "prisma": "prisma", "re": "rescript", "res": "rescript",
    "d": "d", "pas": "pascal", "ada": "ada", "adb": "ada", "ads": "ada", "cob": "cobol",
    "asm": "asm", "s": "asm", "awk": "awk", "sed": TEXT, "qml": "qmljs",
    "po": "po", "pot": "po", "lean": "lean", "agda": "agda", "mojo": "mojo",
}  # fmt: skip

_SHEBANG = re.compile(rb"^#![ \t]*(?:/usr)?(?:/local)?/bin/(?:env[ \t]+(?:-\S+[ \t]+)*)?(\S+)")
_INTERPRETERS: dict[str, str] = {
    "python": "python", "pypy": "python",
    "node": "javascript", "nodejs": "javascript", "deno": "typescript", "bun": "javascript",
    "ts-node": "typescript",
    "sh": "bash", "bash": "bash", "dash": "bash", "zsh": "bash", "ksh": "bash",
    "ruby": "ruby", "perl": "perl", "php": "php", "lua": "lua", "luajit": "lua",
    "fish": "fish", "Rscript": "r", "julia": "julia", "tclsh": "tcl", "awk": "awk",
    "make": "make", "groovy": "groovy", "elixir": "elixir", "escript": "erlang",
}  # fmt: skip
_VERSION_SUFFIX = re.compile(r"[\d.]+$")


HEADER_SNIFF = 65536
"""The bytes of a ``.h`` file read to tell C++ and Objective-C from C."""
# GitHub Linguist's heuristics for ``.h`` (its ``heuristics.yml``), which these follow: a
# line that only C++ (or Objective-C) can hold. C parses C++ badly (a namespace becomes a
# function spanning the file, a class a declaration); C++ parses C well.
_OBJC_HEADER = re.compile(
    rb"^[ \t]*(?:@(?:interface|class|protocol|property|end|implementation)\b"
    rb"|#import[ \t]+.+\.h[\">])",
    re.MULTILINE,
)
_CPP_HEADER = re.compile(
    rb"^[ \t]*(?:"
    rb"#[ \t]*include[ \t]*<(?:cstd\w+|c(?:assert|errno|limits|math|stddef|stdio|stdlib|string)"
    rb"|string|vector|map|set|list|array|memory|utility|functional|tuple|optional|variant"
    rb"|algorithm|atomic|mutex|thread|bitset|queue|stack|deque|unordered_map|unordered_set"
    rb"|type_traits|iosfwd|(?:i|o|io|s|f)stream|sstream|ostream|istream|limits|new|chrono)>"
    rb"|template[ \t]*<"
    rb"|(?:try|constexpr)\b"
    rb"|catch[ \t]*\("
    rb"|(?:class|(?:using[ \t]+)?namespace)[ \t]+\w+"
    rb"|(?:private|public|protected)[ \t]*:[ \t]*$"
    rb")|\bstd::\w+",
    re.MULTILINE,
)


_COMMENT = re.compile(rb"/\*.*?(?:\*/|\Z)|//[^\n]*", re.DOTALL)


def _header_language(content: bytes) -> str:
    """``objc``, ``cpp`` or ``c`` for a ``.h`` file, from its first bytes, comments left
    out (``namespace processing as described above`` in a C header's prose)."""
    head = _COMMENT.sub(b"", content[:HEADER_SNIFF])
    if _OBJC_HEADER.search(head):
        return "objc"
    return "cpp" if _CPP_HEADER.search(head) else "c"


def _from_shebang(head: bytes) -> str | None:
    m = _SHEBANG.match(head.lstrip(b"\xef\xbb\xbf"))
    if m is None:
        return None
    name = m.group(1).decode("utf-8", "replace").rsplit("/", 1)[-1]
    return _INTERPRETERS.get(name) or _INTERPRETERS.get(_VERSION_SUFFIX.sub("", name))


def detect_language(
    path: str, head: bytes = b"", extensions: Mapping[str, str] | None = None
) -> str:
    """Language of a file from its name, extension and first bytes (``text`` when unknown):
    ``head`` is the file's content or its start (a shebang is looked for in 256 bytes, C++
    or Objective-C in a ``.h`` file's first ``HEADER_SNIFF``).

    ``extensions`` maps extra names: a key with a leading dot (``".tpl"``) is an
    extension, any other key (``"Jenkinsfile"``) an exact file name.  It wins
    over the built-in tables.
    """
    name = PurePosixPath(path.replace("\\", "/")).name
    lower = name.lower()
    suffixes = [s.lower().lstrip(".") for s in PurePosixPath(lower).suffixes]
    if extensions:
        if name in extensions:
            return extensions[name]
        if lower in extensions:
            return extensions[lower]
        for i in range(len(suffixes)):
            key = "." + ".".join(suffixes[i:])
            if key in extensions:
                return extensions[key]
            if key[1:] in extensions:
                return extensions[key[1:]]
    if lower in _FILENAMES:
        return _FILENAMES[lower]
    if lower.startswith(("dockerfile.", "containerfile.")):
        return "dockerfile"
    if lower.startswith("makefile."):
        return "make"
    if suffixes:
        if suffixes[-1] == "h":
            return _header_language(head)
        lang = _EXTENSIONS.get(suffixes[-1])
        if lang is not None:
            return lang
    lang = _from_shebang(head[:256])
    if lang is not None:
        return lang
    return TEXT


def known_languages(extensions: Mapping[str, str] | None = None) -> frozenset[str]:
    """Every language ``detect_language`` can name (with these ``extensions``): what a
    search may filter on."""
    tables = (_FILENAMES, _EXTENSIONS, _INTERPRETERS, extensions or {})
    return frozenset({TEXT, "dockerfile", "make"}.union(*(t.values() for t in tables)))


@functools.cache
def get_language(name: str) -> Language:
    """The tree-sitter language of a name; :class:`UnsupportedLanguage` when none is bundled."""
    try:
        import tree_sitter_language_pack as pack

        loader: Any = pack.get_language
        lang = loader(name)
    except Exception as exc:  # the pack raises LookupError/ValueError/OSError by version
        raise UnsupportedLanguage(name) from exc
    if not isinstance(lang, Language):  # pragma: no cover - defensive
        raise UnsupportedLanguage(name)
    return lang


def get_parser(name: str) -> Parser:
    """A new parser for a language (parsers are not thread-safe: one per thread or call)."""
    return Parser(get_language(name))


@functools.cache
def has_grammar(name: str) -> bool:
    """Whether the language pack bundles a grammar for ``name``."""
    if name == TEXT:
        return False
    try:
        get_language(name)
    except UnsupportedLanguage:
        return False
    return True
