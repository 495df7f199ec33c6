"""How the reference graph resolves a name used in C# (``RefGraph`` of storage/refgraph.py
is a :class:`CSharpNames`).

A C# namespace is what a file declares (``namespace App.Services;``), not where it is, and a
class may be split across files (``partial``); every definition's symbol is its full name
(``App.Services.UserService.Find``).  So a name resolves by the full names it can have, as
the compiler looks it up:

1. a bare name (``Validate(u)``, ``new User()``, a type ``User``) or one on ``this``: in
   each scope around the use, innermost first (the method, its class, the classes around
   it, the namespace and the namespaces around it: ``App.Services.UserService.Validate``,
   ``App.Services.User``, ``App.User``), then a member of the class's bases, then in each
   namespace (or class, ``using static``) a ``using`` brings in, then through a ``using``
   alias (``using Baz = Foo.Qux.Baz;``);
2. a name on ``base``: a member of the class's bases;
3. a name on a variable of a known class (``_repo.Get(id)`` with a field ``IRepo _repo``):
   that class's member (``binds`` rows, as in Java); on a class (``Helpers.Check(u)``,
   ``Foo.Bar.Helpers.Check(u)``): the class found as in 1, or by its full name, then its
   member or a base's;
4. ``by-name``: every definition of the name in C# of the source.

``exact`` when every definition found is in the use's file, ``imported`` otherwise.
"""

from __future__ import annotations

from typing import Final

from codechunkd.storage.refnames import BY_NAME

__all__ = ["CSharpNames"]

_SELF: Final = frozenset({"", "this"})


class CSharpNames:
    """The C# part of the reference graph: what it reads of the graph's rows."""

    _src: list[str]
    _path: list[str]
    _kind: list[str]
    _name: list[str]
    _qual: list[str]
    _mod: list[str]
    _sym: list[str]
    _owner: list[str]
    _imports: dict[tuple[str, str], dict[str, list[int]]]
    _by_src_name: dict[tuple[str, str, str], list[int]]

    def _member_of(self, c: int, name: str) -> list[int]:
        raise NotImplementedError

    def _inherited(self, i: int, owner: str, name: str, depth: int) -> list[int]:
        raise NotImplementedError

    def _typed(self, i: int, src: str, path: str, var: str, name: str) -> tuple[list[int], str]:
        raise NotImplementedError

    def _how(self, path: str, found: list[int]) -> str:
        """``exact`` when every definition found is in ``path`` (``CFamily``'s)."""
        raise NotImplementedError

    def _resolve_cs(self, i: int) -> tuple[list[int], str]:
        """The definitions the C# use row ``i`` can mean, and how (the module's docstring
        says in what order)."""
        name, src, path, kind = self._name[i], self._src[i], self._path[i], self._kind[i]
        if kind == "import":  # ``using Baz = Foo.Qux.Baz;``; a namespace names no definition
            found = self._cs_named(src, f"{self._mod[i]}.{self._qual[i]}") if name != "*" else []
            return self._cs_how(path, found)
        qual = "" if kind == "binds" else self._qual[i]
        cls = self._owner[i].rpartition(".")[0]  # the class (or namespace) written in
        if qual == "base":
            return self._cs_how(path, self._inherited(i, cls, name, 0))
        if qual in _SELF:
            found = self._cs_lookup(i, name)
            return self._cs_how(path, found) if found else self._cs_by_name(i)
        typed = self._typed(i, src, path, qual, name)
        if typed[0]:
            return typed
        classes = self._cs_named(src, qual) if "." in qual else self._cs_lookup(i, qual)
        found = [
            k
            for c in classes
            for k in self._member_of(c, name) or self._inherited(c, self._sym[c], name, 0)
        ]
        if not found and "." in qual:  # ``Foo.Bar.Helpers``: a namespace, not a class
            found = self._cs_named(src, f"{qual}.{name}")
        return self._cs_how(path, found) if found else self._cs_by_name(i)

    def _cs_lookup(self, i: int, name: str) -> list[int]:
        """A bare ``name`` where row ``i`` is written: in the scopes around it, innermost
        first, then its class's bases, then what its file's ``using``s bring in."""
        src, path = self._src[i], self._path[i]
        parts = self._owner[i].split(".")
        for k in range(len(parts), -1, -1):
            found = self._cs_named(src, ".".join([*parts[:k], name]))
            if found:
                return found
        found = self._inherited(i, self._owner[i].rpartition(".")[0], name, 0)
        if found:
            return found
        imports = self._imports.get((src, path), {})
        for j in imports.get("*", ()):
            found += self._cs_named(src, f"{self._mod[j]}.{name}")
        for j in imports.get(name, ()):  # an alias
            found += self._cs_named(src, f"{self._mod[j]}.{self._qual[j]}")
        return found

    def _cs_named(self, src: str, symbol: str) -> list[int]:
        """The C# definitions of ``src`` whose full name is ``symbol``."""
        last = symbol.rpartition(".")[2]
        return [
            j for j in self._by_src_name.get((src, "csharp", last), ()) if self._sym[j] == symbol
        ]

    def _cs_by_name(self, i: int) -> tuple[list[int], str]:
        anywhere = self._by_src_name.get((self._src[i], "csharp", self._name[i]))
        return (anywhere, BY_NAME) if anywhere else ([], "")

    def _cs_how(self, path: str, found: list[int]) -> tuple[list[int], str]:
        return (found, self._how(path, found)) if found else ([], "")
