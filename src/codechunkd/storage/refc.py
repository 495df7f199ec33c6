"""How the reference graph resolves a name used in C, C++ or CUDA (``RefGraph`` of
storage/refgraph.py is a :class:`CFamily`).

C has no import that says which names it binds: ``#include "arrow/status.h"`` pastes the
header in, with the headers it includes in turn, and whatever they declare is in scope; what
a header declares is often defined in its source file (``arrow/status.cc``), which nothing
includes.  So a file's *scope* is the files it includes (an ``import`` row, ``name`` ``*``,
``module`` the path as written, mapped to files by ``ModulePaths``), theirs, three includes
deep, and each header's source file (``ModulePaths.companions``).  A use resolves, in order:

1. on a variable given a class in the same function (``s.ok()``, ``p->ok()`` with ``Status
   s``, ``Status* p``, ``auto p = std::make_shared<Status>()``: a ``binds`` row), or a field
   of the enclosing class: that class's member, in whatever file defines it (``.cc`` files
   define what headers declare), or its base classes';
2. a bare name (``ok()``) or one on ``this`` in a method: a member of the method's class, or
   of its bases, as C++ looks names up;
3. ``exact`` (the same file) or ``imported`` (the file's scope): a bare name's definitions
   in the innermost namespace around the use that has one (``arrow::io::f`` calling ``g()``
   finds ``arrow::io::g`` before ``arrow::g``), else any not in a class (a ``using
   namespace``); a qualified name's (``Status::OK()``, ``arrow::Status``, ``internal::f()``)
   whose qualified name ends with the qualifier and the name (``arrow.Status.OK``, in the
   canonical form), and then a member of a class so named that the scope defines, wherever
   the member is defined;
4. ``by-name``: every definition of the name in C, C++, CUDA and Objective-C of the source.

A bare name that is a variable of the function (a ``binds`` row: ``index_(index)`` with a
parameter ``DeviceIndex index``) is no use of a definition, and a name passed on (a
``value``) never a class's member (``size_(size)`` with ``int64_t size``); a method on a
variable of a standard library class (``data.size()`` with ``std::string_view data``)
resolves to nothing, not to a guess (one of a class the source does not define but names
by an alias, ``const owned_type& from``, is still guessed); a type written through a
namespace that defines no such class (``at::Device``, which PyTorch brings into ``at`` with
``using``) is the class of that name in the file's scope.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from codechunkd.storage.refnames import BY_NAME, EXACT, IMPORTED, ModulePaths, canonical

__all__ = ["INCLUDE_DEPTH", "CFamily", "CMemo"]

INCLUDE_DEPTH: Final = 3
"""How many includes deep a file's scope reaches (a file's own includes are the first)."""


@dataclass(slots=True)
class CMemo:
    """What C resolution works out once per graph, from its definitions and include rows
    alone (every question's graph shares it): without it, ``map`` of PyTorch's headers
    (1.0M reference rows) spent half its 109 s finding the same classes again."""

    scope: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    """Each file's scope (``_c_files``)."""
    includes: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """The files each file includes itself."""
    classes: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    """The definitions of each class asked about (``_c_classes``)."""


class CFamily:
    """The C and C++ part of the reference graph: what it reads of the graph's rows."""

    _src: list[str]
    _path: list[str]
    _csym: list[str]
    _kind: list[str]
    _name: list[str]
    _qual: list[str]
    _mod: list[str]
    _sym: list[str]
    _owner: list[str]
    _paths: ModulePaths
    _imports: dict[tuple[str, str], dict[str, list[int]]]
    _binds: dict[tuple[str, str, str, str], list[int]]
    _members: dict[tuple[str, str, str], list[int]]
    _by_src_name: dict[tuple[str, str, str], list[int]]
    _c: CMemo
    defs_by_name: dict[str, list[int]]

    def resolve(self, i: int) -> tuple[list[int], str]:
        raise NotImplementedError

    def _inherited(self, i: int, owner: str, name: str, depth: int) -> list[int]:
        raise NotImplementedError

    def _resolve_c(self, i: int) -> tuple[list[int], str]:
        """The definitions the C or C++ use row ``i`` can mean, and how (the module's
        docstring says in what order)."""
        name, src, path, kind = self._name[i], self._src[i], self._path[i], self._kind[i]
        if kind == "import":
            return [], ""  # an include names files, not a definition
        scoped = self._mod[i]  # the namespace or class written before ``::``, if any
        qual = scoped if kind == "binds" else self._qual[i]
        if qual.startswith("this->"):
            qual = qual[6:]  # ``this->buf_->size()``: the field ``buf_``
        if not qual and kind != "binds" and self._c_binds(i, name):
            return [], ""  # ``index_(index)``: a variable (a parameter) of that name
        if qual and not scoped and qual != "this":
            found = self._c_typed(i, qual, name)
            if found:
                return found, self._how(path, found)
            binds = self._c_binds(i, qual)
            if binds and all(self._mod[b].startswith("std") for b in binds):
                return [], ""  # ``std::string_view data``: ``data.size()`` is not the source's
        owner = self._owner[i].rpartition(".")[0]  # the class or namespace written in
        cls = owner.rpartition(".")[2]  # in its class, ``Circle`` is the class itself
        member = kind != "value"  # a method is not passed bare: ``size_(size)`` is a variable
        if qual in {"", "this"} and member and name != cls and self._c_classes(src, owner):
            found = self._c_members(src, owner, name) or self._inherited(i, owner, name, 0)
            if found:
                return found, self._how(path, found)
        defs = self._by_src_name.get((src, "c", name), [])
        named = defs
        if scoped:  # what is so named: ``std::move`` is none of the source's
            tail = f"{canonical(scoped)}.{name}"
            named = [j for j in defs if self._sym[j] == tail or self._sym[j].endswith("." + tail)]
        if not member:  # a function passed on (a callback), never a class's member
            named = [j for j in named if not self._c_classes(src, self._sym[j].rpartition(".")[0])]
        if not qual or scoped:
            scope = self._c_files(src, path)
            found = self._c_fit(src, path, scope, named, owner, scoped, name)
            if not found and scoped and kind in {"type", "binds", "inherit"}:
                # ``at::Device``, a class another namespace names with ``using``: the
                # class of that name in the scope
                found = self._c_fit(src, path, scope, defs, owner, "", name)
            if found:
                return found, self._how(path, found)
        # a guess among all (``uses_of`` narrows it by the form, ``_by_form``, sharing them)
        return (defs, BY_NAME) if named else ([], "")

    def _how(self, path: str, found: list[int]) -> str:
        return EXACT if all(self._path[j] == path for j in found) else IMPORTED

    def _c_fit(
        self,
        src: str,
        path: str,
        scope: frozenset[str],
        defs: list[int],
        owner: str,
        scoped: str,
        name: str,
    ) -> list[int]:
        """Of the definitions ``defs`` of ``name`` (so qualified, if ``scoped``), those in
        the use's file and scope that the name as written can mean; for a qualified name
        whose class is in the scope, its member wherever it is defined."""
        near = [j for j in defs if self._path[j] == path or self._path[j] in scope]
        if scoped:
            if near:
                return near
            cls = canonical(scoped)
            classes = self._c_classes(src, cls)
            if any(self._path[c] == path or self._path[c] in scope for c in classes):
                return self._c_members(src, cls, name)
            return []
        near = [j for j in near if self._sym[j].split(".")[-2:] != [name, name]]  # a constructor
        outer = owner.split(".") if owner else []
        for depth in range(len(outer), -1, -1):  # the innermost namespace first
            at = ".".join(outer[:depth])
            found = [j for j in near if self._sym[j].rpartition(".")[0] == at]
            if found:
                return found
        return [j for j in near if not self._c_classes(src, self._sym[j].rpartition(".")[0])]

    def _c_typed(self, i: int, var: str, name: str) -> list[int]:
        """``name`` on the variable ``var`` given a class in the use's function (or a field
        of an enclosing class, in the same file): the class's member, or a base's."""
        src = self._src[i]
        found: list[int] = []
        for b in self._c_binds(i, var):
            classes, how = self.resolve(b)
            if how == BY_NAME:
                continue
            for c in classes:
                cls = self._sym[c]
                found += self._c_members(src, cls, name) or self._inherited(c, cls, name, 0)
        return list(dict.fromkeys(found))

    def _c_binds(self, i: int, var: str) -> list[int]:
        """The ``binds`` rows of the variable ``var`` where use ``i`` is: its function's, else
        a field's of an enclosing class (in the same file)."""
        src, path = self._src[i], self._path[i]
        scope = self._csym[i]
        while scope:
            binds = self._binds.get((src, path, scope, var))
            if binds:
                return binds
            scope = scope.rpartition("::")[0]
        return []

    def _c_members(self, src: str, cls: str, name: str) -> list[int]:
        """Definitions of ``name`` that are members of the class ``cls`` (a canonical symbol,
        ``arrow.Status``), in any file: ``Status::ok`` defined in ``status.cc`` inside
        ``namespace arrow`` or after ``using namespace arrow`` (``Status.ok``)."""
        short = cls.rpartition(".")[2]
        out = []
        for j in self._members.get((src, short, name), ()):
            owner = self._sym[j][: -len(name) - 1]
            if owner == cls or owner.endswith("." + cls) or cls.endswith("." + owner):
                out.append(j)
        return out

    def _c_classes(self, src: str, sym: str) -> list[int]:
        """The definitions of the class ``sym`` (canonical, its namespaces or some of them:
        ``Status``, ``arrow.Status``) in ``src``; none for a namespace (it defines none)."""
        if not sym:
            return []
        got = self._c.classes.get((src, sym))
        if got is None:
            short = sym.rpartition(".")[2]
            got = self._c.classes[(src, sym)] = [
                j
                for j in self._by_src_name.get((src, "c", short), ())
                if self._sym[j] == sym or self._sym[j].endswith("." + sym)
            ]
        return got

    def _c_files(self, src: str, path: str) -> frozenset[str]:
        """The scope of ``path``: the files it includes, theirs, :data:`INCLUDE_DEPTH` deep,
        and each header's source file (its own too, for a header)."""
        key = (src, path)
        got = self._c.scope.get(key)
        if got is not None:
            return got
        seen = {path}
        frontier = [path]
        for _ in range(INCLUDE_DEPTH):
            nxt = []
            for file in frontier:
                for found in self._c_includes(src, file):
                    if found not in seen:
                        seen.add(found)
                        nxt.append(found)
            frontier = nxt
        for file in list(seen):
            seen |= self._paths.companions(src, file)
        seen.discard(path)
        got = self._c.scope[key] = frozenset(seen)
        return got

    def _c_includes(self, src: str, file: str) -> tuple[str, ...]:
        """The files ``file`` includes itself (its ``*`` import rows' paths, found)."""
        got = self._c.includes.get((src, file))
        if got is None:
            rows = self._imports.get((src, file), {}).get("*", ())
            found = {f for j in rows for f in self._paths.files(src, file, self._mod[j])}
            got = self._c.includes[(src, file)] = tuple(sorted(found))
        return got
