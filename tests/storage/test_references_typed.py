"""Python, TypeScript and JavaScript: what a member is used on, typed as the code says it, on a
real index.

Real git repositories, a real LanceDB index and the real model (through ``Indexer``). Each
question is asked twice: of the graph a question reads (the skeleton and the rows about
the name, ``callers``/``references``) and of the whole graph a daemon keeps, which must
agree.
"""

from __future__ import annotations

from tests.conftest import Indexer, Repo
from tests.storage.test_references import index_of

from codechunkd.config import Settings
from codechunkd.storage.reader import Index

MODELS = '''"""Sessions and their connections."""

from typing import Optional

import kinds


class Connection:
    def send(self, data):
        return data


class Session:
    def __init__(self, conn: Connection | None = None, kind: kinds.Kind[int] = None):
        self.conn = conn
        self.kind: kinds.Kind[int] = kind
        self.cache = Cache()

    def request(self, data):
        self.kind.check(data)
        self.cache.keep(data)
        return self.conn.send(data)


class Cache:
    def keep(self, data):
        return data


def open_session() -> "Session":
    return Session()


def current() -> Optional[Session]:
    return None
'''
KINDS = "class Kind:\n    def check(self, data):\n        return data\n"
APP = """from models import Connection, open_session, current


def fetch(data):
    with open_session() as s:
        return s.request(data)


def again(data):
    s = current()
    s.request(data)
    return current().request(data)


def direct(data):
    return Connection().send(data)


def plain(data):
    send = Connection.send
    return send(Connection(), data)
"""
CLIENT = """import models


def through(data, conn):
    with models.Session() as s:
        s = conn.session()
        return s.request(data)
"""
POOL = """class Conn:
    def close(self):
        return 1


class Pool:
    def get(self) -> Conn:
        return Conn()

    def drain(self):
        c = self.get()
        return c.close()
"""
CALLBACKS = """def helper(x):
    return x


TABLE = {"h": helper}
PAIR = (helper, None)


def run(key=helper):
    return [helper, key]


def shadowed():
    helper = make()
    return helper()


helper = staticmethod(helper)
ALSO = [helper]


def make():
    return len
"""


def _index(repo: Repo, indexer: Indexer, settings: Settings) -> Index:
    return index_of(
        repo,
        indexer,
        settings,
        {
            "models.py": MODELS,
            "kinds.py": KINDS,
            "app.py": APP,
            "client.py": CLIENT,
            "pool.py": POOL,
            "callbacks.py": CALLBACKS,
        },
    )


def _uses(index: Index, symbol: str) -> set[tuple[str, int, str]]:
    return {(u.path, u.line, u.how) for u in index.refs.references(symbol)}


def _whole(index: Index, symbol: str) -> set[tuple[str, int, str]]:
    graph = index.refs.graph()
    return {(u.path, u.line, u.how) for u in graph.uses_of(graph.definitions(symbol))}


