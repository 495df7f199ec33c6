"""How the reference graph resolves a name used in PHP (``RefGraph`` of storage/refgraph.py
is a :class:`PhpNames`).

A PHP namespace is what a file declares (``namespace google\\appengine\\runtime;``), not
where the file is: PSR-4 maps a namespace's root to any folder, and generated code (App
Engine's protocol buffers) puts many namespaces' classes in one file.  So a name imported
by ``use google\\appengine\\runtime\\ApiProxy;``, or written whole
(``new \\google\\net\\Decoder()``), is the definition whose canonical symbol is that
namespace and name (``google\\appengine\\runtime.ApiProxy``), wherever it is; only when the
source defines none is the namespace read as a path (``refnames.ModulePaths``).  A file
``require``d (``require_once __DIR__ . '/lib/util.php'``) pastes in its classes and
functions, and those of the files it requires in turn (three deep), by path; a bare name
never means a method.  A name on a class (``vfsStream::newDirectory()``) is that class's
member, or a base's, where a class of that name is defined in the folder of the use (its
namespace).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from codechunkd.storage.refnames import ModulePaths, php_class

__all__ = ["MAX_SCOPE", "REQUIRE_DEPTH", "PhpMemo", "PhpNames"]

REQUIRE_DEPTH: Final = 3
"""How many ``require``s deep a file's scope reaches (a file's own are the first)."""
MAX_SCOPE: Final = 1000
"""The most files a file's scope holds: a repository whose files all require each other
(hostile, or a bootstrap that loads everything) is not walked whole per file."""


@dataclass(slots=True)
class PhpMemo:
    """What PHP resolution works out once per graph, from its import rows alone."""

    scopes: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """Each file's scope (``_php_scope``)."""


class PhpNames:
    """The PHP part of the reference graph: what it reads of the graph's rows."""

    _path: list[str]
    _name: list[str]
    _sym: list[str]
    _mod: list[str]
    _paths: ModulePaths
    _imports: dict[tuple[str, str], dict[str, list[int]]]
    _file_defs: dict[tuple[str, str], dict[str, list[int]]]
    _by_src_name: dict[tuple[str, str, str], list[int]]
    _php: PhpMemo

    def _in_module(self, src: str, path: str, module: str, name: str, depth: int) -> list[int]:
        raise NotImplementedError

    def _member_of(self, c: int, name: str) -> list[int]:
        raise NotImplementedError

    def _inherited(self, i: int, owner: str, name: str, depth: int) -> list[int]:
        raise NotImplementedError

    def _c_includes(self, src: str, file: str) -> tuple[str, ...]:
        """The files ``file`` pastes in itself (``CFamily``'s: ``#include`` or ``require``)."""
        raise NotImplementedError

    def _php_qualified(self, src: str, path: str, qual: str, name: str) -> list[int]:
        """``name`` written on a class (``vfsStream::create()``) or in a namespace
        (``\\google\\net\\Decoder``)."""
        if qual.isidentifier():  # a class of the folder of ``path``: its member or a base's
            here = posixpath.dirname(path)
            found = self._by_src_name.get((src, "php", qual), ())
            classes = [c for c in found if posixpath.dirname(self._path[c]) == here]
            return [
                k
                for c in classes
                for k in self._member_of(c, name) or self._inherited(c, self._sym[c], name, 0)
            ]
        return self._in_module(src, path, qual, name, 0) if "\\" in qual else []

    def _php_module(self, src: str, path: str, module: str, name: str) -> list[int]:
        """``name`` in a namespace (``google\\appengine\\runtime``) or a class
        (``google\\appengine\\runtime.ApiProxy``): by the symbols definitions declare, else
        in the files at the namespace's path (never a method for a namespace's name)."""
        want = f"{module}.{name}"
        found = [j for j in self._by_src_name.get((src, "php", name), ()) if self._sym[j] == want]
        if found:
            return found
        files = sorted(self._paths.files(src, path, module))
        return self._not_members(src, files, name)

    def _php_required(self, src: str, path: str, name: str) -> list[int]:
        """A bare ``name`` in the files ``path`` requires, theirs, :data:`REQUIRE_DEPTH`
        deep (nearest first): their functions and classes, never a method."""
        return self._not_members(src, self._php_scope(src, path), name)

    def _not_members(self, src: str, files: Iterable[str], name: str) -> list[int]:
        found = []
        for file in files:
            defs = self._file_defs.get((src, file), {}).get(name, ())
            found += [j for j in defs if "." not in self._sym[j] or php_class(name)]
        return found

    def _php_scope(self, src: str, path: str) -> tuple[str, ...]:
        """The files ``path`` requires, and theirs, :data:`REQUIRE_DEPTH` deep, nearest
        first, at most :data:`MAX_SCOPE` (remembered: files that all require each other
        made a walk per name exponential in its depth)."""
        got = self._php.scopes.get((src, path))
        if got is None:
            seen, frontier = {path}, [path]
            order: list[str] = []
            for _ in range(REQUIRE_DEPTH):
                nxt: list[str] = []
                for file in frontier:
                    for f in self._c_includes(src, file):
                        if f not in seen and len(order) < MAX_SCOPE:
                            seen.add(f)
                            order.append(f)
                            nxt.append(f)
                frontier = nxt
            got = self._php.scopes[(src, path)] = tuple(order)
        return got
