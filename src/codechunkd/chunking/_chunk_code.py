"""The syntax-aware splitter: definitions as units, cAST recursion for what is too big.

The splitter never copies text around: it chooses *cut points* in the file.  A
region (the whole file, a class body, an oversized node) is tiled by
segments that start at a unit's first byte; each segment becomes one leaf
piece, trimmed of surrounding whitespace.  Every byte of the region lies in
exactly one segment, so the coverage invariant holds by construction, and a
piece's text is always an exact span of the file.

Units are the children of the region's node (read by ``_units.UnitReader``).  A
definition (with its leading comments and decorators) is a unit of its own; everything
else is glue, merged greedily with its neighbours up to the budget.  A unit over the budget
is split at its own children, recursively (cAST); a node without children
is split at line breaks, and a single line at whitespace.

The recursion is driven by an explicit stack, so deep nesting never reaches
Python's recursion limit; nor does it cost more than linear time and memory: a scope
keeps the innermost ``_MAX_SCOPE`` definitions, and a long span's size is read from
running counts over the file, not from the span.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, TypeGuard

from tree_sitter import Node

from codechunkd.chunking._units import (
    Unit,
    UnitReader,
    closing,
    has_member_definitions,
)
from codechunkd.chunking.cuts import line_cuts, nws_size, truncate
from codechunkd.chunking.names import name_of
from codechunkd.chunking.rules import DefSpec, Rules, body_of
from codechunkd.chunking.signatures import signature_bytes

__all__ = ["Anchor", "CodeSplitter", "Piece"]

# Enclosing definitions kept in a scope, and so in a qualified symbol (deep data nests).
# Every use of a scope reads its last entries only (the symbol, a method's class, the
# context header's last 4), so a deeper one is cut to this: a piece's scope is then
# O(1), not the whole chain (20,000 nested functions held 200 million entries).
_MAX_SCOPE: Final = 8
#: A glue piece of at most this many counted characters after a definition joins it.
TINY: Final = 40
_POD_HEADING: Final = re.compile(rb"=head\d[ \t]+([^\n]+)")
"""A POD heading: documentation after it, up to the next, is its section."""
_MAX_TITLE: Final = 200
_SECTION_BACK: Final = 65536


Scope = tuple[tuple[str, str, str], ...]
"""Enclosing definitions, outermost first: (kind, name, mode); the innermost _MAX_SCOPE."""


@dataclass(slots=True, eq=False)
class Anchor:
    """A definition split over several pieces: its first glue piece will stand for it."""

    kind: str
    symbol: str
    defn: Node
    name: str
    comments: tuple[Node, ...]
    parent: Piece | Anchor | None
    scope: Scope
    target: Piece | None = None
    parts: int = 0


@dataclass(slots=True, eq=False)
class Piece:
    """A chunk before its text, lines and ids are computed."""

    start: int
    end: int
    kind: str
    symbol: str
    scope: Scope
    parent: Piece | Anchor | None
    defn: Node | None = None
    comments: tuple[Node, ...] = ()
    name: str = ""
    synthetic_text: str | None = None
    part: int = 0
    names: tuple[str, ...] = ()
    cid: str | None = None
    """The chunk id, once known (``None`` for a piece that is only whitespace)."""


@dataclass(slots=True)
class _Ctx:
    scope: Scope
    parent: Piece | Anchor | None
    glue_kind: str
    glue_symbol: str


@dataclass(slots=True, eq=False)
class _Seg:
    kind: str  # "glue" or "def"
    units: list[Unit] = field(default_factory=list)
    size: int = 0


class CodeSplitter(UnitReader):
    """Splits one parsed file into :class:`Piece` objects (see the module docstring)."""

    def __init__(
        self,
        src: bytes,
        rules: Rules,
        budget: int,
        *,
        merge_siblings: bool,
        plain_kinds: dict[int, bool] | None = None,
    ) -> None:
        """``plain_kinds``: see :class:`UnitReader`."""
        super().__init__(src, rules, budget, plain_kinds)
        self.merge = merge_siblings or rules.merge_defs
        self.out: list[Piece] = []
        self._stack: list[tuple[_Seg | None, int, int, _Ctx]] = []  # (seg, a, b, ctx) to do
        self._prefixes: dict[Scope, str] = {}  # scope -> its qualified name
        self._declared: dict[int, str] = {}  # a scope statement's start -> the scope's name

    # -- entry points -----------------------------------------------------------------

    def split_tree(self, root: Node, *, kind: str = "module") -> list[Piece]:
        """Pieces of the whole file, in file order (synthetic pieces before their members)."""
        ctx = _Ctx((), None, kind, "")
        n = len(self.src)
        children = root.children
        if not children:
            self._lines(0, n, ctx)
        elif self.rules.scope_statements:
            parts = self._scope_statements(self._units(children), n, ctx)
            for units, a, b, part_ctx, head in parts:
                self._layout(units, a, b, part_ctx, header_end=head)
                self._run()
            self._name_declared()
        else:
            self._layout(self._units(children), 0, n, ctx)
        self._run()
        return self.out

    def _scope_statements(
        self, units: list[Unit], n: int, base: _Ctx
    ) -> list[tuple[list[Unit], int, int, _Ctx, int]]:
        """The top level cut where a scope without a body begins (``namespace App;``,
        ``package Foo;``), each part with its scope and where its statement ends (its
        header, -1 for none: see ``_layout``): the definitions after such a statement
        are its members, up to the next (``Rules.scope_statements``).  What comes before
        the first definition stays with the statement after it (``<?php``); a scope with a
        body (Perl's ``package Baz { … }``) is not a member of the statement before it."""
        parts: list[tuple[list[Unit], int, int, _Ctx, int]] = []
        begin, lo, ctx, head = 0, 0, base, -1
        defined = False  # whether the part so far holds a definition

        def cut(i: int, at: int, then: _Ctx, then_head: int = -1) -> None:
            nonlocal begin, lo, ctx, head, defined
            if i > begin:
                parts.append((units[begin:i], lo, at, ctx, head))
            begin, lo, ctx, head, defined = i, at, then, then_head, False

        for i, u in enumerate(units):
            node, spec = u.node, u.spec
            if u.defn is not None:
                if ctx is not base and spec is not None and spec.mode == "scope" and spec.kind:
                    inside = ctx
                    cut(i, u.start, base)
                    cut(i + 1, u.end, inside)
                else:
                    defined = True
                continue
            if node is None or not node.is_named:
                continue
            spec = self.rules.spec(node)
            if spec is None or spec.mode != "scope" or not spec.kind:
                continue
            name = name_of(node, self.src)
            if name:
                self._declared[u.start] = name
            then = _Ctx(((spec.kind, name, spec.mode),) if name else (), None, base.glue_kind, "")
            if defined:
                cut(i, u.start, then, u.end)
            else:  # nothing defined yet: what came before (``<?php``) joins the statement's part
                ctx, head = then, u.end
        parts.append((units[begin:], lo, n, ctx, head))
        return parts

    def _name_declared(self) -> None:
        """The piece holding a scope statement (``package Text::Wrap;``, ``namespace App;``)
        names the scope among the definitions it holds (``defs Text::Wrap`` finds it)."""
        starts = sorted(self._declared)
        k = 0
        for p in self.out:
            if p.synthetic_text is not None:
                continue
            while k < len(starts) and starts[k] < p.start:
                k += 1
            while k < len(starts) and starts[k] < p.end:
                # a definition's piece names it (``chunker``: its symbol, by default)
                own = p.names or ((p.symbol,) if p.defn is not None and p.symbol else ())
                p.names = (*own, self._declared[starts[k]])
                k += 1

    def split_children(
        self, children: list[Node], a: int, b: int, *, kind: str, symbol: str
    ) -> None:
        """Append the pieces of a region ``[a, b)`` made of ``children`` (no scope)."""
        self._layout(self._units(children), a, b, _Ctx((), None, kind, symbol))
        self._run()

    def _run(self) -> None:
        stack = self._stack
        while stack:
            seg, a, b, ctx = stack.pop()
            if seg is None:
                self._leaf(a, b, ctx)
            elif seg.kind == "glue":
                self._glue_piece(seg, a, b, ctx)
            else:
                self._definition(seg.units[0], a, b, ctx, seg.units[-1].end)

    # -- layout ------------------------------------------------------------------------

    def _layout(
        self, units: list[Unit], lo: int, hi: int, ctx: _Ctx, *, header_end: int = -1
    ) -> None:
        """Tile ``[lo, hi)`` with segments of ``units`` and schedule them, in order.

        Glue over the budget is opened in place (its children, or its lines) so that
        its small pieces merge with their neighbours across levels, as cAST does.  Glue
        that begins on the line where a segment ends (``} // namespace x``) joins it: a
        line is never cut between two pieces.  A first segment of nothing but a scope's
        header (units ending by ``header_end``: ``namespace llvm {``) begins the next one.
        """
        budget = self.budget
        merge = self.merge
        src = self.src
        segs: list[_Seg] = []
        cur: _Seg | None = None
        work = units[::-1]
        while work:
            u = work.pop()
            spec = u.spec
            if spec is not None and not spec.kind:
                # ``#ifdef``, ``extern "C" {``: no scope of their own, so what they hold
                # is laid out here, among their neighbours; around no definition, glue
                if self._members(u) or u.size > budget:
                    assert u.inner is not None
                    work.extend(reversed(u.inner))
                    continue
                u = Unit(u.start, u.end, u.node, None, None, u.size, u.comments)
                spec = None
            if spec is not None and not (
                merge and spec.mode in ("leaf", "nest") and u.size <= budget
            ):
                cur = None
                segs.append(_Seg("def", [u], u.size))
                continue
            if (
                u.spec is None
                and segs
                and (closing(u) or src.count(b"\n", segs[-1].units[-1].end, u.start) == 0)
            ):
                last = segs[-1]
                # a closing token or the rest of a line joins what comes before it; an
                # oversized definition is split anyway, and its last piece takes it
                if last.size + u.size <= budget or (last.kind == "def" and last.size > budget):
                    last.units.append(u)
                    last.size += u.size
                    continue
            if u.size > budget:
                opened = self._open(u)
                if opened is not None:
                    work.extend(reversed(opened))
                    continue
                cur = None  # a single word longer than the budget: a chunk of its own
                segs.append(_Seg("glue", [u], u.size))
                continue
            if not _joins(cur, u, budget):
                cur = _Seg("glue")
                segs.append(cur)
            cur.units.append(u)
            cur.size += u.size
        stack = self._stack
        if not segs:
            stack.append((None, lo, hi, ctx))
            return
        if len(segs) > 1 and segs[0].kind == "glue" and segs[0].units[-1].end <= header_end:
            del segs[0]  # the next segment starts at lo
        segs = self._tails_joined(segs)
        # each segment runs from its first unit to the next segment's (the first from lo,
        # the last to hi; a scope's from after its header, see _header_cut); pushed in
        # reverse, so that they run in file order
        b = hi
        for i in range(len(segs) - 1, -1, -1):
            seg = segs[i]
            a = lo if i == 0 else seg.units[0].start
            if i > 0 and seg.kind == "def" and segs[i - 1].kind == "glue":
                a = max(a, self._header_cut(seg.units[0], segs[i - 1].size))
            stack.append((seg, a, b, ctx))
            b = a

    def _tails_joined(self, segs: list[_Seg]) -> list[_Seg]:
        """A region's last segment, tiny glue after a definition (``module.exports =
        Dedupe``, ``if __name__ == "__main__": main()``), ends the definition's segment,
        budget permitting: no piece of ``TINY`` counted characters or fewer stands alone
        at the end.  Glue before a definition (``if sys.platform == 'win32':``) is its."""
        if len(segs) < 2:
            return segs
        last, tail = segs[-2], segs[-1]
        if (
            last.kind == "def"
            and tail.kind == "glue"
            and tail.size <= TINY
            and last.size + tail.size <= self.budget
            and all(u.spec is None for u in tail.units)
        ):
            last.units += tail.units
            last.size += tail.size
            return segs[:-1]
        return segs

    def _header_cut(self, u: Unit, before: int) -> int:
        """Where a scope with members (``namespace llvm {``) begins when its header joins
        the glue before it (of ``before`` counted characters): no piece is only a header,
        and the first member keeps its own first line.  -1 when it does not."""
        spec, defn = u.spec, u.defn
        if spec is None or defn is None or spec.mode != "scope":
            return -1
        end = self._header_end(defn)
        if end < 0:
            return -1
        with_header = before + self._size(u.start, end)
        inner = self._members(u) if with_header <= self.budget else []
        if not inner:
            return -1
        first = next((x for x in inner if x.end > end), None)
        if first is not None and first.spec is not None:  # namespace a { namespace b {
            return max(end, self._header_cut(first, with_header))
        return end

    def _emit(self, p: Piece) -> None:
        par = p.parent
        if isinstance(par, Anchor) and p.defn is None and p.synthetic_text is None:
            par.parts += 1
            p.part = par.parts
            if par.target is None:
                par.target = p
                p.kind, p.symbol, p.defn, p.name = par.kind, par.symbol, par.defn, par.name
                p.comments, p.parent, p.scope = par.comments, par.parent, par.scope
        self.out.append(p)

    def _leaf(self, a: int, b: int, ctx: _Ctx, name: str = "") -> None:
        if self._size(a, b) > self.budget:
            # text between the children (a string's content) was not counted in the units
            bounds = [a, *line_cuts(self.src, a, b, self.budget), b]
            if len(bounds) > 2:
                for i in range(len(bounds) - 1):
                    self._emit(
                        Piece(
                            bounds[i],
                            bounds[i + 1],
                            ctx.glue_kind,
                            ctx.glue_symbol,
                            ctx.scope,
                            ctx.parent,
                            name=name,
                        )
                    )
                return
        self._emit(Piece(a, b, ctx.glue_kind, ctx.glue_symbol, ctx.scope, ctx.parent, name=name))

    def _glue_piece(self, seg: _Seg, a: int, b: int, ctx: _Ctx) -> None:
        defs = [u for u in seg.units if u.spec is not None]
        if not defs:
            documented = seg.units[0].documents
            if (
                documented is not None
                and documented.defn is not None
                and documented.spec is not None
            ):
                # the doc comment of the definition after it: named for it
                name = name_of(documented.defn, self.src)
                symbol = self._kind_symbol(documented.spec, name, ctx.scope)[1]
                self._leaf(a, b, _Ctx(ctx.scope, ctx.parent, "doc", symbol), name)
                return
            title = self._pod_section(a, b) if self.rules.doc_blocks else ""
            if title:
                ctx = _Ctx(ctx.scope, ctx.parent, "section", title)
            self._leaf(a, b, ctx)
            return
        names = tuple(name_of(u.defn, self.src) for u in defs if u.defn is not None)
        # text after the segment's own units (closing tokens of the enclosing node) must
        # not push it over the budget: it then becomes a piece of its own
        core_end = seg.units[-1].end
        tail = b > core_end and self._size(a, b) > self.budget
        end = core_end if tail else b
        if len(defs) == 1 and all(
            u is defs[0] or (u.node is not None and not u.node.is_named) for u in seg.units
        ):
            u = defs[0]
            assert u.spec is not None and u.defn is not None
            kind, symbol = self._kind_symbol(u.spec, names[0], ctx.scope)
            self._emit(
                Piece(a, end, kind, symbol, ctx.scope, ctx.parent, u.defn, u.comments, names[0])
            )
        else:
            symbols = tuple(self._qualify(ctx.scope, n) for n in names if n)
            self._emit(
                Piece(a, end, ctx.glue_kind, ctx.glue_symbol, ctx.scope, ctx.parent, names=symbols)
            )
        if tail:
            self._leaf(end, b, ctx)

    def _pod_section(self, a: int, b: int) -> str:
        """The POD section a piece of documentation ``[a, b)`` is of (Perl): the one it opens,
        else the one it goes on with (its heading looked for :data:`_SECTION_BACK` bytes
        back, with no ``=cut`` since), else the first it opens later; ``""`` for none."""
        src = self.src
        if src.startswith(b"=head", a):
            at = a
        else:
            back = src.rfind(b"\n=head", max(a - _SECTION_BACK, 0), a)
            if back >= 0 and src.find(b"\n=cut", back, a) >= 0:
                back = -1  # that section's POD ended before the piece: code came between
            at = back + 1 if back >= 0 else src.find(b"\n=head", a, b) + 1
            if at <= 0:
                return ""
        heading = _POD_HEADING.match(src, at)
        if heading is None:
            return ""
        return heading.group(1).decode("utf-8", "replace").strip()[:_MAX_TITLE]

    def _lines(self, a: int, b: int, ctx: _Ctx) -> None:
        bounds = [a, *line_cuts(self.src, a, b, self.budget), b]
        for i in range(len(bounds) - 1):
            self._emit(
                Piece(
                    bounds[i], bounds[i + 1], ctx.glue_kind, ctx.glue_symbol, ctx.scope, ctx.parent
                )
            )

    # -- definitions -------------------------------------------------------------------

    def _qualify(self, scope: Scope, name: str) -> str:
        sep = self.rules.separator
        prefix = self._prefixes.get(scope)
        if prefix is None:
            prefix = self._prefixes[scope] = sep.join(n for _, n, _ in scope[-_MAX_SCOPE:] if n)
        if not name:
            return prefix
        return f"{prefix}{sep}{name}" if prefix else name

    def _kind_symbol(self, spec: DefSpec, name: str, scope: Scope) -> tuple[str, str]:
        kind = spec.kind
        if kind == "function" and scope and scope[-1][2] == "class":
            kind = "method"
        return kind, self._qualify(scope, name)

    def _definition(self, u: Unit, a: int, b: int, ctx: _Ctx, core_end: int) -> None:
        spec = u.spec
        defn = u.defn
        assert spec is not None and defn is not None
        name = name_of(defn, self.src)
        kind, symbol = self._kind_symbol(spec, name, ctx.scope)
        units: list[Unit] | None = None
        if spec.mode == "class" or spec.mode == "scope":
            units = u.inner if u.inner is not None else self._units(self._expand(u))
            if has_member_definitions(units):
                parent = ctx.parent
                if spec.mode == "class":
                    header = Piece(
                        a,
                        u.end,  # the class's own lines, not the glue its segment took
                        kind,
                        symbol,
                        ctx.scope,
                        ctx.parent,
                        defn,
                        u.comments,
                        name,
                        synthetic_text=self._header_text(u, units),
                    )
                    self.out.append(header)
                    parent = header
                glue_kind = "block" if spec.mode == "class" else ctx.glue_kind
                glue_symbol = symbol if spec.mode == "class" else ctx.glue_symbol
                inner = _Ctx(_inner_scope(ctx, spec, kind, name), parent, glue_kind, glue_symbol)
                header_end = self._header_end(defn) if spec.mode == "scope" else -1
                self._layout(units, a, b, inner, header_end=header_end)
                return
        if a <= u.start and u.end <= b:  # sizes add up: the unit's own is known
            size = self._gap_size(a, u.start) + u.size + self._gap_size(u.end, b)
        else:
            size = self._size(a, b)
        budget = self.budget
        if size <= budget:
            self.out.append(
                Piece(a, b, kind, symbol, ctx.scope, ctx.parent, defn, u.comments, name)
            )
            return
        if b > core_end and self._size(a, core_end) <= budget:
            # the closing tokens after it (of the enclosing node) make it too big: alone
            self.out.append(
                Piece(a, core_end, kind, symbol, ctx.scope, ctx.parent, defn, u.comments, name)
            )
            self._leaf(core_end, b, ctx)
            return
        # Over the budget: cAST recursion; the first piece stands for the definition.
        if units is None:
            units = self._units(self._expand(u))
        anchor = Anchor(
            kind=kind,
            symbol=symbol,
            defn=defn,
            name=name,
            comments=u.comments,
            parent=ctx.parent,
            scope=ctx.scope,
        )
        glue_kind = kind if spec.mode == "nest" else "block"
        self._layout(
            units, a, b, _Ctx(_inner_scope(ctx, spec, kind, name), anchor, glue_kind, symbol)
        )

    def _header_text(self, u: Unit, units: list[Unit]) -> str:
        """A class header: its own text with each member definition cut to its signature."""
        src = self.src
        parts: list[bytes] = []
        pos = u.start
        for x in units:
            if x.spec is None or x.defn is None or x.node is None or not x.spec.kind:
                continue
            sig_start = x.node.start_byte
            parts.append(src[pos:sig_start])
            body = body_of(x.defn)
            parts.append(signature_bytes(src, x.defn, body, sig_start, self.rules, elide=True))
            pos = x.end
        parts.append(src[pos : u.end])
        text = b"".join(parts)
        if nws_size(text) > self.budget:
            text = truncate(text, self.budget)
        return text.decode("utf-8", "replace")


def _joins(cur: _Seg | None, u: Unit, budget: int) -> TypeGuard[_Seg]:
    """Whether glue ``u`` joins the glue segment ``cur``: it fits, and a doc comment too long
    to join its definition stands apart (``Unit.documents``)."""
    return (
        cur is not None and cur.size + u.size <= budget and u.documents is cur.units[-1].documents
    )


def _inner_scope(ctx: _Ctx, spec: DefSpec, kind: str, name: str) -> Scope:
    """The scope of a definition's members: the definition's, plus the definition (the
    innermost :data:`_MAX_SCOPE` of them)."""
    if spec.kind and (name or spec.mode != "scope"):
        return (*ctx.scope[1 - _MAX_SCOPE :], (kind, name, spec.mode))
    return ctx.scope
