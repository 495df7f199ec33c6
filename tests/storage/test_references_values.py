"""Constants, module variables and class attributes as definitions, on a real index: what
``defs`` and ``refs`` answer for them, and what a search that names one finds; and a bare
Python name, which means nothing beyond its file, is never another module's definition.

Real git repositories, a real LanceDB index and the real model (through ``Indexer``).
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.conftest import Indexer, Repo
from tests.storage.test_references import index_of

from codechunkd.config import Settings
from codechunkd.storage.reader import Index

SETTINGS = '''"""Settings of the client: retries, timeouts and colours."""

import os

MAX_RETRIES = 3
TIMEOUT: float = 2.5
if os.name == "nt":
    SEP = "\\\\"
else:
    SEP = "/"


class Color:
    RED = 1

    def paint(self):
        return Color.RED


def retries():
    return MAX_RETRIES
'''
CLIENT = '''"""The client."""

import settings
from settings import MAX_RETRIES, Color


def go():
    return MAX_RETRIES, settings.TIMEOUT, Color.RED


def other():
    TIMEOUT = 1
    return TIMEOUT
'''
LONELY = '''"""A module that names a constant it never imports."""


def guess():
    return MAX_RETRIES
'''


def _index(repo: Repo, indexer: Indexer, settings: Settings) -> Index:
    files = {"settings.py": SETTINGS, "client.py": CLIENT, "lonely.py": LONELY}
    return index_of(repo, indexer, settings, files)


def test_a_constant_is_defined_where_it_is_bound_and_used_where_it_is_named(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``defs`` finds a module constant, an annotated one, one bound in both arms of an
    ``if`` and a class attribute at their lines; ``refs`` finds their uses in the same
    file (``exact``) and through imports (``imported``, ``settings.TIMEOUT`` too), but not
    a function's local of the same name, nor a bare name in a file that never imports
    it (no guess by name for a value: ``MAX_RETRIES`` there is undefined)."""
    index = _index(repo, indexer, settings)
    assert {(d.path, d.line) for d in index.definitions("MAX_RETRIES")} == {("settings.py", 5)}
    assert {(d.path, d.line) for d in index.definitions("TIMEOUT")} == {("settings.py", 6)}
    assert {(d.path, d.line) for d in index.definitions("SEP")} == {("settings.py", 8)}
    assert {(d.path, d.symbol) for d in index.definitions("Color.RED")} == {
        ("settings.py", "Color.RED")
    }
    for ask in (_asked(index), _whole(index)):
        assert ask("MAX_RETRIES") == {
            ("settings.py", 21, "exact"),
            ("client.py", 4, "imported"),
            ("client.py", 8, "imported"),
        }, ask
        assert ask("TIMEOUT") == {("client.py", 8, "imported")}, ask
        assert ask("Color.RED") == {
            ("settings.py", 17, "exact"),
            ("client.py", 8, "imported"),
        }, ask


def _asked(index: Index):  # type: ignore[no-untyped-def]
    """Uses as a question reads them (the skeleton and the rows about the name)."""

    def uses(symbol: str) -> set[tuple[str, int, str]]:
        return {(u.path, u.line, u.how) for u in index.references(symbol)}

    return uses


def _whole(index: Index):  # type: ignore[no-untyped-def]
    """Uses as the whole graph a daemon keeps resolves them."""
    graph = index.refs.graph()

    def uses(symbol: str) -> set[tuple[str, int, str]]:
        return {(u.path, u.line, u.how) for u in graph.uses_of(graph.definitions(symbol))}

    return uses


