"""Per-language extraction of the names a chunk uses (chunking/references.py).

Python is read from the standard library as installed (real code nobody here wrote); the
other languages from short excerpts of the shapes their real code uses (Go's ``net/http``
imports and selector calls, Rust ``use`` trees and trait impls, Java static imports and
interfaces, TypeScript named and namespace imports), as no such sources are installed
offline on every machine the suite runs on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow
import pytest

from codechunkd.chunking.chunker import chunk
from codechunkd.chunking.references import QUERIES, Ref


def _refs(path: str, text: str | bytes, count_tokens) -> list[Ref]:  # type: ignore[no-untyped-def]
    data = text.encode() if isinstance(text, str) else text
    return [r for c in chunk(path, data, count_tokens=count_tokens) for r in c.refs]


def _has(
    refs: list[Ref], kind: str, name: str, qualifier: str | None = None, module: str | None = None
) -> bool:
    return any(
        r.kind == kind
        and r.name == name
        and (qualifier is None or r.qualifier == qualifier)
        and (module is None or r.module == module)
        for r in refs
    )


def test_python_stdlib_module_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """json/decoder.py from the standard library: its imports, calls, bases and attribute
    uses come out with their qualifiers, each in the chunk that holds it."""
    path = Path(json.__file__).parent / "decoder.py"
    data = path.read_bytes()
    chunks = chunk("json/decoder.py", data, count_tokens=count_tokens)
    refs = [r for c in chunks for r in c.refs]
    assert _has(refs, "import", "re", "", "re")
    assert _has(refs, "import", "scanner", "scanner", "json")
    assert _has(refs, "inherit", "ValueError")
    assert _has(refs, "call", "compile", "re")  # re.compile(...)
    assert _has(refs, "call", "raw_decode", "self")  # self.raw_decode(...) in decode
    decode = next(c for c in chunks if c.symbol == "JSONDecoder.decode")
    assert {r.name for r in decode.refs} >= {"raw_decode", "end"}
    for c in chunks:  # a ref lies inside its chunk, and no synthetic chunk holds one
        assert not (c.synthetic and c.refs)
        for r in c.refs:
            assert c.start_line <= r.line <= c.end_line and c.start_byte <= r.byte < c.end_byte


def test_python_relative_aliased_and_star_imports(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """``from .x import a as b`` binds b to x's a; ``import a.b as c`` binds c; ``*`` is kept."""
    refs = _refs(
        "pkg/m.py",
        "import os.path as osp\nfrom ..models import Request as R\nfrom x import *\n"
        "class A(R, osp.Thing):\n    def f(self, v: Iterable[int]) -> None:\n        return R(v)\n",
        count_tokens,
    )
    assert _has(refs, "import", "osp", "", "os.path")
    assert _has(refs, "import", "R", "Request", "..models")
    assert _has(refs, "import", "*", "", "x")
    assert _has(refs, "inherit", "R") and _has(refs, "inherit", "Thing", "osp")
    assert _has(refs, "type", "Iterable") and _has(refs, "call", "R", "")


