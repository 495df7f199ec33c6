"""The references table, written with each file's chunks, and the questions it answers.

Real git repositories, a real LanceDB index and the real model (through ``Indexer``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import Indexer, Repo

from codechunkd.config import Settings
from codechunkd.storage import schema as S
from codechunkd.storage.reader import Index
from codechunkd.storage.request import SearchRequest

EXE = str(Path(sys.executable).parent / "codechunkd")

PKG_INIT = "from .core import Engine\n"
CORE = '''"""The engine."""

from .util import clean as tidy


def helper(x):
    return tidy(x)


class Engine:
    def run(self, x):
        return self.step(helper(x))

    def step(self, x):
        return x
'''
UTIL = "def clean(x):\n    return x.strip()\n"
APP = """from pkg import Engine
from pkg.util import clean


def main():
    e = Engine()
    return e.run(clean(" a "))


def other(thing):
    return thing.step(1)
"""


def _repo(repo: Repo) -> None:
    repo.write("pkg/__init__.py", PKG_INIT)
    repo.write("pkg/core.py", CORE)
    repo.write("pkg/util.py", UTIL)
    repo.write("app.py", APP)
    repo.commit("A")


def index_of(repo: Repo, indexer: Indexer, settings: Settings, files: dict[str, str]) -> Index:
    """``files`` written and committed, the repository synced: its index."""
    for path, text in files.items():
        repo.write(path, text)
    repo.commit("files")
    indexer.sync(repo.path)
    return Index(indexer.store, settings)


def _callers(index: Index, symbol: str) -> set[tuple[str, str]]:
    return {(c.symbol, c.how) for c in index.callers(symbol)}


def test_references_resolve_exact_imported_and_by_name(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """Same file is ``exact``, through an import (aliased, relative, re-exported by a
    package ``__init__``) ``imported``, a method on a variable given the imported class
    ``imported``, a method on an unknown object ``by-name``; the chunk ids are ``chunks``
    rows."""
    _repo(repo)
    indexer.sync(repo.path)
    index = Index(indexer.store, settings)
    [clean] = index.definitions("clean")
    assert clean.path == "pkg/util.py" and clean.symbol == "clean"
    assert _callers(index, "clean") == {("helper", "imported"), ("main", "imported")}
    assert _callers(index, "helper") == {("Engine.run", "exact")}
    assert _callers(index, "Engine.step") == {("Engine.run", "exact"), ("other", "by-name")}
    assert _callers(index, "Engine") == {("main", "imported")}  # via pkg/__init__.py
    assert _callers(index, "Engine.run") == {("main", "imported")}  # e = Engine()
    for c in index.callers("clean"):
        row = index.get(c.chunk_id)
        assert row is not None and row.symbol == c.symbol
    callees = {(u.name, u.how) for u in index.callees("Engine.run")}
    assert callees == {("step", "exact"), ("helper", "exact")}
    imports = [u for u in index.references("clean") if u.kind == "import"]
    assert {(u.path, u.how) for u in imports} == {
        ("pkg/core.py", "imported"),
        ("app.py", "imported"),
    }


def test_a_search_with_context_lists_each_hits_callers(
    repo: Repo, indexer: Indexer, settings: Settings, index_dir: Path
) -> None:
    """``--context``: a hit lists the chunks that call what it defines (with their ids, as
    ``read_chunks`` takes them), in the reader API, ``search --json`` and its text."""
    _repo(repo)
    indexer.sync(repo.path)
    index = Index(indexer.store, settings)
    hits = index.run(SearchRequest(query="clean", k=5, mode="text", context=True))
    [clean] = [h for h in hits if h.symbol == "clean"]
    assert {(c["symbol"], c["how"]) for c in clean.callers} == {
        ("helper", "imported"),
        ("main", "imported"),
    }
    assert all(index.get(c["id"]) is not None for c in clean.callers)
    assert not index.run(SearchRequest(query="clean", k=5, mode="text"))[0].callers
    cli = [EXE, "search", "clean", "--mode", "text", "--index-dir", str(index_dir), "--context"]
    got = json.loads(subprocess.run([*cli, "--json"], capture_output=True, check=True).stdout)
    assert {c["symbol"] for h in got if h["symbol"] == "clean" for c in h["callers"]} == {
        "helper",
        "main",
    }
    text = subprocess.run(cli, capture_output=True, text=True, check=True).stdout
    assert "called by: " in text and "helper (pkg/core.py:" in text, text


def test_an_edit_replaces_a_files_references_and_a_delete_removes_them(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """References are replaced with their file's chunks: an added call appears in the
    same sync, a removed file's rows go (none left pointing at a missing chunk)."""
    _repo(repo)
    indexer.sync(repo.path)
    index = Index(indexer.store, settings)
    assert ("main", "imported") not in _callers(index, "helper")
    repo.write(
        "app.py",
        APP.replace("from pkg.util import clean", "from pkg.core import helper").replace(
            'clean(" a ")', 'helper(" a ")'
        ),
    )
    repo.commit("B")
    indexer.sync(repo.path)
    assert ("main", "imported") in _callers(index, "helper")
    assert ("main", "imported") not in _callers(index, "clean")
    repo.remove("pkg/util.py")
    repo.commit("C")
    indexer.sync(repo.path)
    assert index.definitions("clean") == []
    table = indexer.store.db.open_table(S.REFERENCES).to_arrow()
    assert "pkg/util.py" not in set(table.column("path").to_pylist())
    chunk_ids = {r["id"] for r in indexer.rows()}
    assert set(table.column("chunk_id").to_pylist()) <= chunk_ids