def test_a_member_is_its_classs_through_calls_annotations_and_self(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``open_session() -> "Session"`` types ``with open_session() as s`` and
    ``current() -> Optional[Session]`` types ``s = current()`` and ``current().request``,
    in another file; ``Connection().send`` is ``Connection``'s, and so is
    ``Connection.send`` named through the class; ``self.conn = conn`` (a parameter of
    ``Connection | None``), ``self.kind: kinds.Kind[int]`` (through a module) and
    ``self.cache = Cache()`` in ``__init__`` type those attributes in every method;
    ``with models.Session() as s`` is a ``Session`` through the module (``s =
    conn.session()``, a variable's method's result, says nothing); ``c = self.get()`` is
    what ``Pool.get`` says it gives. Each was a guess by name among every ``request``,
    ``send``, ``check`` and ``keep``, or (``close``) a guess."""
    index = _index(repo, indexer, settings)
    request = {
        ("app.py", 6, "imported"),
        ("app.py", 11, "imported"),
        ("app.py", 12, "imported"),
        ("client.py", 7, "imported"),
    }
    send = {
        ("app.py", 16, "imported"),
        ("app.py", 20, "imported"),
        ("models.py", 22, "exact"),
    }
    for ask in (_uses, _whole):
        assert ask(index, "Session.request") == request, ask
        assert ask(index, "Connection.send") == send, ask
        assert ask(index, "Kind.check") == {("models.py", 20, "imported")}, ask
        assert ask(index, "Cache.keep") == {("models.py", 21, "exact")}, ask
        assert ask(index, "Conn.close") == {("pool.py", 12, "exact")}, ask
    assert {(c.symbol, c.how) for c in index.callers("Session.request")} == {
        ("fetch", "imported"),
        ("again", "imported"),
        ("through", "imported"),
    }


def test_a_function_passed_as_a_value_is_used_and_a_variable_hides_it(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """A function named in a dictionary, a tuple, a list or as a parameter's default is a
    use of it (a callback ``refs`` shows); a variable of the same name in a function
    (``helper = make()``) is that variable, not the function, there; in module code a
    name rebound (``helper = staticmethod(helper)``) is still the function."""
    index = _index(repo, indexer, settings)
    expected = {
        ("callbacks.py", 5, "exact"),
        ("callbacks.py", 6, "exact"),
        ("callbacks.py", 9, "exact"),
        ("callbacks.py", 10, "exact"),
        ("callbacks.py", 18, "exact"),
        ("callbacks.py", 19, "exact"),
    }
    assert _uses(index, "helper") == expected
    assert _whole(index, "helper") == expected
    assert {c.symbol for c in index.callers("helper")} == set()


def test_a_function_nested_beside_the_caller_is_the_one_it_calls(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``do_it`` called in ``define.wrap``, a function nested in ``define`` beside it (each
    long enough to be chunks of their own), is ``define.do_it``, not the module's
    ``do_it``: Python looks a bare name up in the enclosing functions first. A method's
    bare name is never its class's member."""
    body = "".join(f"        v{k} = z + {k}\n" for k in range(400))
    source = (
        "def define(x):\n    def do_it(y):\n        return y\n\n    def wrap(z):\n"
        f"{body}        return do_it(z)\n\n    return wrap\n\n\ndef do_it(y):\n    return y\n\n\n"
        "class Box:\n    def do_it(self):\n        return 1\n\n    def run(self):\n"
        "        return do_it(2)\n"
    )
    index = index_of(repo, indexer, settings, {"nested.py": source})
    assert {(c.symbol, c.how) for c in index.callers("define.do_it")} == {("define.wrap", "exact")}
    graph = index.refs.graph()
    meant = {}
    for i in graph.uses_by_name["do_it"]:
        rows, how = graph.resolve(i)
        meant[graph._csym[i]] = ([graph.definition(j).symbol for j in rows], how)
    assert meant == {"define.wrap": (["define.do_it"], "exact"), "Box.run": (["do_it"], "exact")}


def test_a_generic_base_is_a_base_and_a_method_never_calls_itself_bare(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``class Spooled(AsyncFile[str])`` inherits ``AsyncFile``'s methods (``super().write``
    is ``AsyncFile.write``); ``group()`` called bare inside the method ``Group.group`` is
    the function it imports, not the method (a method is no bare name; it was taken for
    a recursion)."""
    index = index_of(
        repo,
        indexer,
        settings,
        {
            "files.py": "from typing import Generic, TypeVar\n\nT = TypeVar('T')\n\n\n"
            "class AsyncFile(Generic[T]):\n    def write(self, b):\n        return b\n\n\n"
            "class Spooled(AsyncFile[str]):\n    def write(self, b):\n"
            "        return super().write(b)\n",
            "helpers.py": "def group():\n    return 1\n",
            "groups.py": "class Group:\n    def group(self):\n        from helpers import group\n\n"
            "        return group()\n",
        },
    )
    assert {(c.symbol, c.how) for c in index.callers("AsyncFile.write")} == {
        ("Spooled.write", "exact")
    }
    graph = index.refs.graph()
    [call] = [i for i in graph.uses_by_name["group"] if graph._kind[i] == "call"]
    rows, how = graph.resolve(call)
    assert ([graph.definition(j).path for j in rows], how) == (["helpers.py"], "imported")


SESSION_TS = """export class Connection {
  send(d: string) {
    return d;
  }
}

export class Session {
  private conn: Connection;

  constructor(private readonly cache: Cache) {
    this.conn = new Connection();
  }

  request(d: string) {
    this.cache.keep(d);
    return this.conn.send(d);
  }

  itself(): Session {
    return this;
  }

  again(d: string) {
    const s = this.itself();
    return s.request(d);
  }
}

export class Cache {
  keep(d: string) {
    return d;
  }
}

export function open(): Session {
  return new Session(new Cache());
}

export const current = (): Session => open();
"""
APP_TS = """import { open, current } from './session';

export function fetch(d: string) {
  const s = open();
  return s.request(d);
}

export function later(d: string) {
  return current().request(d);
}
"""


def test_typescript_fields_parameter_properties_and_return_types_type_a_member(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """TypeScript: a field's declared class (``private conn: Connection``), a constructor's
    parameter property (``private readonly cache: Cache``), and a function's, a method's
    or an arrow function's return type (``open(): Session``, ``this.itself()``,
    ``current().request()``) type the member used on them; each was a guess by name."""
    index = index_of(repo, indexer, settings, {"session.ts": SESSION_TS, "app.ts": APP_TS})
    for ask in (_uses, _whole):
        assert ask(index, "Session.request") == {
            ("session.ts", 25, "exact"),
            ("app.ts", 5, "imported"),
            ("app.ts", 9, "imported"),
        }, ask
        assert ask(index, "Connection.send") == {("session.ts", 16, "exact")}, ask
        assert ask(index, "Cache.keep") == {("session.ts", 15, "exact")}, ask


STORE_JS = """class Cache {
  get (key) {
    return key
  }
}