def test_python_variables_bound_to_a_class(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """An annotated parameter or variable (a quoted annotation too), or a call's result,
    binds a variable (kind ``binds``: name the class or the function called, qualifier the
    variable): a private class (``_ClassBuilder(cls)``), a generic one
    (``RunVar[int]('v')``), a function (``_make()``: the graph reads its ``-> T``); an
    annotation says more than the call it is given (``s: Session = make()``)."""
    refs = _refs(
        "m.py",
        "def f(ctx: Context, p: 'Quoted' = None, *, n: int = 1):\n"
        "    e = Engine(ctx)\n    s: Session = make()\n    b = _ClassBuilder(ctx)\n"
        "    m = _make()\n    v = RunVar[int]('v')\n    return e.run(s)\n",
        count_tokens,
    )
    binds = {(r.qualifier, r.name) for r in refs if r.kind == "binds"}
    assert binds == {
        ("ctx", "Context"),
        ("n", "int"),
        ("e", "Engine"),
        ("s", "Session"),
        ("b", "_ClassBuilder"),
        ("v", "RunVar"),
        ("m", "_make"),
        ("p", "Quoted"),
    }


def test_typescript_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """Named, default and namespace imports; extends/implements; new; type uses (a class's
    own name is a declaration, not a use)."""
    refs = _refs(
        "src/internal/Subscriber.ts",
        "import { isFunction, noop as nop } from './util/isFunction';\n"
        "import Default from '../Default';\nimport * as ops from './operators';\n"
        "export class Subscriber<T> extends Subscription implements Observer<T> {\n"
        "  protected destination: Observer<any>;\n"
        "  next(value: T): void { if (isFunction(this.cb)) { this._next(value); } }\n"
        "  make() { return new SafeSubscriber(ops.map(nop)); }\n}\n",
        count_tokens,
    )
    assert _has(refs, "import", "isFunction", "isFunction", "./util/isFunction")
    assert _has(refs, "import", "nop", "noop", "./util/isFunction")
    assert _has(refs, "import", "Default", "default", "../Default")
    assert _has(refs, "import", "ops", "", "./operators")
    assert _has(refs, "inherit", "Subscription") and _has(refs, "inherit", "Observer")
    assert _has(refs, "call", "isFunction", "") and _has(refs, "call", "_next", "this")
    assert _has(refs, "call", "SafeSubscriber") and _has(refs, "call", "map", "ops")
    assert _has(refs, "type", "Observer")
    assert not _has(refs, "type", "Subscriber")


def test_javascript_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """ES imports and ``require``, ``extends``, member and private calls, ``new``."""
    refs = _refs(
        "lib/commands/install.js",
        "import { log } from './utils/log.js'\n"
        "const { resolve, relative: rel } = require('node:path')\nconst pkg = require('../pkg')\n"
        "class Install extends ArboristWorkspaceCmd {\n"
        "  async exec (args) { const arb = new Arborist(opts); await arb.reify(opts); "
        "log.warn('x'); this.#track(arb); return reifyFinish(this.npm, arb) }\n}\n",
        count_tokens,
    )
    assert _has(refs, "import", "log", "log", "./utils/log.js")
    assert _has(refs, "inherit", "ArboristWorkspaceCmd")
    assert _has(refs, "call", "Arborist") and _has(refs, "call", "reify", "arb")
    assert _has(refs, "call", "warn", "log") and _has(refs, "call", "reifyFinish", "")
    assert _has(refs, "import", "resolve", "resolve", "node:path")
    assert _has(refs, "import", "rel", "relative", "node:path")
    assert _has(refs, "import", "pkg", "", "../pkg")
    assert _has(refs, "call", "#track", "this")


def test_go_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """Aliased and plain imports (the local name is the last path element), selector calls,
    qualified types, and a type's own name not counted as a use."""
    refs = _refs(
        "net/http/client.go",
        'package http\n\nimport (\n\t"context"\n\turlpkg "net/url"\n\t"sync"\n)\n\n'
        "type Client struct {\n\tmu sync.Mutex\n\tJar CookieJar\n}\n\n"
        "func (c *Client) Do(req *Request) (*Response, error) {\n"
        "\tu, err := urlpkg.Parse(req.URL)\n\tctx := context.Background()\n"
        "\treturn c.do(ctx, send(req, u))\n}\n",
        count_tokens,
    )
    assert _has(refs, "import", "context", "", "context")
    assert _has(refs, "import", "urlpkg", "", "net/url")
    assert _has(refs, "type", "Mutex", "sync") and _has(refs, "type", "CookieJar")
    assert _has(refs, "call", "Parse", "urlpkg") and _has(refs, "call", "do", "c")
    assert _has(refs, "call", "send", "") and _has(refs, "type", "Request")
    client = [r.line for r in refs if r.name == "Client" and r.kind != "binds"]
    assert client == [14]  # the receiver's type; not the declaration on line 9
    assert _has(refs, "binds", "Client", "c")  # the receiver: c.do() resolves through Client


GO_QUALIFIED = """package main

import (
	"bufio"
	"net/http"
	xhttp "net/http"
)

func serve(w *bufio.Writer, h http.Handler, s *state) {
	mux := http.NewServeMux()
	m2 := &http.ServeMux{}
	m3 := xhttp.ServeMux{}
	var m4 http.ServeMux
	var m5 = http.NewServeMux()
	b := new(bufio.Reader)
	r := s.conn.NewReader()
	mux.Handle("/", h)
}
"""


def test_go_variables_of_a_package_type_bind_the_package(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """A Go variable whose type is named through a package (``w *bufio.Writer``, ``var m
    http.ServeMux``, ``http.NewServeMux()``, ``&http.ServeMux{}``, ``new(bufio.Reader)``) gets
    a ``binds`` row with that package, as written, in ``module``: ``mux.Handle`` then
    resolves in it.  A constructor on anything but a name (``s.conn.NewReader()``) has none."""
    refs = _refs("cmd/app/main.go", GO_QUALIFIED, count_tokens)
    binds = {(r.qualifier, r.name, r.module) for r in refs if r.kind == "binds"}
    assert binds >= {
        ("w", "Writer", "bufio"),
        ("h", "Handler", "http"),
        ("mux", "ServeMux", "http"),
        ("m2", "ServeMux", "http"),
        ("m3", "ServeMux", "xhttp"),
        ("m4", "ServeMux", "http"),
        ("m5", "ServeMux", "http"),
        ("b", "Reader", "bufio"),
        ("r", "Reader", ""),
        ("s", "state", ""),
    }, binds
    assert len(binds) == 10, binds


def test_rust_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """``use`` trees (lists, aliases, globs, ``{self}``), trait impls, path and method calls,
    macros and the calls in their tokens, types named in paths."""
    refs = _refs(
        "src/fs.rs",
        "use std::io::{self, Read as R, Write};\nuse crate::sys::fs as fs_imp;\n"
        "use super::path::*;\n\npub struct File { inner: fs_imp::File }\n\n"
        "impl Read for File {\n    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {\n"
        "        let n = self.inner.read(buf)?;\n        debug_assert!(n <= buf.len());\n"
        "        let k = io::ErrorKind::Other;\n        assert_eq!(x, (k), Span::new(k));\n"
        "        Ok(fs_imp::clamp(n))\n    }\n}\n",
        count_tokens,
    )
    assert _has(refs, "import", "io", "io", "std")  # ``{self}``: the module itself
    assert _has(refs, "import", "R", "Read", "std::io")
    assert _has(refs, "import", "Write", "Write", "std::io")
    assert _has(refs, "import", "fs_imp", "fs", "crate::sys")
    assert _has(refs, "import", "*", "", "super::path")
    assert _has(refs, "inherit", "Read") and _has(refs, "type", "File", "fs_imp")
    assert _has(refs, "call", "read", "self.inner") and _has(refs, "call", "debug_assert")
    assert _has(refs, "call", "clamp", "fs_imp") and _has(refs, "type", "Result", "io")
    assert _has(refs, "call", "len", "buf") and _has(refs, "call", "new", "Span")  # in macros
    assert not _has(refs, "call", "x")  # ``x, (k)``: a name and a group, not a call
    assert _has(refs, "type", "ErrorKind", "io") and not _has(refs, "type", "fs_imp")


def test_perl_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """``use`` with and without an import list (pragmas, variables and tags bind nothing),
    calls with and without their package or ``&``, method calls on objects and classes."""
    refs = _refs(
        "lib/Foo.pm",
        "package Foo;\nuse strict;\nuse Text::Wrap qw(wrap $columns :all);\n"
        "use File::Temp;\nuse POSIX ();\nuse List::Util 'max';\n\n"
        "sub run {\n    my $self = shift;\n    my $t = wrap('', '', @_);\n"
        "    Text::Wrap::fill('a');\n    $self->helper(1);\n"
        "    my $f = File::Temp->new(UNLINK => 1);\n    helper2 $t, 1;\n    &legacy(1);\n"
        "    return $f->filename;\n}\n",
        count_tokens,
    )
    imports = {(r.name, r.qualifier, r.module) for r in refs if r.kind == "import"}
    assert imports == {
        ("wrap", "wrap", "Text::Wrap"),
        ("*", "", "File::Temp"),
        ("max", "max", "List::Util"),
    }
    assert _has(refs, "call", "wrap", "") and _has(refs, "call", "fill", "Text::Wrap")
    assert _has(refs, "call", "helper", "$self") and _has(refs, "call", "new", "File::Temp")
    assert _has(refs, "call", "helper2", "") and _has(refs, "call", "legacy", "")
    assert _has(refs, "call", "filename", "$f")
    assert not _has(refs, "call", "shift")  # a builtin: not a sub of the code


def test_php_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """``use`` in its four forms (alias, function, group), ``require_once`` by the path its
    last string writes (a variable's, none); calls bare, namespaced, on an
    object (``->``, ``?->``) and on a class (``::``); ``new``; bases, interfaces and traits;
    types; a variable's class from ``new`` and from a typed parameter."""
    refs = _refs(
        "src/Http/Kernel.php",
        "<?php\nnamespace App\\Http;\n\nuse Google\\Runtime\\ApiProxy;\n"
        "require_once __DIR__ . '/../lib/util.php';\ninclude $plugin;\n"
        "use Foo\\Bar as Baz, Foo\\Qux;\nuse function Foo\\helper;\nuse Foo\\{A, B as C};\n\n"
        "class Kernel extends Base implements \\Countable, Iface {\n  use Loggable;\n"
        "  public function handle(Request $req, ?\\Foo\\Resp $r): Response {\n"
        "    $x = new Thing(1);\n    $x->run($req);\n    $this->boot();\n"
        "    self::make();\n    parent::handle($req);\n    ApiProxy::makeSyncCall('a');\n"
        "    \\Foo\\helper(1);\n    $x?->maybe();\n    $k = Thing::LIMIT;\n"
        "    return new \\Foo\\Other($k);\n  }\n}\n",
        count_tokens,
    )
    imports = {(r.name, r.qualifier, r.module) for r in refs if r.kind == "import"}
    assert imports == {
        ("ApiProxy", "ApiProxy", "Google\\Runtime"),
        ("Baz", "Bar", "Foo"),
        ("Qux", "Qux", "Foo"),
        ("helper", "helper", "Foo"),
        ("A", "A", "Foo"),
        ("C", "B", "Foo"),
        ("*", "", "lib/util.php"),
    }
    assert {r.name for r in refs if r.kind == "inherit"} == {
        "Base",
        "Countable",
        "Iface",
        "Loggable",
    }
    assert _has(refs, "call", "Thing", "") and _has(refs, "call", "Other", "Foo")
    assert _has(refs, "call", "run", "$x") and _has(refs, "call", "boot", "$this")
    assert _has(refs, "call", "make", "self") and _has(refs, "call", "handle", "parent")
    assert _has(refs, "call", "makeSyncCall", "ApiProxy") and _has(refs, "call", "helper", "Foo")
    assert _has(refs, "call", "maybe", "$x")
    assert _has(refs, "type", "Request", "") and _has(refs, "type", "Resp", "Foo")
    assert _has(refs, "type", "Response", "") and _has(refs, "type", "ApiProxy", "")
    binds = {(r.name, r.qualifier) for r in refs if r.kind == "binds"}
    assert binds == {("Request", "$req"), ("Resp", "$r"), ("Thing", "$x")}


def test_cmake_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """Each command is a call, named in lower case as CMake reads it; ``include`` of a module
    or of a path after its variables pastes a file in; a path that is all variable, none."""
    refs = _refs(
        "CMakeLists.txt",
        "include(CheckCSourceCompiles)\nINCLUDE(${CMAKE_CURRENT_LIST_DIR}/cmake/Helpers.cmake)\n"
        "include(${EXTRA})\n\nfunction(My_Helper target)\n  CMAKE_PUSH_CHECK_STATE(RESET)\n"
        "  other_fn(${target})\nendfunction()\n",
        count_tokens,
    )
    imports = {(r.name, r.module) for r in refs if r.kind == "import"}
    assert imports == {("*", "CheckCSourceCompiles"), ("*", "cmake/Helpers.cmake")}
    calls = {r.name for r in refs if r.kind == "call"}
    assert {"cmake_push_check_state", "other_fn", "include"} <= calls
    assert "CMAKE_PUSH_CHECK_STATE" not in calls


def test_perl_bases(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """``use parent``/``use base`` and ``@ISA`` (assigned, declared, pushed to) name the
    package's bases (``-norequire`` is no base); ``SUPER::new`` is ``new`` on ``SUPER``."""
    refs = _refs(
        "lib/Foo/Bar.pm",
        "package Foo::Bar;\nuse parent -norequire, 'Foo::Base', 'Other';\n"
        "use base 'TAP::Object';\nour @ISA = qw(Exporter Foo::Mixin);\n"
        "@ISA = ('Pod::Simple');\npush @ISA, 'Late::Base';\n\n"
        "sub new {\n  my $self = shift->SUPER::new(@_);\n  return $self;\n}\n",
        count_tokens,
    )
    bases = {(r.name, r.qualifier, r.module) for r in refs if r.kind == "inherit"}
    assert bases == {
        ("Base", "Foo", "Foo::Bar"),
        ("Other", "", "Foo::Bar"),
        ("Object", "TAP", "Foo::Bar"),
        ("Exporter", "", "Foo::Bar"),
        ("Mixin", "Foo", "Foo::Bar"),
        ("Simple", "Pod", "Foo::Bar"),
        ("Base", "Late", "Foo::Bar"),
    }
    assert _has(refs, "call", "new", "SUPER")


def test_csharp_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """``using`` (a namespace, ``static``, an alias); calls bare, generic, on a member, on
    ``this``/``base``, after ``?.``; ``new``; bases; types; variables' classes from their
    declared type, a parameter, ``foreach`` and ``var x = new T()``."""
    refs = _refs(
        "Services/UserService.cs",
        "using System;\nusing App.Models;\nusing Baz = Foo.Qux.Baz;\n"
        "using static Foo.Util.Helpers;\n\nnamespace App.Services;\n\n"
        "public class UserService : BaseService, IUserService\n{\n"
        "    private readonly IRepo _repo;\n"
        "    public User Find(int id, List<User> users)\n    {\n"
        "        var u = new User(id);\n        User other = _repo.Get(id);\n"
        "        Validate<User>(u);\n        this.Log(1);\n        base.Init();\n"
        "        foreach (User each in users) { each.Touch(); }\n"
        "        return Baz.Make(u)?.Clean();\n    }\n}\n",
        count_tokens,
    )
    imports = {(r.name, r.qualifier, r.module) for r in refs if r.kind == "import"}
    assert imports == {
        ("*", "", "System"),
        ("*", "", "App.Models"),
        ("Baz", "Baz", "Foo.Qux"),
        ("*", "", "Foo.Util.Helpers"),
    }
    assert {r.name for r in refs if r.kind == "inherit"} == {"BaseService", "IUserService"}
    assert _has(refs, "call", "User", "") and _has(refs, "call", "Get", "_repo")
    assert _has(refs, "call", "Validate", "") and _has(refs, "call", "Log", "this")
    assert _has(refs, "call", "Init", "base") and _has(refs, "call", "Clean", "Baz.Make(u)")
    assert _has(refs, "call", "Make", "Baz") and _has(refs, "type", "IRepo", "")
    binds = {(r.name, r.qualifier) for r in refs if r.kind == "binds"}
    assert {("IRepo", "_repo"), ("User", "u"), ("User", "other"), ("User", "each")} <= binds
    assert ("List", "users") in binds


def test_ruby_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """Calls with a receiver, parentheses or a block (a bare word may be a local variable:
    none); a class as a receiver; ``< Base`` and ``include``/``extend`` are bases;
    ``X.new`` gives a variable its class; ``require`` by path, ``require_relative`` from the
    file's folder."""
    refs = _refs(
        "lib/shop/cart.rb",
        'require_relative "helper"\nrequire "shop/base.rb"\n\nmodule Shop\n'
        "  class Cart < Base\n    include Pricing\n    extend Forwardable\n\n"
        "    def total\n      rate = 2\n      @items.sum { |i| tax(i.price) } + Helper.fee(self)\n"
        "    end\n\n    def self.build\n      cart = Cart.new\n      cart.check!\n"
        "      transaction { items.each { |i| i } }\n    end\n  end\nend\n",
        count_tokens,
    )
    assert {(r.name, r.module) for r in refs if r.kind == "import"} == {
        ("*", "./helper"),
        ("*", "shop/base"),
    }
    assert {r.name for r in refs if r.kind == "inherit"} == {"Base", "Pricing", "Forwardable"}
    assert _has(refs, "call", "tax", "") and _has(refs, "call", "fee", "Helper")
    assert _has(refs, "call", "check!", "cart") and _has(refs, "call", "each", "items")
    assert _has(refs, "call", "transaction", "")
    assert _has(refs, "type", "Helper") and not _has(refs, "call", "rate")
    assert {(r.name, r.qualifier) for r in refs if r.kind == "binds"} == {("Cart", "cart")}


def test_bash_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """Each command is a call by its name (a function of the code, or a program: resolved
    at query time); ``source`` and ``.`` paste a file's names in, by its path after the last
    variable; a path that is all variable names no file."""
    refs = _refs(
        "scripts/deploy.sh",
        '#!/bin/bash\nDIR="$(cd "$(dirname "$0")" && pwd)"\nsource "$DIR/lib/common.sh"\n'
        '. ./other.sh\nsource ${HELPERS}\n\ndeploy() {\n  log_info "deploying $1"\n'
        '  if check_ready; then\n    rsync -a . "$1"\n  fi\n'
        "  local out=$(build_assets --fast)\n}\n",
        count_tokens,
    )
    imports = {(r.name, r.module) for r in refs if r.kind == "import"}
    assert imports == {("*", "lib/common.sh"), ("*", "other.sh")}
    calls = {r.name for r in refs if r.kind == "call"}
    assert {"log_info", "check_ready", "build_assets", "rsync", "dirname"} <= calls
    assert "deploy" not in calls and "out" not in calls


def test_java_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """Class, static and wildcard imports; extends/implements; calls and ``new``."""
    refs = _refs(
        "src/main/java/org/apache/commons/lang3/StringUtils.java",
        "package org.apache.commons.lang3;\n\nimport java.util.List;\n"
        "import static org.apache.commons.lang3.Validate.notNull;\nimport java.util.function.*;\n\n"
        "public class StringUtils extends Base implements Comparable<StringUtils> {\n"
        "    public static String join(List<String> parts) {\n"
        "        notNull(parts);\n        StringBuilder b = new StringBuilder();\n"
        "        return ObjectUtils.toString(b.append(parts));\n    }\n}\n",
        count_tokens,
    )
    assert _has(refs, "import", "List", "List", "java.util")
    assert _has(refs, "import", "notNull", "notNull", "org.apache.commons.lang3.Validate")
    assert _has(refs, "import", "*", "", "java.util.function")
    assert _has(refs, "inherit", "Base") and _has(refs, "inherit", "Comparable")
    assert _has(refs, "call", "notNull", "") and _has(refs, "call", "StringBuilder")
    assert _has(refs, "call", "toString", "ObjectUtils") and _has(refs, "call", "append", "b")
    assert _has(refs, "type", "List")
    assert _has(refs, "binds", "StringBuilder", "b") and _has(refs, "binds", "List", "parts")
    assert _has(refs, "type", "ObjectUtils")  # a class named as a qualifier


C_SOURCE = """#include "util/list.h"
#include <stdio.h>

typedef struct node { int v; struct node *next; } node_t;

static int count(struct list *l, node_t n) {
    printf("%d", n.v);
    return list_len(l->head) + l->ops->size(l, visit);
}
"""


def test_c_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """``#include`` (quoted and angle) is an import of every name (``*``) from the path as
    written; calls, a call through a struct's field (its qualifier the expression), a
    struct and a typedef used as types, a function passed as a value; a typedef's and a
    struct's own names (``node_t``, ``node`` with its body) are not uses of them."""
    refs = _refs("src/count.c", C_SOURCE, count_tokens)
    assert _has(refs, "import", "*", "", "util/list.h") and _has(refs, "import", "*", "", "stdio.h")
    assert _has(refs, "call", "printf", "") and _has(refs, "call", "list_len", "")
    assert _has(refs, "call", "size", "l->ops")
    assert _has(refs, "type", "list") and _has(refs, "type", "node_t")
    assert _has(refs, "value", "visit")
    assert [r.line for r in refs if r.name == "node"] == [4]  # ``struct node *next``: a use
    assert not [r for r in refs if r.name == "node_t" and r.line == 4]


CPP_SOURCE = """#include "geo/shape.h"
#include <memory>

namespace geo {
template <typename T>
class Circle : public Shape, protected util::Comparable<Circle<T>> {
 public:
  double area() const { return this->scale() * r_->value(); }
 private:
  Radius* r_;
};

double total(const geo::Circle<int>& c, Square* p, at::Tensor t) {
  Square s;
  auto u = std::make_shared<Square>(2.0);
  auto v = Square(1.0);
  Square* w = new Square();
  std::unique_ptr<arrow::Buffer> b;
  draw(c); ns::inner::draw(c); c.area(); p->area(); obj.get<int>();
  return Square::Unit().area() + std::max<double>(s.area(), u->area()) + b->size();
}
}  // namespace geo
"""


def test_cpp_refs(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """Calls as C++ writes them: bare, through namespaces (qualifier and ``module`` the
    whole path), on an object or a pointer (qualifier the expression), a class's static
    function (the class a type use), templates, ``new``; types (qualified, in template
    arguments), base classes (qualified and template), includes; and the variables given a
    class by a declaration, a pointer, a reference, a field, a smart pointer, ``new``,
    ``make_shared`` and a constructor call, so ``c.area()`` and ``p->area()`` can resolve."""
    refs = _refs("src/geo/total.cc", CPP_SOURCE, count_tokens)
    assert _has(refs, "import", "*", "", "geo/shape.h") and _has(refs, "import", "*", "", "memory")
    assert _has(refs, "inherit", "Shape", "")
    assert _has(refs, "inherit", "Comparable", "util", "util")
    assert _has(refs, "call", "draw", "") and _has(refs, "call", "draw", "ns::inner", "ns::inner")
    assert _has(refs, "call", "area", "c") and _has(refs, "call", "area", "p")
    assert _has(refs, "call", "scale", "this") and _has(refs, "call", "value", "r_")
    assert _has(refs, "call", "Unit", "Square", "Square") and _has(refs, "type", "Square", "")
    assert _has(refs, "call", "max", "std", "std") and _has(refs, "call", "get", "obj")
    assert _has(refs, "call", "make_shared", "std") and _has(refs, "call", "Square", "")
    assert _has(refs, "type", "Tensor", "at", "at") and _has(refs, "type", "Radius")
    assert _has(refs, "type", "Circle", "geo", "geo") and _has(refs, "type", "Buffer", "arrow")
    binds = {(r.qualifier, r.name, r.module) for r in refs if r.kind == "binds"}
    assert binds >= {
        ("c", "Circle", "geo"),
        ("p", "Square", ""),
        ("t", "Tensor", "at"),
        ("s", "Square", ""),
        ("u", "Square", ""),
        ("v", "Square", ""),
        ("w", "Square", ""),
        ("b", "Buffer", "arrow"),
        ("r_", "Radius", ""),
    }, binds
    assert [r.line for r in refs if r.name == "T"] == [6]  # ``typename T`` declares it


def test_cpp_refs_of_a_real_header(count_tokens) -> None:  # type: ignore[no-untyped-def]
    """arrow/status.h as pyarrow installs it (real C++ nobody here wrote; its export macro
    blanked before parsing): its includes, its qualified template bases, a static call
    through its class (``Status::FromArgs``), a call of a member inside a method, a
    variable given its class; the class's own name in its head is not a use (the one in
    its base's template argument is)."""
    path = Path(pyarrow.get_include()) / "arrow" / "status.h"
    chunks = chunk("arrow/status.h", path.read_bytes(), count_tokens=count_tokens)
    assert {c.language for c in chunks} == {"cpp"}
    refs = [r for c in chunks for r in c.refs]
    assert _has(refs, "import", "*", "", "arrow/util/macros.h")
    assert _has(refs, "import", "*", "", "memory")
    assert _has(refs, "inherit", "EqualityComparable", "util", "util")
    assert _has(refs, "call", "FromArgs", "Status", "Status")
    assert _has(refs, "binds", "Status", "s")
    move = next(c for c in chunks if c.symbol == "arrow::Status::MoveFrom")
    assert _has(list(move.refs), "call", "DeleteState", "")
    head = next(c for c in chunks if c.symbol == "arrow::Status" and c.refs)
    on_146 = [r.kind for r in head.refs if r.name == "Status" and r.line == 146]
    assert on_146 == ["type"]  # ``EqualityComparable<Status>``; not the name it declares
    for c in chunks:
        for r in c.refs:
            assert c.start_byte <= r.byte < c.end_byte


@pytest.mark.parametrize("language", sorted(QUERIES))
def test_hostile_input_gives_refs_or_none_never_an_error(language: str, count_tokens) -> None:  # type: ignore[no-untyped-def]
    """Broken syntax, NUL bytes and a 10 kB name: the chunker still returns chunks; names
    over the length cap are dropped."""
    ext = {"python": "py", "javascript": "js", "typescript": "ts", "tsx": "tsx"}
    ext |= {"go": "go", "rust": "rs", "java": "java", "c": "c", "cpp": "cpp", "cuda": "cu"}
    ext |= {"perl": "pm", "bash": "sh", "php": "php", "cmake": "cmake", "csharp": "cs"}
    ext |= {"ruby": "rb"}
    long = "a" * 10_000
    text = f"import (((\n{long}(x)\n\x00 f(g(h(\n".encode()
    chunks = chunk(f"x.{ext[language]}", text, count_tokens=count_tokens)
    assert chunks
    assert all(len(r.name) <= 200 for c in chunks for r in c.refs)
