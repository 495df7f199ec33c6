"""How the reference graph finds the class of what a member is used on (``RefGraph`` of
storage/refgraph.py is a :class:`Typed`).

``ctx.invoke()`` means ``Context.invoke`` when the use's definition (or an enclosing one, or
the module) binds ``ctx`` to ``Context``: a ``binds`` row (``ctx: Context``,
``ctx = Context()``, Go's receivers, TypeScript's ``new``).  Besides:

- ``self.conn.send()`` (Python), ``this.conn.send()`` (TypeScript): ``self.conn`` bound in
  any method of the class (``self.conn = Connection()``, ``self.conn: Connection``), a
  field's declared class, a constructor's parameter property;
- ``s = open_session()``, ``with open_session() as s``, ``open_session().send()``,
  ``c = self.get()``, Go's ``u, err := t.Parse(s)``: what the function (or the method of
  the variable's class) says it gives: a ``binds`` row ``open_session()`` in the
  function's own chunk, from ``-> Session``, ``: Session`` or a Go result; a callee with no
  such row is taken for a class;
- ``Engine(cfg).run()``: the class called; ``Engine.run`` (a class of the same file, not a
  variable): its member.
"""

from __future__ import annotations

import threading
from typing import Final

from codechunkd.storage.refnames import BY_NAME, EXACT, IMPORTED

__all__ = ["MAX_WALK", "Typed", "callee"]

_TYPED_CALLS: Final = frozenset({"python", "typescript", "tsx"})
"""Languages whose ``binds`` rows give a call's result: a function named through a
module, or a method of the class's own (``self``, ``this``); any other qualifier is a
variable's method, which says nothing."""

MAX_WALK: Final = 12
"""How many resolutions deep one may go (``a = b.make()`` asks for ``b``'s class, which
asks for ``c``'s, …): past it a resolution gives nothing.  A resolution so cut short is
remembered with its depth, one that was not for good: every answer is a function of the
row and the depth alone (not of which name was asked first), a cycle ends, and variables
each given two others' results (branching in two at every step) cost rows x depth."""


_FIELD_STEPS: Final = 4
"""At most this many fields are followed down a Go qualifier (``a.b.c.d.e``)."""


class _Walking(threading.local):
    """This thread's walk through the graph (readers share a graph): how deep, and whether
    a resolution under way was cut short."""

    depth = 0
    cut = False


_WALK: Final = _Walking()

_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


def callee(qual: str) -> str | None:
    """The function a qualifier calls when it is one call, ``Engine(cfg)`` -> ``Engine``,
    ``mod.make()`` -> ``mod.make``; None for anything else (``a(x).b(y)``, ``x[0]``)."""
    head = 0
    while head < len(qual) and qual[head] in _NAME_CHARS:
        head += 1
    if head == 0 or head >= len(qual) or qual[head] != "(" or not qual.endswith(")"):
        return None
    depth = 0
    for k in range(head, len(qual)):
        depth += {"(": 1, ")": -1}.get(qual[k], 0)
        if depth == 0:
            return qual[:head] if k == len(qual) - 1 else None
    return None


