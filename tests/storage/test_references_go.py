"""Go's predeclared names on a real index: ``len(b)``, ``string(b)`` and a ``string`` type
are Go's own, never a method of the package that happens to share the name.

Real git repositories, a real LanceDB index and the real model (through ``Indexer``).
"""

from __future__ import annotations

from tests.conftest import Indexer, Repo
from tests.storage.test_references import index_of

from codechunkd.config import Settings

BUF = """package buf

type buffer struct {
\tb    []byte
\tname string
}

func (b *buffer) len() int { return len(b.b) }

func (b *buffer) string() string { return string(b.b) }

func Size(x *buffer) int { return x.len() }
"""
COUNT = """package buf

func count(s string) int { return len(s) }

func text(x *buffer) string { return x.string() }
"""


def test_a_predeclared_name_is_never_a_method_of_the_same_name(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``buffer.len`` and ``buffer.string`` are used where they are called on a
    ``buffer`` (``x.len()``, ``x.string()``), not by the ``len(b.b)`` and ``string(b.b)``
    inside them (they were ``exact``: a method of an unexported type calling itself), nor
    by a field or a result of type ``string`` (``exact`` too), nor by ``len(s)`` in another
    file (a guess by name).
    Those uses resolve to nothing: Go declares them."""
    index = index_of(repo, indexer, settings, {"buf/buf.go": BUF, "buf/count.go": COUNT})
    uses = {(u.path, u.line, u.how) for u in index.references("buffer.len")}
    assert uses == {("buf/buf.go", 12, "exact")}, uses
    uses = {(u.path, u.line, u.how) for u in index.references("buffer.string")}
    assert uses == {("buf/count.go", 5, "imported")}, uses
    graph = index.refs.graph()
    for name in ("len", "string"):
        found = [graph.resolve(i) for i in graph.uses_by_name[name]]
        assert all(how != "by-name" for _, how in found), (name, found)


SERVER = """package srv

import "errors"

type Handler interface {
\tServe(r string) error
}

type Server struct {
\tAddr    string
\tHandler Handler
}

type Mux struct{}

func (m *Mux) Handler(r string) Handler { return nil }

func (s *Server) Listen() string { return s.Addr }

var ErrClosed = errors.New("closed")

func (s *Server) Close() error { return ErrClosed }

func index() int { return 0 }

type Router struct {
\tmux *Mux
}

func (r *Router) Route() Handler { return r.mux.Handler("x") }

type App struct {
\trouter *Router
}

func (a *App) Route() Handler { return a.router.mux.Handler("y") }
"""
MAIN = """package main

import "example.com/app/srv"

func run(s *srv.Server, h srv.Handler) string {
\ts.Handler = h
\treturn s.Addr
}

func count() int {
\tindex := 2
\treturn index
}
"""


def test_a_struct_field_is_defined_and_read(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``Server.Addr`` is a definition at its field's line, and each read of it (``s.Addr``
    in a method, through the receiver; in another package, through the parameter's
    type) is a use (Go recorded neither); ``srv.Handler``, the package's interface, is
    not the method ``Mux.Handler`` nor the field ``Server.Handler`` of the same name; a
    sentinel returned (``return ErrClosed``) is a use of it; a local ``index`` in package
    ``main`` is not package ``srv``'s function ``index`` (it was, by name); a call through a
    field (``r.mux.Handler("x")``, ``a.router.mux.Handler("y")``) is a method of the
    field's type (it was a guess)."""
    files = {"go.mod": "module example.com/app\n", "srv/srv.go": SERVER, "main.go": MAIN}
    index = index_of(repo, indexer, settings, files)
    assert [(d.path, d.line) for d in index.definitions("Server.Addr")] == [("srv/srv.go", 10)]
    uses = {(u.path, u.line, u.how) for u in index.references("Server.Addr")}
    assert uses == {("srv/srv.go", 18, "exact"), ("main.go", 7, "imported")}, uses
    uses = {(u.path, u.line) for u in index.references("Server.Handler")}
    assert uses == {("main.go", 6)}, uses
    graph = index.refs.graph()
    typed = [
        sorted(graph._sym[j] for j in graph.resolve(i)[0])
        for i in graph.uses_by_name["Handler"]
        if graph._path[i] == "main.go" and graph._kind[i] == "type"
    ]
    assert typed == [["Handler"]], typed
    uses = {(u.path, u.line, u.how) for u in index.references("ErrClosed")}
    assert uses == {("srv/srv.go", 22, "exact")}, uses  # ``return ErrClosed``
    bare = [graph.resolve(i) for i in graph.uses_by_name["index"] if graph._path[i] == "main.go"]
    assert bare == [([], "")], bare  # a local: Go names nothing bare beyond its package
    uses = {(u.path, u.line, u.how) for u in index.references("Mux.Handler")}
    assert uses == {("srv/srv.go", 30, "exact"), ("srv/srv.go", 36, "exact")}, uses
    # through the field's type (``mux *Mux``), and down a chain of fields (``a.router.mux``)


COMMON = """package tmpl

import "sync"

type common struct {
\tmu    sync.Mutex
\tfuncs map[string]any
}

func (c *common) lookup(name string) any { return c.funcs[name] }

type Template struct {
\t*common
\tname string
}

type Locker interface {
\tLock()
}

type LockCloser interface {
\tLocker
\tClose() error
}

func (t *Template) Funcs() map[string]any { return t.funcs }

func (t *Template) Find(name string) any { return t.lookup(name) }

func shut(l LockCloser) { l.Lock() }
"""


def test_an_embedded_type_promotes_its_fields_and_methods(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``type Template struct { *common }``: ``t.funcs`` and ``t.lookup()`` on a
    ``*Template`` are ``common``'s field and method (Go promotes them); ``LockCloser``'s
    embedded ``Locker`` is a base too. Each was nobody's (an embedded type was a type use,
    no base), as ``text/template``'s ``t.tmpl`` and ``crypto/tls``'s ``c.out.Unlock()``
    were."""
    index = index_of(repo, indexer, settings, {"tmpl/tmpl.go": COMMON})
    for symbol, line in (("common.funcs", 26), ("common.lookup", 28)):
        uses = {(u.line, u.how) for u in index.references(symbol) if u.path == "tmpl/tmpl.go"}
        assert (line, "exact") in uses, (symbol, uses)
    for base, line in (("common", 13), ("Locker", 22)):  # each an embedded type: a base
        bases = {u.line for u in index.references(base) if u.kind == "inherit"}
        assert bases == {line}, (base, bases)


WRITER = """package web

type Header map[string][]string

func (h Header) Set(key, value string) { h[key] = []string{value} }

type ResponseWriter interface {
\tHeader() Header
\tWrite(b []byte) (int, error)
}

type Flusher interface {
\tFlush()
}

type FlushWriter interface {
\tResponseWriter
\tFlusher
}

type buffer struct{ b []byte }

func (x *buffer) Write(b []byte) (int, error) { return len(b), nil }

func serve(w FlushWriter) {
\th := w.Header()
\th.Set("a", "b")
\tw.Write(nil)
\tw.Flush()
}
"""


def test_an_interfaces_methods_are_defined_and_called_through_it(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """An interface's methods are definitions (``ResponseWriter.Write``): ``w.Write()`` on
    a variable of the interface (through an embedded one) is that method, not a guess
    among every ``Write`` (``buffer.Write``), and the method's result types what it gives
    (``h := w.Header()``: ``h.Set`` is ``Header.Set``). On eight packages of Go's library
    1,137 such calls were guesses by name."""
    index = index_of(repo, indexer, settings, {"web/web.go": WRITER})
    for symbol, line in (
        ("ResponseWriter.Write", 28),
        ("Flusher.Flush", 29),
        ("ResponseWriter.Header", 26),
        ("Header.Set", 27),
    ):
        uses = {(u.line, u.how) for u in index.references(symbol) if u.kind == "call"}
        assert uses == {(line, "exact")}, (symbol, uses)
    assert not [u for u in index.references("buffer.Write") if u.line == 28]
