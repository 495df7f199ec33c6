"""The methods of a language's own types on a real index: ``d.items()`` on a plain dict,
``"\\n".join(lines)``, ``arr.push(x)`` are Python's and JavaScript's own, never guessed to
be the one ``items``, ``join`` or ``push`` a class of the repository defines, unless the
receiver is named for that class (``message.get``: ``Message.get``).

Real git repositories, a real LanceDB index and the real model (through ``Indexer``).
"""

from __future__ import annotations

from tests.conftest import Indexer, Repo
from tests.storage.test_references import index_of

from codechunkd.config import Settings
from codechunkd.storage.reader import Index

GETTER = """class GetterDict:
    def items(self):
        return []

    def get(self, key):
        return None


class Queue:
    def join(self):
        return None


class Message:
    def get(self, key):
        return key


class Page:
    def render(self):
        return ""
"""
USE = """def flat(d, lines, message, obj, page):
    pairs = [k for k, _ in d.items()]
    text = "\\n".join(lines)
    return pairs, text, message.get("To"), obj.render, page.render
"""
ARRAY = """class ObservableArray {
  push(x) {
    return x
  }
}

module.exports = { ObservableArray }
"""
ARRAY_USE = """function add(items, x, observableArray) {
  items.push(x)
  observableArray.push(x)
  return [1, 2].map((n) => n + 1)
}
"""


def _guesses(index: Index, path: str, name: str) -> list[tuple[int, list[str]]]:
    """The by-name answers of the whole graph for the uses of ``name`` in ``path``: their
    lines and the symbols they guess."""
    graph = index.refs.graph()
    out = []
    for i in graph.uses_by_name.get(name, ()):
        rows, how = graph.resolve(i)
        if graph._path[i] == path and how == "by-name":
            out.append((graph._line[i], sorted(graph._sym[j] for j in rows)))
    return sorted(out)


def test_a_python_builtin_types_method_is_not_a_guess(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``d.items()`` and ``"\\n".join(lines)`` mean no definition of the repository (each
    was ``by-name`` the only ``items`` and ``join`` it defines: ``GetterDict.items``,
    ``Queue.join``), and ``refs`` lists neither; ``message.get`` is still ``Message.get``,
    a guess narrowed by the receiver's name; so is a read of ``page.render``, where
    ``obj.render`` is nobody's (it was ``Page.render``, by name)."""
    index = index_of(repo, indexer, settings, {"getter.py": GETTER, "use.py": USE})
    assert _guesses(index, "use.py", "items") == []
    assert _guesses(index, "use.py", "join") == []
    assert _guesses(index, "use.py", "get") == [(4, ["Message.get"])]
    # a method read, not called, on a receiver of no known class: no guess, unless named so
    assert _guesses(index, "use.py", "render") == [(4, ["Page.render"])]
    assert not [u for u in index.references("GetterDict.items") if u.path == "use.py"]
    assert not [u for u in index.references("Queue.join") if u.path == "use.py"]
    uses = {(u.path, u.line, u.how) for u in index.references("Message.get")}
    assert uses == {("use.py", 4, "by-name")}, uses


def test_a_javascript_prototype_method_is_not_a_guess(
    repo: Repo, indexer: Indexer, settings: Settings
) -> None:
    """``items.push(x)`` on a parameter is an ``Array``'s ``push``, not the repository's
    one ``ObservableArray.push``; ``observableArray.push(x)``, named for the class, stays
    a guess of it."""
    index = index_of(repo, indexer, settings, {"array.js": ARRAY, "add.js": ARRAY_USE})
    assert _guesses(index, "add.js", "push") == [(3, ["ObservableArray.push"])]
    uses = {(u.path, u.line) for u in index.references("ObservableArray.push")}
    assert uses == {("add.js", 3)}, uses
