"""JavaScript and TypeScript imports of a package by its name, on a real index: the folder
whose ``package.json`` declares the name (a monorepo's workspace, or the nearest
``node_modules/<name>`` as Node looks), its entry file or that entry's ``src/`` twin, and
CommonJS re-exports (``module.exports = require('./x')``, ``exports.Node = require(…)``),
``tsconfig.json`` paths, Node's own modules and default imports.

Before, an import of a bare name resolved by the last parts of a path alone: a workspace's
``@acme/core`` matched no file and its uses were nobody's, and ``require('left-pad')``
matched any file or folder named ``left-pad`` (a nested copy of another package included).

Real git repositories, a real LanceDB index and the real model (through ``Indexer``).
"""

from __future__ import annotations

import json

from tests.conftest import Indexer, Repo
from tests.storage.test_references import index_of

from codechunkd.config import Settings
from codechunkd.storage.reader import Index

CLIENT = """export class Client {
    send(body: string): number {
        return body.length
    }
}
"""
UTIL = "export function retry(n: number): number {\n    return n\n}\n"
DECOY = "export class Client {\n    send(): number {\n        return 0\n    }\n}\n"
APP = """import { Client } from "@acme/core"
import { retry } from "@acme/core/util"

export function main(): number {
    const c = new Client()
    return c.send("x") + retry(3)
}
"""


def _manifest(name: str, **fields: object) -> str:
    return json.dumps({"name": name, "version": "1.0.0", **fields}, indent=2) + "\n"


def _uses(index: Index, symbol: str) -> set[tuple[str, str, str]]:
    """(path, kind, how) of each use of ``symbol`` that resolved to it."""
    return {(u.path, u.kind, u.how) for u in index.references(symbol) if u.target}