def test_a_search_that_names_a_constant_finds_where_it_is_bound(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """A query that is a constant's name, or asks where it is defined, has the chunk that
    binds it first (module code, with no symbol of its own), in every mode, and the
    class attribute through its class's name."""
    index = _index(repo, indexer, settings)
    binding = next(r for r in index.file("settings.py") if "MAX_RETRIES = 3" in r.content)
    assert binding.symbol == ""  # module code: neither retriever's symbol matched it
    for query in ("MAX_RETRIES", "where is MAX_RETRIES defined"):
        for mode in ("hybrid", "text", "vector"):
            hits = index.search(query, k=3, mode=mode)
            assert hits[0].id == binding.id, (query, mode, [(h.path, h.symbol) for h in hits])
    hits = index.search("Color.RED", k=3)
    assert hits[0].path == "settings.py" and "RED = 1" in hits[0].content


def test_the_map_shows_the_line_that_binds_a_value(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``codechunkd map`` (and the MCP ``repo_map``) lists a constant by the line that binds
    it, and a class attribute under its class, as it lists a function by its signature;
    the name alone said nothing of what it is."""
    index = _index(repo, indexer, settings)
    entries = index.refs.repo_map(count_tokens=lambda ts: [len(t) // 4 for t in ts], budget=10_000)
    shown = {
        (sig, line) for e in entries if e.path == "settings.py" for _, sig, line in e.definitions
    }
    assert {("MAX_RETRIES = 3", 5), ("TIMEOUT: float = 2.5", 6), ("Color: RED = 1", 14)} <= shown


TITLES = """def title(text):
    return text.title()


def open(path):
    return path
"""
PAGES = """def heading(title):
    return [title]


def read(path):
    with open(path) as f:
        return f.read()
"""


def test_a_bare_python_name_is_never_another_modules(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """Python names nothing bare beyond its file's scope: a parameter ``title`` and the
    builtin ``open`` in ``pages.py`` are not ``titles.py``'s ``title`` and ``open``, which
    it never imports (each was a use of them, ``by-name``)."""
    index = index_of(repo, indexer, settings, {"titles.py": TITLES, "pages.py": PAGES})
    for name in ("title", "open"):
        assert not [u for u in index.references(name) if u.path == "pages.py"], name


def test_a_map_cut_short_lists_the_best_definitions_that_fit(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """A budget the first file's whole entry is over lists that file's best definitions
    that fit (it listed the file's name alone: a map that says nothing), and never more
    than the budget; a budget under even the name keeps the name."""
    from codechunkd.storage.repomap import MapEntry, render

    index = _index(repo, indexer, settings)

    def cost(ts: Sequence[str]) -> list[int]:
        return [len(t) // 4 for t in ts]

    whole = index.refs.repo_map(count_tokens=cost, budget=10_000)
    first = whole[0]
    assert len(first.definitions) >= 3, whole
    two = render([MapEntry(first.path, first.rank, first.definitions[:2])])
    cut = index.refs.repo_map(count_tokens=cost, budget=cost([two])[0])
    assert [(e.path, e.definitions) for e in cut] == [(first.path, first.definitions[:2])]
    assert cost([render(cut)])[0] <= cost([two])[0]
    tiny = index.refs.repo_map(count_tokens=cost, budget=1)
    assert [(e.path, e.definitions) for e in tiny] == [(first.path, ())]


UTILS_JS = """const {isArray} = Array
const {getPrototypeOf: protoOf} = Object
const [isStream, isRequest] = ['Stream', 'Request'].map((t) => (x) => x === t)

function flat (value) {
  return isArray(value) && protoOf(value) && isStream(value)
}

export default { isArray, flat, isRequest }
"""
USE_JS = """import utils from './utils.js'

export function check (x) {
  return utils.isArray(x) || utils.isRequest(x)
}
"""


def test_a_destructured_javascript_constant_is_defined_and_used(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``const {isArray} = Array``, ``const {getPrototypeOf: protoOf} = Object`` and
    ``const [isStream, isRequest] = …`` at a module's top define ``isArray``, ``protoOf``,
    ``isStream`` and ``isRequest`` (axios's ``utils.js``): their uses in the file resolve
    ``exact`` and ``utils.isArray()`` through a default import ``imported``; each of them
    was nobody's."""
    index = index_of(repo, indexer, settings, {"lib/utils.js": UTILS_JS, "lib/use.js": USE_JS})
    assert {d.path for d in index.definitions("isArray")} == {"lib/utils.js"}
    for name, expected in (
        ("isArray", {("lib/utils.js", "exact"), ("lib/use.js", "imported")}),
        ("protoOf", {("lib/utils.js", "exact")}),
        ("isStream", {("lib/utils.js", "exact")}),
        ("isRequest", {("lib/use.js", "imported")}),
    ):
        calls = {(u.path, u.how) for u in index.references(name) if u.kind == "call"}
        assert calls == expected, (name, calls)


PHP_CLIENT = """<?php
namespace App\\Http;

class Client {
    const DEFAULT_SIZE = 512;

    public function size() {
        return self::DEFAULT_SIZE;
    }
}
"""
PHP_READ = """<?php
namespace App\\Http;

final class ReadClient extends Client {
    const MODE = 'r';

    public function read() {
        return static::MODE . parent::DEFAULT_SIZE;
    }
}
"""
PHP_TEST = """<?php
namespace App\\Tests;

use App\\Http\\ReadClient;

class ReadClientTest {
    public function testSize() {
        return ReadClient::DEFAULT_SIZE + strlen(ReadClient::MODE);
    }
}
"""


def test_a_php_class_constant_is_defined_and_used_through_self_parent_and_its_class(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``const DEFAULT_SIZE = 512;`` in a class of a namespace is defined as the chunker
    names PHP's definitions (``App\\Http::Client::DEFAULT_SIZE``), and ``self::``,
    ``static::``, ``parent::`` and ``ReadClient::DEFAULT_SIZE`` (a subclass imported by
    ``use``: the base's constant) are its uses. PHP recorded neither: ``refs`` of a
    constant found nothing. The map shows a member with its class, as it does Python's
    (it showed ``const DEFAULT_SIZE = 512;`` alone)."""
    files = {
        "src/Http/Client.php": PHP_CLIENT,
        "src/Http/ReadClient.php": PHP_READ,
        "tests/ReadClientTest.php": PHP_TEST,
    }
    index = index_of(repo, indexer, settings, files)
    assert [(d.path, d.symbol) for d in index.definitions("DEFAULT_SIZE")] == [
        ("src/Http/Client.php", "App\\Http::Client::DEFAULT_SIZE")
    ]
    for name, expected in (
        (
            "DEFAULT_SIZE",
            {
                ("src/Http/Client.php", "exact"),
                ("src/Http/ReadClient.php", "imported"),
                ("tests/ReadClientTest.php", "imported"),
            },
        ),
        ("MODE", {("src/Http/ReadClient.php", "exact"), ("tests/ReadClientTest.php", "imported")}),
    ):
        uses = {(u.path, u.how) for u in index.references(name) if u.kind == "value"}
        assert uses == expected, (name, uses)
    entries = index.refs.repo_map(count_tokens=lambda ts: [len(t) // 4 for t in ts], budget=10**5)
    shown = {sig for e in entries for _, sig, _ in e.definitions}
    assert "Client: const DEFAULT_SIZE = 512;" in shown, shown
    assert "class Client" in shown, shown  # not under its namespace, which is no class


PERL_CMD = """package Net::Cmd;

use constant CMD_OK => 2;
use constant { CMD_MORE => 3, CMD_INFO => 1 };

sub ok {
    my $self = shift;
    return $self->code == CMD_OK;
}

1;
"""
PERL_FTP = """package Net::FTP;

use Net::Cmd qw(CMD_MORE);

sub more {
    my $code = shift;
    return $code == CMD_MORE ? 1 : DEBUG;
}

1;
"""
PERL_DEPARSE = "package B::Deparse;\n\nsub DEBUG { 0 }\n\n1;\n"


def test_a_perl_use_constant_is_defined_and_used_bare(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``use constant CMD_OK => 2`` and ``use constant {CMD_MORE => 3}`` define
    ``Net::Cmd::CMD_OK`` and ``Net::Cmd::CMD_MORE``; a bare ``CMD_OK`` in the package is a
    use (``exact``), ``CMD_MORE`` imported by a ``use`` list one in another (``imported``);
    a bare ``DEBUG`` the package does not define or import is no guess at another
    package's ``sub DEBUG``. Perl recorded neither the constants nor their bare uses."""
    files = {
        "lib/Net/Cmd.pm": PERL_CMD,
        "lib/Net/FTP.pm": PERL_FTP,
        "lib/B/Deparse.pm": PERL_DEPARSE,
    }
    index = index_of(repo, indexer, settings, files)
    assert [d.symbol for d in index.definitions("CMD_MORE")] == ["Net::Cmd::CMD_MORE"]
    for name, expected in (
        ("CMD_OK", {("lib/Net/Cmd.pm", "exact")}),
        ("CMD_MORE", {("lib/Net/FTP.pm", "imported")}),
        ("DEBUG", set()),
    ):
        uses = {(u.path, u.how) for u in index.references(name) if u.kind == "value"}
        assert uses == expected, (name, uses)