class Registry {
  get (name) {
    return name
  }
}

class Store {
  constructor () {
    this.cache = new Cache()
  }

  find (key) {
    return this.cache.get(key)
  }
}

module.exports = { Cache, Registry, Store }
"""
MAIN_JS = """const { Store } = require('./store.js')

function main (key) {
  const store = new Store()
  return store.find(key)
}

module.exports = { main }
"""


def test_javascript_new_types_a_variable_and_a_field_set_in_a_method(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """JavaScript: ``const store = new Store()`` types ``store.find()`` (TypeScript did),
    and ``this.cache = new Cache()`` in the constructor types ``this.cache.get()`` in
    another method: ``Cache.get``, not also ``Registry.get``. Before, the first was
    nobody's (``find`` a guess left to the form) and the second a guess between both."""
    index = index_of(repo, indexer, settings, {"store.js": STORE_JS, "main.js": MAIN_JS})
    for ask in (_uses, _whole):
        assert ask(index, "Store.find") == {("main.js", 5, "imported")}, ask
        assert ask(index, "Cache.get") == {("store.js", 19, "exact")}, ask
        assert ask(index, "Registry.get") == set(), ask


def test_an_attribute_read_is_a_guessed_use_only_on_a_receiver_named_for_the_class(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """A member read but not called on a variable of unknown class (``r.request``, as often
    a field as a method) is no guessed use of the one method of that name; read on a
    receiver named for the class (``session.request``), or called (``x.request()``), it
    still is."""
    index = index_of(
        repo,
        indexer,
        settings,
        {
            "net.py": "class Session:\n    def request(self, d):\n        return d\n",
            "use.py": "def handle(r, session, x):\n    a = r.request\n    b = session.request\n"
            "    return x.request(a, b)\n",
        },
    )
    assert {(u.line, u.kind, u.how) for u in index.refs.references("Session.request")} == {
        (3, "value", "by-name"),
        (4, "call", "by-name"),
    }


GO_TPL = """package tpl

type Template struct{}

func New(name string) *Template {
\treturn &Template{}
}

func (t *Template) Parse(s string) (*Template, error) {
\treturn t, nil
}

func (t *Template) Execute() error {
\treturn nil
}
"""
GO_MAIN = """package main

import "example.com/app/text/tpl"

func run() {
\tt := tpl.New("x")
\tu, err := t.Parse("y")
\tif err != nil {
\t\treturn
\t}
\tu.Execute()
}
"""


def test_go_results_are_typed_by_the_functions_result(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """Go: ``t := tpl.New("x")`` is what ``New`` returns (``*Template``, through the
    package), and ``u, err := t.Parse("y")`` the first of ``Parse``'s results: ``u.Execute``
    is ``Template.Execute``, where it was a guess by name."""
    index = index_of(repo, indexer, settings, {"text/tpl/tpl.go": GO_TPL, "main.go": GO_MAIN})
    for ask in (_uses, _whole):
        assert ask(index, "Template.Execute") == {("main.go", 11, "imported")}, ask
        assert ask(index, "Template.Parse") == {("main.go", 7, "imported")}, ask
