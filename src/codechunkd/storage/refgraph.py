"""Which definitions a used name can mean: the reference graph of an index, in memory.

Built from the ``references`` table (storage/references.py) once per table version: a
reader that keeps it (an MCP server, a daemon) answers from dicts, and rebuilds it when a
writer has committed since.  A name used in a file is resolved, in order:

1. ``exact``: a definition of that name in the same file, for a bare name or one on
   ``self``/``cls``/``this``/``Self``;
2. ``imported``: through the file's imports: the module path is mapped to files of the
   same source (Python dotted and relative modules, TS/JS relative paths and index files,
   packages by the name their ``package.json`` declares and the paths a ``tsconfig.json``
   maps, never Node's own ``path`` or ``fs``; a default import by the name it is given,
   else as the module's default export (an ``export`` row);
   Go package directories, Rust ``crate::``/``super::`` paths and ``mod.rs``, Java
   packages; PHP by the namespace a definition declares), and the name looked up there,
   following re-exports (an ``__init__.py`` or ``index.ts`` that imports it in turn) up to
   three hops; in Go, Java and PHP a bare name is also looked up in the file's own package
   (its directory), and a Go variable's class named through a package
   (``m := &http.ServeMux{}``, a ``binds`` row's ``module``) in it;
3. ``by-name``: every definition of that name in the source, in a language the file's
   can call (``refnames.family``), when neither says more (``storage/refguess.py``: not for
   a bare Python name, a builtin or a local, nor for a value, ``MAX = 3``).
   A name on a module the file imports but that the source does not hold (``os.path``,
   ``fmt``) resolves to nothing.

C and C++ names resolve through ``#include`` (storage/refc.py), PHP names through the
namespaces definitions declare (storage/refphp.py), C# names by full name (refcsharp.py);
what a member is used on is typed by storage/reftyped.py (variables' classes, calls'
results).
"""

from __future__ import annotations

import copy
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Final, TypeVar

from codechunkd.chunking.predeclared import GO_BUILTIN
from codechunkd.chunking.refs_package import PACKAGE
from codechunkd.storage.refc import CFamily, CMemo
from codechunkd.storage.refcsharp import CSharpNames
from codechunkd.storage.references import DEFINITION, VALUE, Definition, Use
from codechunkd.storage.refguess import BARE_MEMBERS, Forms, Guesses, owner_name
from codechunkd.storage.refnames import (
    BY_NAME,
    CASELESS,
    EXACT,
    IMPORTED,
    SELF,
    ModulePaths,
    canonical,
    family,
    in_same_module,
    of_class,
    php_class,
    short_name,
    used_name,
)
from codechunkd.storage.refphp import PhpMemo, PhpNames
from codechunkd.storage.reftyped import Typed

__all__ = ["BY_NAME", "EXACT", "IMPORTED", "SKELETON", "Definition", "RefGraph", "Use"]

_K = TypeVar("_K")

_ORDER: Final = {EXACT: 0, IMPORTED: 1, BY_NAME: 2}
_SUPER: Final = frozenset({"super()", "super", "parent", "SUPER"})
_PACKAGE_SCOPED: Final = frozenset({"go", "java", "php"})
#: Files whose wildcard imports pass names on: a JS/TS module (``export * from``) and a
#: package's ``__init__.py`` (``from .x import *``).
_REEXPORTS: Final = (".ts", ".tsx", ".mts", ".cts", ".js", ".mjs", ".cjs", ".jsx", "__init__.py")
COLUMNS: Final = (
    "source path language chunk_id chunk_symbol kind name qualifier module line".split()  # noqa: SIM905
)


_USES: Final = frozenset({"call", "inherit", "type", "value", "import"})
"""The rows a question about uses reads unless it names kinds: not ``binds`` (the call or
type that gave the variable its class says it)."""
EXPORT: Final = "export"
"""A JS/TS module's default export, by name (``export default baz``, ``module.exports = baz``):
what a default import or a ``require`` of the module means when not called by that name."""
SKELETON: Final = (DEFINITION, "import", "inherit", PACKAGE, EXPORT)
"""The rows that resolve a use: every one of them is read for any question."""
_ATTRS: Final = "_src _path _lang _chunk _csym _kind _name _qual _mod _line".split()  # noqa: SIM905
"""The graph's list of each of :data:`COLUMNS`, in their order."""