class Typed:
    """The part of the reference graph that types a qualifier: what it reads of the graph."""

    _src: list[str]
    _path: list[str]
    _lang: list[str]
    _mod: list[str]
    _name: list[str]
    _sym: list[str]
    _csym: list[str]
    _kind: list[str]
    _qual: list[str]
    _line: list[int]
    _binds: dict[tuple[str, str, str, str], list[int]]
    _file_defs: dict[tuple[str, str], dict[str, list[int]]]
    uses_by_owner: dict[tuple[str, str, str], list[int]]

    _memo: dict[int | tuple[int, int], tuple[list[int], str]]
    _cut_short = False
    """Whether a resolution was cut short (remembered by row and depth)."""

    def resolve(self, i: int) -> tuple[list[int], str]:
        raise NotImplementedError

    def _resolve(self, i: int) -> tuple[list[int], str]:
        raise NotImplementedError

    def _walk(self, i: int) -> tuple[list[int], str]:
        """``_resolve(i)``, remembered (by row, or by row and depth when it was cut short
        at :data:`MAX_WALK`)."""
        walk = _WALK
        depth = walk.depth
        if depth >= MAX_WALK:
            walk.cut = True
            return [], ""
        if self._cut_short:
            found = self._memo.get((i, depth))
            if found is not None:
                return found
        outer, walk.cut, walk.depth = walk.cut, False, depth + 1
        try:
            found = self._resolve(i)
        finally:
            walk.depth = depth
        if walk.cut:
            self._memo[(i, depth)] = found
            self._cut_short = True
        else:
            self._memo[i] = found
        walk.cut = walk.cut or outer
        return found

    def _member_of(self, c: int, name: str) -> list[int]:
        raise NotImplementedError

    def _inherited(self, i: int, owner: str, name: str, depth: int) -> list[int]:
        raise NotImplementedError

    def _bound_in(self, i: int) -> tuple[str, ...]:
        """The scopes where the ``binds`` row ``i`` holds: its definition's, and for
        ``self.x`` bound in a method, the method's class (every method's ``self.x``)."""
        csym = self._csym[i]
        if self._qual[i].startswith(("self.", "this.")) and "." in csym:
            return csym, csym.rpartition(".")[0]
        return (csym,)

    def _bound_through(
        self, i: int, imports: dict[str, list[int]]
    ) -> tuple[str, tuple[list[int], str] | None]:
        """What the ``binds`` row ``i``'s class or function is looked up through, or its
        resolution: the module it is named through, when the file imports it
        (``http.ServeMux``); ``self`` for a method of the class's own (``x = self.make()``);
        ``""``: its bare name; for a method of a variable (``u, err := t.Parse(s)``,
        ``x = conn.make()``), the method, typed as the variable is (in Go, when that says
        nothing, the bare name: ``h := w.Header()`` is the package's ``Header``)."""
        module = self._mod[i]
        if module in imports or not module:
            return module, None
        if module in {"self", "cls", "this"} and self._lang[i] in _TYPED_CALLS:
            return module, None
        typed = self._typed(i, self._src[i], self._path[i], module, self._name[i])
        return "", typed if typed[0] or self._lang[i] in _TYPED_CALLS else None

    def _typed(self, i: int, src: str, path: str, var: str, name: str) -> tuple[list[int], str]:
        """``name`` on ``var``, a qualifier that is not a module the file imports: a member
        of the class ``var`` is bound to, is called, or names (see the module's doc)."""
        field = var[5:] if var.startswith("this.") else ""  # ``this.s``: also the field ``s``
        binds = self._scoped(i, src, path, (var, field) if field else (var,))
        typed = self._on(binds, path, name) if binds else ([], "")
        called = callee(var) if var.endswith(")") else None
        if not typed[0] and called is not None:  # ``Engine(cfg).run()``, ``make().run()``
            typed = self._on(self._call_rows(i, src, path, called), path, name)
        if not typed[0] and called is None and self._lang[i] == "go":
            typed = self._on(self._field_binds(i, src, path, var), path, name)
        if typed[0] or called is not None:
            return typed
        defs = self._file_defs.get((src, path))
        local = defs.get(var) if defs is not None else None
        if not local:
            return [], ""
        found = [j for c in local if c != i for j in self._member_of(c, name)]  # ``Engine.run``
        return (found, EXACT) if found else ([], "")

    def _scoped(self, i: int, src: str, path: str, names: tuple[str, ...]) -> list[int]:
        """The ``binds`` rows of ``names`` in the definition of the use row ``i``, else in
        the nearest enclosing one that has any (a class's field, the module's variable)."""
        scope: str | None = self._csym[i]
        while scope is not None:
            binds = [j for n in names for j in self._binds.get((src, path, scope, n), ())]
            if binds:
                return binds
            scope = scope.rpartition(".")[0] if scope else None
        return []

    def _field_binds(self, i: int, src: str, path: str, var: str) -> list[int]:
        """Go: the ``binds`` rows of the field ``var`` names on a variable (``s.conn``, in
        a method of ``func (s *Server)``): the field's declaration in the variable's struct
        (``conn *net.TCPConn``, a ``Server.conn`` row of the struct's chunk), in any file;
        field by field down a chain (``s.conn.rwc``: ``conn``'s struct's ``rwc``)."""
        head, *fields = var.split(".")
        if not 0 < len(fields) <= _FIELD_STEPS or not all(
            n.isidentifier() for n in (head, *fields)
        ):
            return []
        rows = self._scoped(i, src, path, (head,))
        for field in fields:
            typed, rows = rows, []
            for b in dict.fromkeys(typed):
                made, via = self.resolve(b)
                for c in [k for j in made for k in self._made(j)] if via != BY_NAME else ():
                    key = (self._src[c], self._path[c], self._sym[c], f"{self._sym[c]}.{field}")
                    rows += self._binds.get(key, [])
        return rows

    def _on(self, rows: list[int], path: str, name: str) -> tuple[list[int], str]:
        """``name`` in the classes the rows ``rows`` (binds or calls) resolve to, or in
        what the functions they resolve to return: the member's definitions, and how."""
        found: list[int] = []
        how = EXACT
        for b in rows:
            made, via = self.resolve(b)
            if via == BY_NAME:
                continue
            for c in [k for j in made for k in self._made(j)]:
                found += self._member_of(c, name)
                if not found:
                    found += self._inherited(c, self._sym[c], name, 0)
                if via == IMPORTED or any(self._path[j] != path for j in found):
                    how = IMPORTED
        return (list(dict.fromkeys(found)), how) if found else ([], "")  # once each

    def _made(self, c: int) -> list[int]:
        """What calling the definition row ``c`` gives: the classes its ``-> T`` names, or
        ``c`` itself (a class, or a function with no such annotation)."""
        key = (self._src[c], self._path[c], self._csym[c], f"{self._name[c]}()")
        if key not in self._binds:
            return [c]
        made: list[int] = []
        for b in self._binds[key]:
            classes, via = self.resolve(b)
            made += classes if via != BY_NAME else []
        return made

    def _call_rows(self, i: int, src: str, path: str, called: str) -> list[int]:
        """The call row of ``called`` (``mod.make``) that row ``i``'s qualifier holds: the
        nearest before it in its definition."""
        qual, _, name = called.rpartition(".")
        rows = [
            j
            for j in self.uses_by_owner.get((src, path, self._csym[i]), ())
            if self._kind[j] == "call"
            and self._name[j] == name
            and self._qual[j] == qual
            and self._line[j] <= self._line[i]
        ]
        return [max(rows, key=lambda j: (self._line[j], j))] if rows else []
