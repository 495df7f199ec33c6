"""The syntax-aware splitter: definitions as units, cAST recursion for what is too big.

The splitter never copies text around: it chooses *cut points* in the file.  A
region (the whole file, a class body, an oversized node) is tiled by
segments that start at a unit's first byte; each segment becomes one leaf
piece, trimmed of surrounding whitespace.  Every byte of the region lies in
exactly one segment, so the coverage invariant holds by construction, and a
piece's text is always an exact span of the file.

Units are the children of the region's node.  A definition (with its leading
comments and decorators) is a unit of its own; everything else is glue,
merged greedily with its neighbours up to the budget.  A unit over the budget
is split at its own children, recursively (cAST); a node without children
is split at line breaks, and a single line at whitespace.

The recursion is driven by an explicit stack, so deep nesting never reaches
Python's recursion limit; nor does it cost more than linear time and memory: a scope
keeps the innermost ``_MAX_SCOPE`` definitions, and a long span's size is read from
running counts over the file, not from the span.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from tree_sitter import Node

from codechunkd.chunking.cuts import NOT_COUNTED, line_cuts, nws_size, truncate
from codechunkd.chunking.rules import DefSpec, Rules, body_of, name_of
from codechunkd.chunking.signatures import signature_bytes

__all__ = ["Anchor", "CodeSplitter", "Piece"]

# Enclosing definitions kept in a scope, and so in a qualified symbol (deep data nests).
# Every use of a scope reads its last entries only (the symbol, a method's class, the
# context header's last 4), so a deeper one is cut to this: a piece's scope is then
# O(1), not the whole chain (20,000 nested functions held 200 million entries).
_MAX_SCOPE: Final = 8
# A span longer than this is measured from running counts (CodeSplitter._before), not read:
# the nested nodes shorter than it add up to _DIRECT**2 / (2 * bytes per level) at most.
_DIRECT: Final = 2048
_BLOCK: Final = 256  # bytes per running count (8 bytes each)


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


@dataclass(slots=True, eq=False)
class _Unit:
    start: int
    end: int
    node: Node | None  # None for a run of text (lines of a token, text between children)
    defn: Node | None
    spec: DefSpec | None
    size: int
    comments: tuple[Node, ...] = ()


@dataclass(slots=True)
class _Ctx:
    scope: Scope
    parent: Piece | Anchor | None
    glue_kind: str
    glue_symbol: str


@dataclass(slots=True, eq=False)
class _Seg:
    kind: str  # "glue" or "def"
    units: list[_Unit] = field(default_factory=list)
    size: int = 0


def _declares_only(defn: Node) -> bool:
    """``class Tensor;``, ``struct tag;``: a C or C++ specifier without a body is no definition."""
    return defn.type.endswith("_specifier") and defn.child_by_field_name("body") is None


class CodeSplitter:
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
        """``plain_kinds`` caches ``rules.plain`` by node kind id: pass the same dict for
        the files of one grammar (and rules), or none."""
        self.src = src
        self.rules = rules
        self.budget = max(1, budget)
        self.merge = merge_siblings or rules.merge_defs
        self.out: list[Piece] = []
        self._stack: list[tuple[_Seg | None, int, int, _Ctx]] = []  # (seg, a, b, ctx) to do
        self._plain = plain_kinds if plain_kinds is not None else {}
        self._prefixes: dict[Scope, str] = {}  # scope -> its qualified name
        self._blocks: array[int] | None = None  # see _before

    # -- entry points -----------------------------------------------------------------

    def split_tree(self, root: Node, *, kind: str = "module") -> list[Piece]:
        """Pieces of the whole file, in file order (synthetic pieces before their members)."""
        ctx = _Ctx((), None, kind, "")
        n = len(self.src)
        children = root.children
        if not children:
            self._lines(0, n, ctx)
        else:
            self._layout(self._units(children), 0, n, ctx)
        self._run()
        return self.out

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

    def _size(self, a: int, b: int) -> int:
        """Non-whitespace characters of ``[a, b)``: O(1) for a long span (see :meth:`_before`)."""
        if b - a <= _DIRECT:
            return len(self.src[a:b].translate(None, NOT_COUNTED))
        return self._before(b) - self._before(a)

    def _before(self, x: int) -> int:
        """Non-whitespace characters of ``src[:x]``, from a running count per block.

        Measuring each nested node's whole span would make a deep nest (``[[[...]]]``)
        quadratic; the counts are made on the first long span, so a file of short
        definitions never pays for them.  The count is per byte, so it adds up exactly.
        """
        blocks = self._blocks
        src = self.src
        if blocks is None:
            blocks = self._blocks = array("q", [0])
            total = 0
            for i in range(0, len(src), _BLOCK):
                total += len(src[i : i + _BLOCK].translate(None, NOT_COUNTED))
                blocks.append(total)
        k = x // _BLOCK
        base = k * _BLOCK
        if x == base:
            return blocks[k]
        return blocks[k] + len(src[base:x].translate(None, NOT_COUNTED))

    def _gap_size(self, a: int, b: int) -> int:
        """:meth:`_size` of the text between units, usually blank (and cheaper to test)."""
        if b - a > _DIRECT:
            return self._size(a, b)
        gap = self.src[a:b]
        return 0 if not gap or gap.isspace() else len(gap.translate(None, NOT_COUNTED))

    # -- units -------------------------------------------------------------------------

    def _units(self, children: Iterable[Node]) -> list[_Unit]:
        rules = self.rules
        attached = rules.attached
        wrappers = rules.wrappers
        spec_of = rules.spec
        plain = self._plain
        src = self.src
        units: list[_Unit] = []
        append = units.append
        pending: list[Node] = []
        prev_end = -1
        todo = list(children)
        todo.reverse()
        while todo:
            c = todo.pop()
            if not pending:
                kind_id = c.kind_id
                is_plain = plain.get(kind_id)
                if is_plain is None:
                    is_plain = plain[kind_id] = rules.plain(c)
                if is_plain:  # the common case: code that is no definition
                    s0, e0 = c.start_byte, c.end_byte
                    size = (
                        len(src[s0:e0].translate(None, NOT_COUNTED))
                        if e0 - s0 <= _DIRECT
                        else self._size(s0, e0)
                    )
                    append(_Unit(s0, e0, c, None, None, size))
                    prev_end = e0
                    continue
            t = c.type
            if t == "ERROR" and c.child_count:
                # syntax error: tree-sitter's recovered pieces are units of their own
                todo.extend(reversed(c.children))
                continue
            if t in attached:
                if prev_end >= 0 and src.count(b"\n", prev_end, c.start_byte) == 0:
                    # a trailing comment on the line of the code before it
                    units.append(self._glue(c))
                else:
                    pending.append(c)
                continue
            spec = spec_of(c, t)
            defn: Node | None = c if spec is not None else None
            if spec is None and t in wrappers:
                defn = rules.unwrap(c)
                if defn is not None:
                    spec = rules.spec(defn)
            if spec is not None and defn is not None and not _declares_only(defn):
                comments: tuple[Node, ...] = ()
                if pending:  # the comments right above it (no blank line between) are its
                    k = len(pending)
                    pos = c.start_byte
                    while k > 0 and src.count(b"\n", max(pending[k - 1].end_byte - 1, 0), pos) <= 1:
                        k -= 1
                        pos = pending[k].start_byte
                    for p in pending[:k]:
                        units.append(self._glue(p))
                    comments = tuple(pending[k:])
                start = comments[0].start_byte if comments else c.start_byte
                size = self._size(start, c.end_byte)
                if comments and size > self.budget:
                    alone = self._size(c.start_byte, c.end_byte)
                    if alone <= self.budget:
                        # never cut a definition that fits for the sake of its comments
                        units.extend(self._glue(p) for p in comments)
                        comments, start, size = (), c.start_byte, alone
                units.append(_Unit(start, c.end_byte, c, defn, spec, size, comments))
            else:
                for p in pending:
                    units.append(self._glue(p))
                units.append(self._glue(c))
            if pending:
                pending = []
            prev_end = c.end_byte
        for p in pending:
            units.append(self._glue(p))
        return units

    def _glue(self, c: Node) -> _Unit:
        return _Unit(c.start_byte, c.end_byte, c, None, None, self._size(c.start_byte, c.end_byte))

    def _expand(self, u: _Unit) -> list[Node]:
        """The children that make up a definition unit, with its body opened."""
        out: list[Node] = list(u.comments)
        assert u.defn is not None and u.node is not None
        self._flatten_to(u.node, u.defn, out, 0)
        return out

    def _flatten_to(self, node: Node, target: Node, out: list[Node], depth: int) -> None:
        if node.id == target.id or depth > 6:
            body = body_of(target)
            body_id = body.id if body is not None else -1
            flatten = self.rules.flatten
            for c in node.children:
                if c.id != body_id:
                    out.append(c)
                elif not flatten:
                    out.extend(c.children)
                else:
                    for b in c.children:
                        if b.type in flatten:
                            out.extend(b.children)
                        else:
                            out.append(b)
            return
        done = False
        for c in node.children:
            if (
                not done
                and c.start_byte <= target.start_byte
                and target.end_byte <= c.end_byte
                and (c.id == target.id or c.child_count > 0)
            ):
                self._flatten_to(c, target, out, depth + 1)
                done = True
            else:
                out.append(c)

    # -- layout ------------------------------------------------------------------------

    def _layout(self, units: list[_Unit], lo: int, hi: int, ctx: _Ctx) -> None:
        """Tile ``[lo, hi)`` with segments of ``units`` and schedule them, in order.

        Glue over the budget is opened in place (its children, or its lines) so that
        its small pieces merge with their neighbours across levels, as cAST does.
        """
        budget = self.budget
        merge = self.merge
        segs: list[_Seg] = []
        cur: _Seg | None = None
        work = units[::-1]
        while work:
            u = work.pop()
            spec = u.spec
            if spec is not None and not (
                merge and spec.mode in ("leaf", "nest") and u.size <= budget
            ):
                cur = None
                segs.append(_Seg("def", [u], u.size))
                continue
            node = u.node
            if u.spec is None and node is not None and not node.is_named and segs:
                last = segs[-1]
                # a closing token joins what comes before it; an oversized definition
                # is split anyway, and its last piece takes the token
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
            if cur is None or cur.size + u.size > budget:
                cur = _Seg("glue")
                segs.append(cur)
            cur.units.append(u)
            cur.size += u.size
        stack = self._stack
        if not segs:
            stack.append((None, lo, hi, ctx))
            return
        # each segment runs from its first unit to the next segment's (the first from lo,
        # the last to hi); pushed in reverse, so that they run in file order
        b = hi
        for i in range(len(segs) - 1, -1, -1):
            seg = segs[i]
            a = lo if i == 0 else seg.units[0].start
            stack.append((seg, a, b, ctx))
            b = a

    def _open(self, u: _Unit) -> list[_Unit] | None:
        """The pieces of an oversized unit: its children (and the text between), or lines."""
        node = u.node
        if node is None or node.child_count == 0:
            pieces = self._text_units(u.start, u.end)
            return pieces if len(pieces) > 1 else None
        out: list[_Unit] = []
        src = self.src
        pos = u.start
        for c in self._units(node.children):
            if c.start > pos and not src[pos : c.start].isspace():
                out.extend(self._text_units(pos, c.start))
            out.append(c)
            if c.end > pos:
                pos = c.end
        if u.end > pos and not src[pos : u.end].isspace():
            out.extend(self._text_units(pos, u.end))
        return out

    def _text_units(self, a: int, b: int) -> list[_Unit]:
        """Runs of text in ``[a, b)`` cut at lines (and at whitespace in long lines)."""
        bounds = [a, *line_cuts(self.src, a, b, self.budget), b]
        out = []
        for i in range(len(bounds) - 1):
            x, y = bounds[i], bounds[i + 1]
            size = self._size(x, y)
            if size:
                out.append(_Unit(x, y, None, None, None, size))
        return out

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

    def _leaf(self, a: int, b: int, ctx: _Ctx) -> None:
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
                        )
                    )
                return
        self._emit(Piece(a, b, ctx.glue_kind, ctx.glue_symbol, ctx.scope, ctx.parent))

    def _glue_piece(self, seg: _Seg, a: int, b: int, ctx: _Ctx) -> None:
        defs = [u for u in seg.units if u.spec is not None]
        if not defs:
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

    def _definition(self, u: _Unit, a: int, b: int, ctx: _Ctx, core_end: int) -> None:
        spec = u.spec
        defn = u.defn
        assert spec is not None and defn is not None
        name = name_of(defn, self.src)
        kind, symbol = self._kind_symbol(spec, name, ctx.scope)
        units: list[_Unit] | None = None
        if spec.mode == "class" or spec.mode == "scope":
            units = self._units(self._expand(u))
            if _has_member_definitions(units):
                parent = ctx.parent
                if spec.mode == "class":
                    header = Piece(
                        a,
                        b,
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
                self._layout(units, a, b, inner)
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

    def _header_text(self, u: _Unit, units: list[_Unit]) -> str:
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


def _inner_scope(ctx: _Ctx, spec: DefSpec, kind: str, name: str) -> Scope:
    """The scope of a definition's members: the definition's, plus the definition (the
    innermost :data:`_MAX_SCOPE` of them)."""
    if spec.kind and (name or spec.mode != "scope"):
        return (*ctx.scope[1 - _MAX_SCOPE :], (kind, name, spec.mode))
    return ctx.scope


def _has_member_definitions(units: list[_Unit]) -> bool:
    # a loop, not any(generator): closing a generator that stopped early raises
    # GeneratorExit in it, which costs more than the test (this runs once per class)
    for x in units:  # noqa: SIM110
        if x.spec is not None and x.spec.kind:
            return True
    return False
