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
functions, and those of the files it requires in turn, by path; a bare name never means a
method.  A name on a class (``vfsStream::newDirectory()``) is that class's member, or a
base's, where a class of that name is defined in the folder of the use (its namespace).
"""

from __future__ import annotations

import posixpath

from codechunkd.storage.refnames import ModulePaths, php_class

__all__ = ["PhpNames"]


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

    def _in_module(self, src: str, path: str, module: str, name: str, depth: int) -> list[int]:
        raise NotImplementedError

    def _member_of(self, c: int, name: str) -> list[int]:
        raise NotImplementedError

    def _inherited(self, i: int, owner: str, name: str, depth: int) -> list[int]:
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

    def _php_module(self, src: str, path: str, module: str, name: str, depth: int) -> list[int]:
        """``name`` in a namespace (``google\\appengine\\runtime``), a class
        (``google\\appengine\\runtime.ApiProxy``) or a file ``require``d."""
        want = f"{module}.{name}"
        found = [j for j in self._by_src_name.get((src, "php", name), ()) if self._sym[j] == want]
        if found:
            return found
        for file in sorted(self._paths.files(src, path, module)):
            defs = self._file_defs.get((src, file), {}).get(name, ())
            found += [j for j in defs if "." not in self._sym[j] or php_class(name)]
            if not defs:  # what it requires in turn
                for j in self._imports.get((src, file), {}).get("*", ()):
                    found += self._in_module(src, file, self._mod[j], name, depth + 1)
        return list(dict.fromkeys(found))
