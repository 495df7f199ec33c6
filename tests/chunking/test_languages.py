"""Language detection by file name, extension and shebang; bundled grammars load offline."""

from __future__ import annotations

import pytest

from codechunkd.chunking.languages import detect_language, get_parser, has_grammar
from codechunkd.errors import UnsupportedLanguage


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("src/x.py", "python"),
        ("types.pyi", "python"),
        ("app.tsx", "tsx"),
        ("app.ts", "typescript"),
        ("a.mjs", "javascript"),
        ("main.go", "go"),
        ("lib.rs", "rust"),
        ("A.java", "java"),
        ("a.h", "c"),
        ("a.hpp", "cpp"),
        ("a.cs", "csharp"),
        ("a.rb", "ruby"),
        ("a.php", "php"),
        ("a.kt", "kotlin"),
        ("a.swift", "swift"),
        ("a.scala", "scala"),
        ("a.sh", "bash"),
        ("a.lua", "lua"),
        ("lib/init.tcl", "tcl"),
        ("http-2.9.tm", "tcl"),
        ("q.sql", "sql"),
        ("i.html", "html"),
        ("s.css", "css"),
        ("README.md", "markdown"),
        ("index.rst", "rst"),
        ("package.json", "json"),
        ("ci.yml", "yaml"),
        ("pyproject.toml", "toml"),
        ("Makefile", "make"),
        ("Dockerfile", "dockerfile"),
        ("Dockerfile.dev", "dockerfile"),
        ("Gemfile", "ruby"),
        ("LICENSE", "text"),
        ("notes.txt", "text"),
        ("weird.unknownext", "text"),
        ("dir.d/file.PY", "python"),
    ],
)
def test_detect_by_name_and_extension(path: str, expected: str) -> None:
    """File names win over extensions; unknown files are text."""
    assert expected == detect_language(path)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"#!/usr/bin/env python3\nprint()\n", "python"),
        (b"#!/usr/bin/python3.11\n", "python"),
        (b"#!/bin/sh\nset -e\n", "bash"),
        (b"#! /usr/bin/env -S node --harmony\n", "javascript"),
        (b"\xef\xbb\xbf#!/usr/bin/env ruby\n", "ruby"),
        (b"#!/usr/local/bin/lua\n", "lua"),
        (b"no shebang\n", "text"),
    ],
)
def test_detect_by_shebang(head: bytes, expected: str) -> None:
    """A file without a known name or extension is recognised by its interpreter line."""
    assert expected == detect_language("bin/tool", head)


LICENCE = b"/*\n" + b" * Licensed under the Apache License, Version 2.0.\n" * 80 + b" */\n"
"""A licence comment longer than the 256 bytes a shebang is looked for in."""


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"#pragma once\n#include <stdint.h>\nstruct point { int x; };\nint add(int, int);\n", "c"),
        (b"", "c"),
        (
            b"/* Handlers may\n   namespace processing as described above.\n   try it. */\n"
            b"int f(void);\n",
            "c",
        ),
        (b"// std::string in a comment\nint g(void);\n", "c"),
        (LICENCE + b"#pragma once\nnamespace arrow {\nclass Status;\n}\n", "cpp"),
        (b"#include <vector>\nint total(const int* v);\n", "cpp"),
        (b"template <typename T>\nT clamp(T v, T lo, T hi);\n", "cpp"),
        (b"class Buffer {\n public:\n  int size() const;\n};\n", "cpp"),
        (b"int f(void);\nstd::size_t g(void);\n", "cpp"),
        (b"/* unclosed comment, a class in it\nclass X {", "c"),
        (b"#import <Foundation/Foundation.h>\n@interface Foo : NSObject\n@end\n", "objc"),
    ],
)
def test_a_header_is_c_cpp_or_objc_by_its_content(content: bytes, expected: str) -> None:
    """A ``.h`` file is C unless a line only C++ (or Objective-C) can hold says otherwise,
    anywhere in its first 64 KiB outside comments: the C grammar reads a namespace as a
    function spanning the file and a class as a declaration."""
    assert detect_language("include/x.h", content) == expected


def test_configured_extensions_win() -> None:
    """``extensions`` maps extra extensions (with a dot) and exact file names."""
    mapping = {".tpl": "html", "Jenkinsfile": "groovy", ".py": "text"}
    assert detect_language("a/page.tpl", extensions=mapping) == "html"
    assert detect_language("Jenkinsfile", extensions=mapping) == "groovy"
    assert detect_language("x.py", extensions=mapping) == "text"
    assert detect_language("x.rs", extensions=mapping) == "rust"


LANGUAGES = [
    "python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp", "csharp",
    "ruby", "php", "kotlin", "swift", "scala", "bash", "lua", "sql", "html", "css",
    "markdown", "rst", "json", "yaml", "toml",
]  # fmt: skip


@pytest.mark.parametrize("language", LANGUAGES)
def test_bundled_grammars_parse_offline(language: str) -> None:
    """Every language with definition rules has a grammar in the wheel."""
    assert has_grammar(language)
    tree = get_parser(language).parse(b"x\n")
    assert tree.root_node is not None


def test_unknown_grammar_is_an_error() -> None:
    """Asking for a grammar that is not bundled raises UnsupportedLanguage."""
    assert not has_grammar("no-such-language")
    assert not has_grammar("text")
    with pytest.raises(UnsupportedLanguage) as info:
        get_parser("no-such-language")
    assert info.value.language == "no-such-language"