def test_a_branch_switch_and_back_changes_references_and_embeds_nothing_new(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """On a branch ``main`` calls ``helper``; back on the first branch it calls ``clean``
    again, and that switch back is served from the embedding cache (0 embedded)."""
    _repo(repo)
    first = repo.git("rev-parse", "--abbrev-ref", "HEAD").strip()
    indexer.sync(repo.path)
    index = Index(indexer.store, settings)
    assert ("main", "imported") in _callers(index, "clean")
    repo.git("checkout", "-q", "-b", "other")
    repo.write("app.py", "from pkg.core import helper\n\n\ndef main():\n    return helper(1)\n")
    repo.commit("on other")
    indexer.sync(repo.path)
    assert ("main", "imported") in _callers(index, "helper")
    assert ("main", "imported") not in _callers(index, "clean")
    repo.git("checkout", "-q", first)
    back = indexer.sync(repo.path)
    assert back.embedded == 0
    assert ("main", "imported") in _callers(index, "clean")
    assert ("main", "imported") not in _callers(index, "helper")
    table = indexer.store.db.open_table(S.REFERENCES).to_arrow()
    assert set(table.column("branch").to_pylist()) == {first}


def test_the_table_is_documented_in_the_schema(tmp_path: Path) -> None:
    """docs/schema.md has a ``references`` section (the column check is test_schema_doc)."""
    doc = (Path(__file__).parents[2] / "docs" / "schema.md").read_text()
    assert "## `references`" in doc


GO_WRITER = """package pkg

type Writer struct{}

func (w *Writer) Flush() error { return nil }

func (w *Writer) Write(p []byte) { w.Flush() }

func (w *Writer) Close() { w.inner.Flush() }
"""
GO_READER = """package pkg

type Reader struct{}

func (r *Reader) Flush() error { return nil }

func use(x *Reader) { x.Flush() }

func other(t thing) { t.Flush() }

func reset(w *Writer) { w.Reset() }
"""
GO_WRITER_RESET = "package pkg\n\nfunc (w *Writer) Reset() {}\n"
GO_OTHER_WRITER = "package other\n\ntype Writer struct{}\n\nfunc (w *Writer) Reset() {}\n"


def test_go_receivers_and_parameters_type_a_call_and_a_guess_names_only_what_it_can_mean(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """Two types with a ``Flush``: a call on the method's receiver (``w.Flush()`` in
    ``Writer.Write``) or on a typed parameter (``x *Reader``) is that type's, ``exact``; a
    call on a variable of unknown type (``t.Flush()``) or on a field (``w.inner.Flush()``) can
    mean either, so it is a caller of neither ``Writer.Flush`` nor ``Reader.Flush``, only of
    ``Flush`` (``by-name``). A method written in another file of its type's package is
    found (``Writer.Reset``), never another package's type of the same name."""
    repo.write("pkg/w.go", GO_WRITER)
    repo.write("pkg/r.go", GO_READER)
    repo.write("pkg/w_reset.go", GO_WRITER_RESET)
    repo.write("other/w.go", GO_OTHER_WRITER)
    repo.commit("go")
    indexer.sync(repo.path)
    index = Index(indexer.store, settings)
    assert _callers(index, "Writer.Flush") == {("Writer.Write", "exact")}
    assert _callers(index, "Reader.Flush") == {("use", "exact")}
    assert {("other", "by-name"), ("Writer.Close", "by-name")} <= _callers(index, "Flush")
    resets = {(u.path, u.how, u.target.path) for u in index.references("Reset") if u.target}
    assert resets == {("pkg/r.go", "imported", "pkg/w_reset.go")}, resets
    assert {d.path for d in index.definitions("Writer.Reset")} == {"pkg/w_reset.go", "other/w.go"}


GO_HTTP = """package http

type Handler interface{}

type ServeMux struct{}

func NewServeMux() *ServeMux { return &ServeMux{} }

func (mux *ServeMux) Handle(pattern string, h Handler) {}

type Server struct{}

func (s *Server) Close() error { return nil }
"""
GO_HTTPTEST = """package httptest

import "net/http"

type Server struct{}

func NewServer(h http.Handler) *Server { return &Server{} }

func (s *Server) Close() {}
"""
GO_HTTP_TEST = """package http_test

import "net/http/httptest"

func TestServe() {
\tts := httptest.NewServer(nil)
\tts.Close()
}
"""
GO_OTHER_MUX = "package other\n\ntype ServeMux struct{}\n\nfunc (m *ServeMux) Handle(p string) {}\n"
GO_APP = """package main

import (
\t"net/http"
\tweb "net/http"
)

func routes() {
\tmux := http.NewServeMux()
\tmux.Handle("/a", nil)
}

func literal() {
\tmux := &http.ServeMux{}
\tmux.Handle("/b", nil)
}

func declared(m *http.ServeMux) {
\tvar v web.ServeMux
\tv.Handle("/c", nil)
\tm.Handle("/d", nil)
}
"""


def test_go_variables_of_an_imported_packages_type_call_its_methods(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """Two ``ServeMux.Handle`` (``net/http``'s and ``other``'s): a ``Handle`` call on a
    variable made by ``http.NewServeMux()``, ``&http.ServeMux{}``, declared ``var v
    web.ServeMux`` (an alias) or a parameter ``m *http.ServeMux`` is ``net/http``'s,
    ``imported``; and ``ts := httptest.NewServer(…)`` in a test of ``net/http``'s folder
    calls ``httptest``'s ``Server.Close``, not its own package's ``Server.Close``."""
    files = {
        "net/http/server.go": GO_HTTP,
        "net/http/httptest/server.go": GO_HTTPTEST,
        "net/http/serve_test.go": GO_HTTP_TEST,
        "other/mux.go": GO_OTHER_MUX,
        "myapp/main.go": GO_APP,
    }
    index = index_of(repo, indexer, settings, files)
    handles = {
        (u.chunk_symbol, u.line, u.how, u.target.path)
        for u in index.references("ServeMux.Handle")
        if u.target and u.kind == "call"
    }
    assert handles == {
        ("routes", 10, "imported", "net/http/server.go"),
        ("literal", 15, "imported", "net/http/server.go"),
        ("declared", 20, "imported", "net/http/server.go"),
        ("declared", 21, "imported", "net/http/server.go"),
    }, handles
    closes = {(u.path, u.target.path) for u in index.references("Close") if u.target}
    assert closes == {("net/http/serve_test.go", "net/http/httptest/server.go")}, closes


RS_LIB = """pub mod ast;
pub mod parse;
pub mod util;
pub use crate::ast::{Primitive, Span};

pub fn is_meta(c: char) -> bool {
    c == '.'
}
"""
RS_AST = """pub struct Span {
    pub start: usize,
}

impl Span {
    pub fn new(start: usize) -> Span {
        Span { start }
    }
}

pub struct Primitive {
    span: Span,
}

impl Primitive {
    pub fn span(&self) -> &Span {
        &self.span
    }
}

pub enum Kind {
    Bell,
    Tab,
}
"""
RS_UTIL = """use crate::{Primitive, Span};

pub fn origin() -> Span {
    Span::new(0)
}

pub fn first(p: &Primitive) -> &Span {
    p.span()
}
"""
RS_PARSE = """use crate::ast::{self, Span};
use crate::is_meta;

pub struct ParserI<'s> {
    pos: usize,
    pattern: &'s str,
}

impl<'s> ParserI<'s> {
    pub fn span(&self) -> Span {
        Span::new(self.pos)
    }

    pub fn parse(&self) -> ast::Kind {
        let s = self.span();
        assert!(is_meta('.'), "at {}", s.start);
        ast::Kind::Bell
    }
}

#[cfg(test)]
mod tests {
    use super::ParserI;

    fn parser() -> ParserI<'static> {
        ParserI { pos: 0, pattern: "" }
    }

    #[test]
    fn starts_at_zero() {
        assert_eq!(parser().span().start, 0);
    }
}
"""


def test_rust_methods_resolve_by_their_impl_and_paths_by_the_crates_modules(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """Two types with a ``span``: ``self.span()`` in ``impl ParserI`` is ``ParserI``'s, never
    ``Primitive``'s; ``Span::new`` of a type imported with ``use crate::ast::{self, Span}``,
    ``ast::Kind`` through the ``{self}``, ``crate::is_meta`` from ``lib.rs`` and
    ``super::ParserI`` resolve through the crate's modules, and ``Span::new`` of a type
    re-exported by ``lib.rs`` (``pub use``) too; ``p.span()`` with ``p: &Primitive`` is
    ``Primitive``'s; calls written inside macros
    (``assert!(is_meta(…))``, ``assert_eq!(parser()…)``) count; a method is asked for as
    ``ParserI::span`` or ``ParserI.span``."""
    repo.write("Cargo.toml", '[package]\nname = "p"\nversion = "0.1.0"\n')
    repo.write("src/lib.rs", RS_LIB)
    repo.write("src/ast/mod.rs", RS_AST)
    repo.write("src/parse.rs", RS_PARSE)
    repo.write("src/util.rs", RS_UTIL)
    repo.commit("rust")
    indexer.sync(repo.path)
    index = Index(indexer.store, settings)
    assert _callers(index, "ParserI::span") == {("impl ParserI<'s>::parse", "exact")}
    assert _callers(index, "ParserI.span") == _callers(index, "ParserI::span")
    assert _callers(index, "Primitive::span") == {("first", "imported")}  # ``p: &Primitive``
    news = _callers(index, "Span::new")
    assert {("impl ParserI<'s>::span", "imported"), ("origin", "imported")} <= news, news
    assert _callers(index, "is_meta") == {("impl ParserI<'s>::parse", "imported")}
    assert _callers(index, "tests::parser") == {("tests::starts_at_zero", "exact")}
    kinds = {(u.chunk_symbol, u.how) for u in index.references("Kind")}
    assert ("impl ParserI<'s>::parse", "imported") in kinds, kinds
    users = {(u.chunk_symbol, u.how) for u in index.references("ParserI")}
    assert ("tests::parser", "exact") in users, users


JAVA_COUNTER = """package q;

public class Counter {
    public int get() {
        return 0;
    }
}
"""
JAVA_DEQUE = """package p;

import q.Counter;

public class Deque<E> {
    private final Counter count = new Counter();

    Node<E> succ(Node<E> p) {
        return p.next;
    }

    int size() {
        int n = 0;
        for (Node<E> q = null; q != null; q = succ(q)) n++;
        return n + this.count.get();
    }

    class Itr {
        Node<E> succ(Node<E> p) {
            return p;
        }

        Node<E> next(Node<E> p) {
            return succ(p);
        }
    }

    class Splitter {
        Node<E> advance(Node<E> p) {
            return succ(p);
        }
    }
}
"""
JAVA_FUTURE = """package p;

public interface Future<V> {
    enum State { RUNNING, DONE }

    default State state() {
        return State.RUNNING;
    }

    default boolean alive(Thread.State s) {
        return s != null;
    }
}
"""


def test_java_bare_calls_fields_and_class_qualifiers_resolve_as_javac_does(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """Two ``succ``: a bare ``succ(p)`` means the nearest enclosing class's (``Itr.next``
    calls ``Itr.succ``; ``Deque.size`` and ``Splitter.advance``, whose class has none, call
    ``Deque.succ``); ``this.count.get()`` on a field typed ``Counter`` (imported from another
    package: ``import q.Counter`` names the class in the package's folder) is ``Counter.get``;
    ``State.RUNNING`` is a use of ``Future.State`` and ``Thread.State`` (another class's
    ``State``) is not."""
    repo.write("src/q/Counter.java", JAVA_COUNTER)
    repo.write("src/p/Deque.java", JAVA_DEQUE)
    repo.write("src/p/Future.java", JAVA_FUTURE)
    repo.commit("java")
    indexer.sync(repo.path)
    index = Index(indexer.store, settings)
    assert _callers(index, "Deque.succ") == {
        ("Deque.size", "exact"),
        ("Deque.Splitter.advance", "exact"),
    }
    assert _callers(index, "Deque.Itr.succ") == {("Deque.Itr.next", "exact")}
    assert ("Deque.size", "imported") in _callers(index, "Counter.get")
    uses = {(u.chunk_symbol, u.line) for u in index.references("Future.State")}
    assert ("Future.state", 7) in uses, uses
    assert all(line != 10 for _, line in uses), uses


TS_VALUE = """export class ComputedValue {
    get(): number {
        return 1
    }
}

export function isComputed(x: unknown): boolean {
    return x instanceof ComputedValue
}
"""
TS_GET = "export function get(key: string): string {\n    return key\n}\n"
TS_INTERNAL = 'export * from "./core/computedvalue"\nexport * from "./api/get"\n'
TS_INDEX = 'export { isComputed, get } from "./internal"\nexport * as internals from "./internal"\n'
TS_USER = """import { ComputedValue, isComputed, get } from "../internal"

export function use(c: ComputedValue): number {
    return isComputed(c) ? c.get() + get("k").length : 0
}
"""


def test_ts_names_pass_through_export_star_barrels(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``import {…} from "../internal"`` where ``internal.ts`` is ``export * from`` lines:
    the names resolve through the barrel (a function, a class and, on a typed parameter, its
    method); ``export {a} from`` is a use of ``a``; a barrel passes on what a module exports,
    never a class's member of the same name (``get`` the function, not ``ComputedValue.get``)."""
    files = {
        "src/core/computedvalue.ts": TS_VALUE,
        "src/api/get.ts": TS_GET,
        "src/internal.ts": TS_INTERNAL,
        "src/index.ts": TS_INDEX,
        "src/app/use.ts": TS_USER,
    }
    index = index_of(repo, indexer, settings, files)
    assert _callers(index, "isComputed") == {("use", "imported")}
    assert _callers(index, "ComputedValue.get") == {("use", "imported")}  # c: ComputedValue
    gets = {(u.path, u.kind, u.target.path) for u in index.references("get") if u.target}
    assert ("src/app/use.ts", "call", "src/api/get.ts") in gets, gets
    assert ("src/index.ts", "import", "src/api/get.ts") in gets, gets
    assert not any(t == "src/core/computedvalue.ts" for _, k, t in gets if k == "import"), gets


def test_a_guess_by_name_names_only_what_the_callers_language_can_call(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """Three ``size`` methods, in Python, C++ and TypeScript: ``thing.size()`` on an object
    of unknown type guesses, by name, the Python one from Python and the TypeScript one
    from JavaScript (which can import it); the C++ one, which neither can call, is nobody's
    guess. Before, each call was a caller of all three (a Python binding's repository,
    PyTorch's, ranked C++ headers first in its map from Python's calls)."""
    files = {
        "pkg/stack.py": "class Stack:\n    def size(self):\n        return 0\n",
        "native/buffer.hpp": "class Buffer {\n public:\n  int size() const { return 0; }\n};\n",
        "web/queue.ts": "export class Queue {\n  size(): number {\n    return 0;\n  }\n}\n",
        "app.py": "def count(thing):\n    return thing.size()\n",
        "web/app.js": "function count(q) {\n  return q.size();\n}\n",
    }
    index = index_of(repo, indexer, settings, files)
    assert {d.path for d in index.definitions("size")} == {
        "pkg/stack.py",
        "native/buffer.hpp",
        "web/queue.ts",
    }

    def callers(symbol: str) -> set[tuple[str, str]]:
        return {(c.path, c.how) for c in index.callers(symbol)}

    assert callers("Stack.size") == {("app.py", "by-name")}
    assert callers("Queue.size") == {("web/app.js", "by-name")}
    assert callers("Buffer.size") == set()


def test_a_member_asked_through_a_subclass_is_the_one_it_inherits(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``Child.fetch`` is not defined, ``Base.fetch`` is and ``Child`` inherits it (two
    levels down too): definitions, references and callers of ``Child.fetch`` answer with
    the base's, in Python and in C++ (``SmallVectorImpl::push_back``, which LLVM defines
    in a base class); a name no class has stays unanswered."""
    index = index_of(
        repo,
        indexer,
        settings,
        {
            "net/base.py": "class Base:\n    def fetch(self, url):\n        return url\n",
            "net/child.py": "from net.base import Base\n\n\nclass Child(Base):\n    pass\n\n\n"
            "class Grandchild(Child):\n    pass\n",
            "app.py": "from net.child import Child\n\n\ndef main():\n    c = Child()\n"
            "    return c.fetch('x')\n",
            "vec.h": "namespace llvm {\ntemplate <class T> class VecBase {\npublic:\n"
            "  void push_back(const T &x) { grow(); }\n};\n"
            "template <class T> class VecImpl : public VecBase<T> {\n};\n}\n",
        },
    )
    for name in ("Child.fetch", "Grandchild.fetch"):
        assert [(d.path, d.symbol) for d in index.definitions(name)] == [
            ("net/base.py", "Base.fetch")
        ], name
    assert _callers(index, "Child.fetch") == {("main", "imported")}
    assert [d.symbol for d in index.definitions("VecImpl::push_back")] == [
        "llvm::VecBase::push_back"
    ]
    assert index.definitions("Child.missing") == []
    assert index.definitions("Nobody.fetch") == []


def test_bases_resolve_in_the_order_written_and_a_module_variable_types_its_calls(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``self.ping()`` in a class of eight bases that each define ``ping`` means theirs in
    the order the class names them, whatever the process's hash seed (the bases were a set:
    the order, and so the target ``refs`` showed, changed from run to run); a call on a
    module-level variable (``root = Logger()``) inside a function is its class's method,
    ``exact``, where it was a guess by name."""
    bases = [f"Mixin{k}" for k in range(8)]
    source = "".join(
        f"class {b}:\n    def ping(self):\n        return {k}\n\n\n" for k, b in enumerate(bases)
    )
    source += f"class Many({', '.join(bases)}):\n    def run(self):\n        return self.ping()\n"
    source += "\n\nclass Logger:\n    def warn(self, m):\n        return m\n\n\nroot = Logger()\n"
    source += "\n\ndef warn(m):\n    return root.warn(m)\n"
    index = index_of(repo, indexer, settings, {"mixins.py": source})
    graph = index.refs.graph()
    [use] = graph.uses_by_name["ping"]
    rows, how = graph.resolve(use)
    assert how == "exact"
    assert [graph.definition(j).symbol for j in rows] == [f"{b}.ping" for b in bases]
    assert _callers(index, "Logger.warn") == {("warn", "exact")}