def _joined(index: dict[_K, list[int]], added: dict[_K, list[int]]) -> dict[_K, list[int]]:
    """``index`` and the rows ``added``, in a new dict: its lists stay (others share them)."""
    out = dict(index)
    for key, rows in added.items():
        out[key] = [*index.get(key, ()), *rows]
    return out


class RefGraph(Typed, Guesses, CFamily, PhpNames, CSharpNames):
    """The resolved reference graph of every source of one index (a table version)."""

    def __init__(
        self,
        version: int,
        columns: dict[str, list[object]],
        *,
        files: set[tuple[str, str]] | None = None,
    ) -> None:
        """The graph of the rows ``columns``; ``files``: (source, path) pairs that have no
        row among them (the indexed files, for a graph of some of the table's rows)."""
        self.version = version
        c = columns
        self._n = len(c["name"])
        self._src: list[str] = c["source"]  # type: ignore[assignment]
        self._path: list[str] = c["path"]  # type: ignore[assignment]
        self._lang: list[str] = c["language"]  # type: ignore[assignment]
        self._chunk: list[str] = c["chunk_id"]  # type: ignore[assignment]
        self._csym: list[str] = c["chunk_symbol"]  # type: ignore[assignment]
        self._kind: list[str] = c["kind"]  # type: ignore[assignment]
        self._name: list[str] = c["name"]  # type: ignore[assignment]
        self._qual: list[str] = c["qualifier"]  # type: ignore[assignment]
        self._mod: list[str] = c["module"]  # type: ignore[assignment]
        self._line: list[int] = c["line"]  # type: ignore[assignment]
        self._canon: dict[str, str] = {}  # what resolution reads: symbols in one form
        canon = self._canon
        for q, k, n in zip(self._qual, self._kind, self._name, strict=True):
            if k == DEFINITION and q not in canon:
                canon[q] = canonical(q, n)
        self._sym: list[str] = [
            canon[q] if k == DEFINITION else q for q, k in zip(self._qual, self._kind, strict=True)
        ]
        self._owner: list[str] = [
            canon[q] if q in canon else canon.setdefault(q, canonical(q)) for q in self._csym
        ]
        self.defs_by_name: dict[str, list[int]] = defaultdict(list)
        self._by_src_name: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        self._memo: dict[int | tuple[int, int], tuple[list[int], str]] = {}
        self._module_memo: dict[tuple[str, str, str, str, int], list[int]] = {}
        self._form_cache: dict[tuple[str, str, str], Forms] = {}
        self._members: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        self._package_defs: dict[tuple[str, str, str], list[int]] = {}  # ``_in_package``
        self._c = CMemo()  # ``CFamily``'s: scopes, includes, classes
        self._php = PhpMemo()  # ``PhpNames``'s: scopes
        self.derived: dict[object, Any] = {}  # what readers compute from the whole graph
        self.uses_by_name: dict[str, list[int]] = defaultdict(list)
        self.uses_by_owner: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        self._file_defs: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self._imports: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self._exports: dict[tuple[str, str], list[str]] = defaultdict(list)  # default ones
        self._defaults: dict[int, list[str]] = {}  # import row -> its module's default exports
        self._aliases: dict[str, set[str]] = defaultdict(set)  # name -> local names bound
        self._binds: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
        self._bases: dict[tuple[str, str], dict[str, None]] = defaultdict(dict)  # as written
        packages = self._index_rows()
        files = {*zip(self._src, self._path, strict=True), *(files or ())}
        self._paths = ModulePaths(files, packages)
        self._alias_default_imports()

    def _index_rows(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """Each row into the dicts resolution reads; returns what ``package.json``s declare."""
        packages: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        for i in range(self._n):
            key, name, kind = (self._src[i], self._path[i]), self._name[i], self._kind[i]
            if kind == DEFINITION:
                self.defs_by_name[name].append(i)
                if self._mod[i] != VALUE:  # ``MAX = 3`` is no by-name guess's: imported or here
                    self._by_src_name[(self._src[i], family(self._lang[i]), name)].append(i)
                parts = self._sym[i].split(".")
                if len(parts) > 1:
                    self._members[(self._src[i], parts[-2], name)].append(i)
                self._file_defs[key][name].append(i)
            elif kind == PACKAGE:  # what a ``package.json`` declares (chunking/refs_package.py)
                packages[(self._src[i], name)].append((self._path[i], self._mod[i]))
            elif kind == EXPORT:
                self._exports[key].append(name)
            else:
                self.uses_by_name[name].append(i)
                self.uses_by_owner[(*key, self._csym[i])].append(i)
                for scope in self._bound_in(i) if kind == "binds" else ():
                    self._binds[(*key, scope, self._qual[i])].append(i)
                if kind == "inherit":
                    self._bases[(self._src[i], self._heir(i))][name] = None
                if kind == "import":
                    self._imports[key][name].append(i)
                    if self._qual[i] and self._qual[i] != name:
                        self._aliases[self._qual[i]].add(name)
        return packages

    def _alias_default_imports(self) -> None:
        """Each JS/TS default import or ``require``'s module's default exports (``_bound``
        reads them), and one called by another name (``import foo from './bar'`` of
        ``export default function baz``) an alias, as ``import {baz as foo}`` is: ``refs
        baz`` reads the uses of ``foo``."""
        if not self._exports:
            return
        for (src, path), names in self._imports.items():
            for local, rows in names.items():
                for j in rows:
                    js = family(self._lang[j]) == "js" and self._mod[j]
                    if not js or self._qual[j] not in {"default", ""}:
                        continue
                    files = sorted(self._paths.files(src, path, self._mod[j]))
                    self._defaults[j] = [e for f in files for e in self._exports.get((src, f), ())]
                    for exported in self._defaults[j]:
                        self._aliases[exported].add(local)  # itself too: no other name

    def _heir(self, i: int) -> str:
        """The class of base row ``i``: its chunk's, or the Perl package it names."""
        perl = self._lang[i] == "perl" and self._mod[i]
        return canonical(self._mod[i]) if perl else self._owner[i]

    def with_uses(self, columns: dict[str, list[object]]) -> RefGraph:
        """This graph and the use rows ``columns`` (no definition, import or base) that a
        question is about (storage/refquery.py).  This graph stays as it was, and shares
        what those rows cannot change: definitions, imports, modules, walks through them."""
        g = copy.copy(self)
        for attr, column in zip(_ATTRS, COLUMNS, strict=True):
            setattr(g, attr, getattr(self, attr) + columns[column])
        g._n = len(g._name)
        new = range(self._n, g._n)
        g._sym = self._sym + [g._qual[i] for i in new]
        g._owner = self._owner + [
            self._canon.get(q) or self._canon.setdefault(q, canonical(q))
            for q in (g._csym[i] for i in new)
        ]
        g._memo, g.derived = {}, {}  # rows past this graph's own are another question's
        by_name: dict[str, list[int]] = defaultdict(list)
        by_owner: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        binds: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
        for i in new:
            kind = g._kind[i]
            if kind in SKELETON:
                raise ValueError(f"a {kind} row is not a use a question adds")
            key = (g._src[i], g._path[i])
            by_name[g._name[i]].append(i)
            by_owner[(*key, g._csym[i])].append(i)
            if kind == "binds":
                for scope in g._bound_in(i):
                    binds[(*key, scope, g._qual[i])].append(i)
        g.uses_by_name = _joined(self.uses_by_name, by_name)
        g.uses_by_owner = _joined(self.uses_by_owner, by_owner)
        g._binds = _joined(self._binds, binds)
        return g

    # -- rows as values ---------------------------------------------------

    def definition(self, i: int) -> Definition:
        return Definition(
            chunk_id=self._chunk[i],
            source=self._src[i],
            path=self._path[i],
            language=self._lang[i],
            symbol=self._qual[i],
            line=self._line[i],
        )

    def _use(self, i: int, target: Definition | None, how: str) -> Use:
        return Use(
            chunk_id=self._chunk[i],
            chunk_symbol=self._csym[i],
            source=self._src[i],
            path=self._path[i],
            line=self._line[i],
            kind=self._kind[i],
            name=self._name[i],
            qualifier=self._qual[i],
            target=target,
            how=how,
        )

    def aliases(self, name: str) -> set[str]:
        """The local names an import binds ``name`` to (``import x as y``: ``y``)."""
        return set(self._aliases.get(name, ()))

    @property
    def rows(self) -> int:
        return self._n

    # -- resolution -------------------------------------------------------

    def definitions(self, name: str, sources: set[str] | None = None) -> list[Definition]:
        """Definitions of ``name``: a bare name matches the last part of a qualified one,
        a qualified name (``Session.request``) its end, or else the member its class
        inherits (``SmallVectorImpl::push_back``: the nearest base's)."""
        rows = self._named(name, sources)
        short = short_name(name)
        if not rows and name != short:
            owner = name[: -len(short)].rstrip(".:")
            for j in self._named(owner, sources):
                rows += self._inherited(j, self._sym[j], short, 0)
        return sorted(map(self.definition, dict.fromkeys(rows)), key=lambda d: (d.path, d.line))

    def _named(self, name: str, sources: set[str] | None) -> list[int]:
        """The definition rows ``name`` names, in ``sources`` (any, for None)."""
        short = short_name(name)
        asked = canonical(name, short)
        rows = self.defs_by_name.get(short, [])
        if short != short.lower():  # ``CMAKE_PUSH_CHECK_STATE``: CMake's lower-case rows
            lower = self.defs_by_name.get(short.lower(), ())
            rows = rows + [j for j in lower if self._lang[j] in CASELESS]
        return [
            i
            for i in rows
            if (sources is None or self._src[i] in sources)
            and (
                name == short
                or (q := self._qual[i]) == name
                or q.endswith(("." + name, "::" + name))
                or (cq := self._sym[i]) == asked
                or cq.endswith("." + asked)
            )
        ]

    def resolve(self, i: int) -> tuple[list[int], str]:
        """The definition rows the use row ``i`` can mean, and how it was resolved
        (remembered: the graph is of one table version)."""
        found = self._memo.get(i)
        return found if found is not None else self._walk(i)

    def _resolve(self, i: int) -> tuple[list[int], str]:
        name, src, path = self._name[i], self._src[i], self._path[i]
        imports = self._imports.get((src, path), {})
        if self._unmeant(i, imports):
            return [], ""
        if family(self._lang[i]) == "c":  # C, C++: includes and scopes (storage/refc.py)
            return self._resolve_c(i)
        if self._lang[i] == "csharp":  # full names, scope by scope (storage/refcsharp.py)
            return self._resolve_cs(i)
        qual, done = (
            self._bound_through(i, imports) if self._kind[i] == "binds" else (self._qual[i], None)
        )
        if done is not None:  # a ``binds`` row's: a method's result, on a variable
            return done
        if self._kind[i] == "import":
            found = self._bound(i, src, path, name)
            return (found, IMPORTED) if found else ([], "")
        local = self._file_defs.get((src, path), {}).get(name, [])
        if local and not qual and self._lang[i] not in BARE_MEMBERS:
            # a member is not a bare name, a function nested here is (Go has none: ``string``
            here = self._owner[i] if self._lang[i] != "go" else ""  # is never ``b.string``)
            local = [
                j
                for j in local
                if "." not in self._sym[j]
                or self._sym[j].split(".")[:-1] == here.split(".")
                or (self._sym[j] == here and not of_class(here))  # a nested function's recursion
                or in_same_module(self._lang[i], self._owner[i], self._sym[j], self._qual[j])
            ]
        if qual in _SUPER:  # the base class's, never the overriding one here
            inherited = self._inherited(i, self._owner[i].rpartition(".")[0], name, 0)
            if inherited:
                same = all(self._path[j] == path for j in inherited)
                return inherited, EXACT if same else IMPORTED
        elif local and qual in SELF:
            owner = self._owner[i].rpartition(".")[0]
            mine = [j for j in local if owner and self._sym[j].startswith(owner + ".")]
            mine = [j for j in mine if self._sym[j].rpartition(".")[0] == owner] or mine
            while not qual and not mine and "." in owner:  # Java: the nearest class that has it
                owner = owner.rpartition(".")[0]
                mine = [j for j in local if self._sym[j].rpartition(".")[0] == owner]
            if mine or not qual or not owner:
                return mine or local, EXACT
        if qual in SELF and qual:
            inherited = self._inherited(i, self._owner[i].rpartition(".")[0], name, 0)
            if inherited:
                same = all(self._path[j] == path for j in inherited)
                return inherited, EXACT if same else IMPORTED
        if not qual:
            found = []
            for j in imports.get(name, ()):
                found += self._bound(j, src, path, name)
            if self._lang[i] == "php":  # ``require``d files (storage/refphp.py)
                found += self._php_required(src, path, name)
            else:
                for j in imports.get("*", ()):
                    found += self._in_module(src, path, self._mod[j], name, 0)
            if not found and self._lang[i] in _PACKAGE_SCOPED:
                found = self._in_package(src, path, name)
            if found:
                return found, IMPORTED
            if imports.get(name):
                return [], ""  # imported from outside the source
        else:
            typed = ([], "") if self._kind[i] == "binds" else self._typed(i, src, path, qual, name)
            if typed[0]:  # (a ``binds`` row's qualifier here is a package, not a variable)
                return typed
            head = re.split(r"\.|::", qual, maxsplit=1)[0]
            bound = imports.get(qual) or imports.get(head)
            if bound:
                rest = qual[len(head) :].lstrip(".:") if qual not in imports else ""
                found = [k for j in bound for k in self._through(j, src, path, rest, name)]
                return (found, IMPORTED) if found else ([], "")
            if self._lang[i] == "php":  # ``vfsStream::create()``, ``new \google\net\Decoder()``
                found = self._php_qualified(src, path, qual, name)
                if found:
                    return found, self._how(path, found)
        return self._guess(i, qual)

    def _unmeant(self, i: int, imports: dict[str, list[int]]) -> bool:
        """Whether the use row ``i`` can mean no definition: none has its name and no
        import binds it, or it is a variable of the definition it is in (``x = f()``,
        ``x: T``: a bare ``x`` there is not the module's ``x``; in module code it is: a
        name rebound, ``helper = wrap(helper)``)."""
        name, kind = self._name[i], self._kind[i]
        if kind == PACKAGE:  # a package's name, not a use (``@npmcli/arborist``: the key of
            return True  # a ``dependencies`` object in another ``package.json`` is no meaning)
        if not self.defs_by_name.get(name) and kind != "import" and name not in imports:
            return True
        if self._lang[i] == "go" and not self._qual[i] and name in GO_BUILTIN:  # ``len(b)``:
            go = self._by_src_name.get((self._src[i], "go", name), ())  # Go's own, unless a
            return all("." in self._sym[j] for j in go)  # function of the source hides it
        if kind in {"import", "binds"} or self._qual[i] or not self._csym[i]:
            return False
        return (self._src[i], self._path[i], self._csym[i], name) in self._binds

    def _through(self, j: int, src: str, path: str, rest: str, name: str) -> list[int]:
        """``name`` on what the import row ``j`` binds (``rest``: the qualifier's path after
        the bound name, ``ast.nodes`` -> ``nodes``): in the module it names, else a member
        of the class it imports (or re-exports)."""
        module, original = self._mod[j], self._original(j)
        sep = "::" if "::" in module or self._lang[j] == "rust" else "."
        target = module
        if original:
            target = f"{module}{sep}{original}" if module else original
        if rest:
            target = f"{target}{sep}{rest.replace('.', sep)}"
        found = self._in_module(src, path, target, name, 0)
        if original and not found:  # a class imported by name: its methods
            found = [
                k
                for k in self._in_module(src, path, module, name, 0)
                if self._sym[k].endswith(f"{original}.{name}")
            ]
        if original and not found and not rest:  # re-exported: where it is; or its base's
            for c in self._in_module(src, path, module, original, 0):
                found += self._member_of(c, name) or self._inherited(c, self._sym[c], name, 0)
        if not found and not rest and self._qual[j] == "default":  # ``export default {…}``:
            found = self._in_module(src, path, module, name, 0)  # ``utils.isArray``, the module's
        return found

    def _bound(self, j: int, src: str, path: str, name: str) -> list[int]:
        """What the import row ``j`` binds ``name`` to in its module; for a JS/TS default
        import or a ``require`` that does not call it by its name (``import foo from
        './bar'`` of ``export default function baz``), the module's default export."""
        found = self._in_module(src, path, self._mod[j], self._original(j) or name, 0)
        for exported in () if found else self._defaults.get(j, ()):
            found += self._in_module(src, path, self._mod[j], exported, 0)
        return list(dict.fromkeys(found))

    def _original(self, j: int) -> str:
        """The name the import row ``j`` binds in its module (empty: the module itself).  A
        JS/TS default import's is its local name: ``import AxiosError from './AxiosError.js'``
        means what ``export default AxiosError`` (or ``export default class AxiosError``)
        exports, which by convention the importer calls by that name."""
        original = self._qual[j]
        if original == "default" and family(self._lang[j]) == "js":
            return self._name[j]
        return original

    def _member_of(self, c: int, name: str) -> list[int]:
        """Definitions of ``name`` that are members of the class defined by row ``c``."""
        cls = self._sym[c]
        found = [
            j
            for j in self._members.get((self._src[c], cls.rpartition(".")[2], name), ())
            if self._sym[j] == f"{cls}.{name}"
        ]  # in the class's file, else in another file of its package (Go) or crate (Rust)
        here = [j for j in found if self._path[j] == self._path[c]]
        if here or self._lang[c] not in {"go", "rust"}:
            return here
        if self._lang[c] == "go":
            folder = posixpath.dirname(self._path[c])
            return [j for j in found if posixpath.dirname(self._path[j]) == folder]
        return found

    def _inherited(self, i: int, owner: str, name: str, depth: int) -> list[int]:
        """Definitions of ``name`` in the base classes of ``owner`` (by their names, in row
        ``i``'s source and language family), nearest first, up to four levels: ``self.x()``
        in a subclass calls the base's ``x``.  Breadth first, each class once, at most 20
        classes of one name."""
        src = self._src[i]
        for bases in self._base_levels(src, family(self._lang[i]), owner, 4 - depth):
            found = [j for base in bases for j in self._members.get((src, base, name), ())]
            if found:
                return found
        return []

    def _in_package(self, src: str, path: str, name: str) -> list[int]:
        """A bare name in a Go or Java package or a PHP namespace: the functions and types
        (not Go methods; PHP classes only) of ``name`` in the folder of ``path``, filed by
        folder once and shared."""
        if not self._package_defs and self.defs_by_name:
            by_folder: dict[tuple[str, str, str], list[int]] = defaultdict(list)
            for defs in self.defs_by_name.values():
                for j in defs:
                    if (self._lang[j] != "go" or "." not in self._sym[j]) and (
                        self._lang[j] != "php" or php_class(self._name[j])
                    ):
                        folder = self._path[j].rpartition("/")[0]  # a relative git path
                        by_folder[(self._src[j], folder, self._name[j])].append(j)
            for found in by_folder.values():
                found.sort()  # the table's order, as ``defs_by_name`` has it
            self._package_defs.update(by_folder)  # whole lists: another thread's are equal
        return self._package_defs.get((src, path.rpartition("/")[0], name), [])

    def _in_module(self, src: str, path: str, module: str, name: str, depth: int) -> list[int]:
        """Definitions of ``name`` in the files of ``module``, following re-exports, each
        once.  Remembered, and the lists shared (callers never change them): files that
        import or re-export each other made the walk exponential in its hops (40 files
        named ``a.py`` each doing ``from a import f`` took minutes)."""
        if depth > 3 or not module:
            return []
        key = (src, path, module, name, depth)
        got = self._module_memo.get(key)
        if got is None:
            got = self._module_memo[key] = self._find_in_module(src, path, module, name, depth)
        return got

    def _find_in_module(self, src: str, path: str, module: str, name: str, depth: int) -> list[int]:
        if path.endswith(".php"):  # a namespace is what a file declares (storage/refphp.py)
            return self._php_module(src, path, module, name)
        found = []
        for file in sorted(self._paths.files(src, path, module)):
            defs = self._file_defs.get((src, file), {}).get(name)
            if defs:
                found += defs
                continue
            imports = self._imports.get((src, file), {})
            for j in imports.get(name, ()):
                original = self._original(j) or name
                found += self._in_module(src, file, self._mod[j], original, depth + 1)
            if not found and file.endswith(_REEXPORTS):  # ``export * from``, an index file
                for j in imports.get("*", ()):  # passes on what a module exports: no members
                    sub = self._in_module(src, file, self._mod[j], name, depth + 1)
                    found += [k for k in sub if "." not in self._sym[k]]
        # the module's own name, not a member of its classes named so (``http.Request``:
        plain = [j for j in found if "." not in self._sym[j]]  # not ``Response.Request``)
        return list(dict.fromkeys(plain or found))

    # -- queries ----------------------------------------------------------

    def uses_of(self, targets: list[Definition], kinds: set[str] | None = None) -> list[Use]:
        """Uses that resolve to one of ``targets`` (best answer of each use only)."""
        if not targets:
            return []
        wanted = {(d.chunk_id, d.symbol) for d in targets}
        classes = {(d.source, owner_name(d.symbol)) for d in targets}
        all_asked: dict[int, bool] = {}  # id of a shared list of meanings -> all wanted
        by_name = {(d.source, used_name(d.symbol, d.language)): d for d in targets}
        out = []
        names = {used_name(d.symbol, d.language) for d in targets}
        names |= {a for n in names for a in self._aliases.get(n, ())}  # import x as y
        for name in names:
            for i in self.uses_by_name.get(name, ()):
                if self._kind[i] not in (kinds or _USES):
                    continue
                rows, how = self.resolve(i)
                if how == BY_NAME:  # a guess: only when every meaning left is a target (or
                    # overrides one: a call of an ``…Executor``'s ``start`` is a use of the base's)
                    meant = self._by_form(i, rows)
                    d = by_name.get((self._src[i], self._name[i]))
                    asked = all_asked.get(id(meant))
                    if asked is None:
                        asked = all_asked[id(meant)] = bool(meant) and all(  # or overrides
                            (self._chunk[j], self._qual[j]) in wanted or self._overrides(j, classes)
                            for j in meant
                        )
                    if d is not None and asked:
                        out.append(
                            self._use(i, d if len(meant) > 1 else self.definition(meant[0]), how)
                        )
                    continue
                for j in rows:
                    if (self._chunk[j], self._qual[j]) in wanted:
                        out.append(self._use(i, self.definition(j), how))
                        break
        out.sort(key=lambda u: (_ORDER[u.how], u.path, u.line))
        return out

    def uses_in(self, defs: Iterable[Definition], kinds: set[str] | None = None) -> list[Use]:
        """What the definitions use (all the chunks of a split one), each name resolved
        (unresolved names included, ``how=""``)."""
        out = []
        for d in defs:
            for i in self.uses_by_owner.get((d.source, d.path, d.symbol), ()):
                if self._kind[i] not in (kinds or _USES):
                    continue
                rows, how = self.resolve(i)
                if not rows:
                    out.append(self._use(i, None, ""))
                for j in rows:
                    out.append(self._use(i, self.definition(j), how))
        return out