def test_a_workspace_package_is_the_folder_that_declares_its_name(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``import {Client} from "@acme/core"`` in another workspace means the class that
    ``packages/core``'s entry exports: its ``main`` (``dist/index.js``) is not committed,
    so its ``src/`` twin is read, which re-exports ``./client``; a subpath
    (``@acme/core/util``) is the file under ``src/``.  A class of the same name in a third
    workspace is not what it means."""
    files = {
        "packages/core/package.json": _manifest(
            "@acme/core", main="dist/index.js", types="dist/index.d.ts"
        ),
        "packages/core/src/index.ts": 'export * from "./client"\n',
        "packages/core/src/client.ts": CLIENT,
        "packages/core/src/util.ts": UTIL,
        "packages/other/package.json": _manifest("@acme/other", main="src/index.ts"),
        "packages/other/src/client.ts": DECOY,
        "packages/app/package.json": _manifest("@acme/app"),
        "packages/app/src/main.ts": APP,
    }
    index = index_of(repo, indexer, settings, files)
    app = "packages/app/src/main.ts"
    client = _uses(index, "Client")
    assert (app, "import", "imported") in client, client
    assert (app, "call", "imported") in client, client
    targets = {u.target.path for u in index.references("Client") if u.target and u.path == app}
    assert targets == {"packages/core/src/client.ts"}, targets
    assert (app, "call", "imported") in _uses(index, "Client.send")  # ``c = new Client()``
    assert (app, "call", "imported") in _uses(index, "retry")


PAD = "function leftPad(s, n) {\n  return s.padStart(n)\n}\n\nmodule.exports = leftPad\n"
OLD_PAD = "function leftPad(s, n) {\n  return ' '.repeat(n) + s\n}\n\nmodule.exports = leftPad\n"
TREE = """class Node {
  constructor(name) {
    this.name = name
  }
}

module.exports = Node
"""
TOP = """const leftPad = require('left-pad')
const { Node } = require('tree')

function show(name) {
  return leftPad(new Node(name).name, 4)
}

module.exports = { show }
"""
OLD = "const leftPad = require('left-pad')\n\nmodule.exports = (s) => leftPad(s, 2)\n"


def test_an_installed_package_is_the_nearest_copy_and_commonjs_reexports_pass_names_on(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``require('left-pad')`` means the copy Node finds: at the top for the app, the one
    nested under ``node_modules/old`` for ``old``; ``module.exports = require('./pad.js')``
    passes ``leftPad`` on, and ``exports.Node = require('./node.js')`` makes
    ``const {Node} = require('tree')`` the class."""
    files = {
        "node_modules/left-pad/package.json": _manifest("left-pad", main="lib/index.js"),
        "node_modules/left-pad/lib/index.js": "module.exports = require('./pad.js')\n",
        "node_modules/left-pad/lib/pad.js": PAD,
        "node_modules/old/package.json": _manifest("old"),
        "node_modules/old/index.js": OLD,
        "node_modules/old/node_modules/left-pad/package.json": _manifest("left-pad"),
        "node_modules/old/node_modules/left-pad/index.js": OLD_PAD,
        "node_modules/tree/package.json": _manifest("tree", main="./index.js"),
        "node_modules/tree/index.js": "exports.Node = require('./node.js')\n",
        "node_modules/tree/node.js": TREE,
        "app.js": TOP,
    }
    index = index_of(repo, indexer, settings, files)
    calls = {
        (u.path, u.target.path)
        for u in index.references("leftPad")
        if u.target and u.kind == "call"
    }
    assert calls == {
        ("app.js", "node_modules/left-pad/lib/pad.js"),
        ("node_modules/old/index.js", "node_modules/old/node_modules/left-pad/index.js"),
    }, calls
    assert ("app.js", "call", "imported") in _uses(index, "Node")  # ``new Node(name)``


def test_a_package_row_is_no_use_and_a_json_chunks_keys_show_once_in_the_map(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """A ``package.json``'s ``package`` row names the package it declares: it is no use of
    the key ``left-pad`` in the root ``package.json``'s ``dependencies`` (the map ranked that
    file by such uses, one from each installed package), and the map lists each line of a
    file once (the keys of one JSON chunk share its one signature: each was a line)."""
    deps = {f"dep-{n}": "^1.0.0" for n in range(150)} | {"left-pad": "^1.0.0"}
    files = {
        "package.json": _manifest("app", main="app.js", dependencies=deps),
        "node_modules/left-pad/package.json": _manifest("left-pad", main="lib/index.js"),
        "node_modules/left-pad/lib/index.js": "module.exports = require('./pad.js')\n",
        "node_modules/left-pad/lib/pad.js": PAD,
        "app.js": "const leftPad = require('left-pad')\n\nmodule.exports = (s) => leftPad(s, 2)\n",
    }
    index = index_of(repo, indexer, settings, files)
    graph = index.refs.graph()
    packages = [i for i in range(graph.rows) if graph._kind[i] == "package"]
    assert {graph._path[i] for i in packages} == {
        "package.json",
        "node_modules/left-pad/package.json",
    }
    assert all(graph.resolve(i) == ([], "") for i in packages)
    entries = index.refs.repo_map(count_tokens=lambda ts: [len(t) // 4 for t in ts], budget=10**5)
    shown = {e.path: e.definitions for e in entries}
    assert shown["package.json"], shown  # none of its keys is used: its own, in file order
    lines = [(sig, line) for _, sig, line in shown["package.json"]]
    assert len(lines) == len(set(lines)), lines
    assert ('dependencies: "dependencies":', 5) in lines, lines
    first = [e.path for e in entries]
    assert first.index("node_modules/left-pad/lib/pad.js") < first.index("package.json"), first


TSCONFIG = """{
  // comments and trailing commas, as tsconfig.json allows
  "compilerOptions": {
    "baseUrl": ".",
    "paths": { "@/*": ["./src/*"], },
  },
}
"""
UTILS = "export function cn(...names: string[]): string {\n    return names.join(' ')\n}\n"
BUTTON = """import { cn } from "@/lib/utils"

export function Button(): string {
    return cn("btn", "big")
}
"""
PAGE = """import { connect } from "~/db"

export function page(): number {
    return connect()
}
"""


def test_tsconfig_paths_map_a_name_to_the_files_under_the_configs_folder(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``"@/*": ["./src/*"]`` (from ``baseUrl``) makes ``@/lib/utils`` the file
    ``src/lib/utils.ts``, not another ``lib/utils.ts``; a nested app's own config (paths
    from its folder, no ``baseUrl``) maps ``~/db`` to its ``app/db.ts``. Before, both
    imports were of a package the source does not hold: nobody's."""
    files = {
        "tsconfig.json": TSCONFIG,
        "src/lib/utils.ts": UTILS,
        "src/components/button.ts": BUTTON,
        "other/lib/utils.ts": UTILS,
        "apps/web/tsconfig.json": '{"compilerOptions": {"paths": {"~/*": ["./app/*"]}}}\n',
        "apps/web/app/db.ts": "export function connect(): number {\n    return 1\n}\n",
        "apps/web/app/page.ts": PAGE,
    }
    index = index_of(repo, indexer, settings, files)
    calls = {(u.path, u.how, u.target.path) for u in index.references("cn") if u.target}
    assert ("src/components/button.ts", "imported", "src/lib/utils.ts") in calls, calls
    assert not any(t == "other/lib/utils.ts" for _, _, t in calls), calls
    connects = {(u.path, u.kind, u.how) for u in index.references("connect") if u.target}
    assert ("apps/web/app/page.ts", "call", "imported") in connects, connects


def test_nodes_own_modules_are_no_file_of_the_repository(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``require('path')``, ``require('node:fs')`` and ``fs/promises`` are Node's, even
    beside a ``lib/content/path.js`` and a ``fs.js`` (each import resolved to them by the
    last part of their path, as ``cacache``'s ``path.js`` took 119 of the npm CLI's), and
    before an installed package of the same name (npm's ``events`` polyfill)."""
    use = (
        "const path = require('path')\nconst fs = require('node:fs')\n"
        "const { readFile } = require('fs/promises')\nconst EventEmitter = require('events')\n\n"
        "function load (p) {\n  return readFile(path.join(p, 'x')) && fs.stat(p) && "
        "new EventEmitter()\n}\n\nmodule.exports = { load }\n"
    )

    def module(name: str) -> str:
        return f"function {name} (p) {{\n  return p\n}}\n\nmodule.exports = {{ {name} }}\n"

    files = {
        "lib/content/path.js": module("join"),
        "lib/fs.js": module("stat"),
        "lib/fs/promises.js": module("readFile"),
        "node_modules/events/package.json": _manifest("events", main="events.js"),
        "node_modules/events/events.js": "class EventEmitter {}\n\nmodule.exports = EventEmitter\n",
        "app.js": use,
    }
    index = index_of(repo, indexer, settings, files)
    for symbol in ("join", "stat", "readFile", "EventEmitter"):
        found = {(u.path, u.kind, u.how) for u in index.references(symbol) if u.target}
        assert not any(p == "app.js" for p, _, _ in found), (symbol, found)


def test_commonjs_exports_of_requires_and_a_required_modules_member(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``module.exports = {publish: require('./publish.js')}`` passes ``publish`` on
    (``const {publish} = require('libpub')`` is that function) and
    ``const getError = require('./errors.js').getError`` binds the module's ``getError``;
    both were nobody's (the second the local ``const``, ``exact``)."""
    files = {
        "node_modules/libpub/package.json": _manifest("libpub", main="lib/index.js"),
        "node_modules/libpub/lib/index.js": "module.exports = {\n"
        "  publish: require('./publish.js'),\n  'unpublish': require('./unpublish.js'),\n}\n",
        "node_modules/libpub/lib/publish.js": "const publish = (spec) => spec\n\n"
        "module.exports = publish\n",
        "node_modules/libpub/lib/unpublish.js": "function unpublish (spec) {\n"
        "  return spec\n}\n\nmodule.exports = unpublish\n",
        "lib/errors.js": "function getError (e) {\n  return e\n}\n\n"
        "module.exports = { getError }\n",
        "lib/cmd.js": "const { publish, unpublish } = require('libpub')\n"
        "const getError = require('./errors.js').getError\n\n"
        "function run (spec) {\n  return getError(publish(spec) || unpublish(spec))\n}\n\n"
        "module.exports = { run }\n",
    }
    index = index_of(repo, indexer, settings, files)
    for symbol, where in (
        ("publish", "node_modules/libpub/lib/publish.js"),
        ("unpublish", "node_modules/libpub/lib/unpublish.js"),
        ("getError", "lib/errors.js"),
    ):
        calls = {
            (u.how, u.target.path)
            for u in index.references(symbol)
            if u.target and u.kind == "call" and u.path == "lib/cmd.js"
        }
        assert calls == {("imported", where)}, (symbol, calls)


ERROR_JS = """class AxiosError extends Error {
  static from (error) {
    return new AxiosError(error.message)
  }
}

export default AxiosError
"""
UTILS_JS = "const isArray = (x) => Array.isArray(x)\n\nexport default { isArray }\n"
AXIOS_JS = """import AxiosError from './core/AxiosError.js'
import utils from './utils.js'

export function check (value) {
  if (!utils.isArray(value)) {
    throw new AxiosError('not a list')
  }
  return AxiosError.from(value)
}
"""


def test_a_default_import_means_what_the_module_exports_by_that_name_or_the_module(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``import AxiosError from './core/AxiosError.js'`` means the class that module
    exports as its default (by the name it is imported as), so ``new AxiosError()`` and
    ``AxiosError.from()`` are its; ``import utils from './utils.js'`` of an
    ``export default {isArray}`` makes ``utils.isArray()`` the module's ``isArray``. Each
    of axios's 146 default imports resolved to nothing, and so did their uses."""
    files = {"lib/core/AxiosError.js": ERROR_JS, "lib/utils.js": UTILS_JS, "lib/check.js": AXIOS_JS}
    index = index_of(repo, indexer, settings, files)
    for symbol, kinds in (
        ("AxiosError", {"import", "call"}),
        ("AxiosError.from", {"call"}),
        ("isArray", {"call"}),
    ):
        found = {(u.kind, u.how) for u in index.references(symbol) if u.path == "lib/check.js"}
        assert found == {(k, "imported") for k in kinds}, (symbol, found)


def test_a_default_export_imported_or_required_under_another_name(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``import foo from './bar.js'`` of ``export default function baz``, and ``const qux =
    require('./cjs.js')`` of ``module.exports = grault``: ``foo()`` and ``qux()`` call them,
    and ``refs baz`` lists those calls (by convention a default import was looked up by its
    own name, so the calls were nobody's); ``export default Klass`` and a class exported so
    likewise, and a named import keeps its meaning."""
    files = {
        "lib/bar.js": "export default function baz (x) {\n  return x + 1\n}\n",
        "lib/cjs.js": "function grault (x) {\n  return x * 2\n}\n\nmodule.exports = grault\n",
        "lib/klass.ts": "class Klass {\n  run (): number {\n    return 1\n  }\n}\n\n"
        "export default Klass\n",
        "lib/named.js": "export function baz () {\n  return 0\n}\n",
        "lib/main.js": "import foo from './bar.js'\nimport Thing from './klass'\n"
        "import { baz } from './named.js'\nconst qux = require('./cjs.js')\n\n"
        "export function run () {\n  return foo(2) + qux(3) + baz() + new Thing().run()\n}\n",
    }
    index = index_of(repo, indexer, settings, files)
    calls = {
        (u.name, u.how, u.target.path)
        for symbol in ("baz", "grault", "Klass")
        for u in index.references(symbol)
        if u.target and u.kind == "call" and u.path == "lib/main.js"
    }
    assert calls == {
        ("foo", "imported", "lib/bar.js"),
        ("qux", "imported", "lib/cjs.js"),
        ("Thing", "imported", "lib/klass.ts"),
        ("baz", "imported", "lib/named.js"),  # the named import: its own module's
    }, calls
