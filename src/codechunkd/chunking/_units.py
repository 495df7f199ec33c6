"""Reading a region of a parse tree as units: definitions, each with the comments right
above it, and glue (everything else), with their sizes in counted characters.

``UnitReader`` is the half of the splitter (``_chunk_code.CodeSplitter``) that reads:
the units of a node's children, of a definition with its body opened, of an oversized
unit (``_open``), and the sizes of spans, from running counts for long ones.  How units
are laid out into pieces is ``_chunk_code``'s.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from tree_sitter import Node

from codechunkd.chunking.cuts import NOT_COUNTED, line_cuts
from codechunkd.chunking.rules import DefSpec, Rules, body_of

__all__ = ["Unit", "UnitReader", "closing", "has_member_definitions"]

# A span longer than this is measured from running counts (UnitReader._before), not read:
# the nested nodes shorter than it add up to _DIRECT**2 / (2 * bytes per level) at most.
_DIRECT: Final = 2048
_BLOCK: Final = 256  # bytes per running count (8 bytes each)
_PARAGRAPH_BREAK: Final = re.compile(rb"\n[ \t\r\f\v]*\n")
_CLOSING_COMMAND: Final = re.compile(rb"=(?:cut|back|end)\b")


@dataclass(slots=True, eq=False)
class Unit:
    """A definition (with its comments) or a piece of glue, and its counted size."""

    start: int
    end: int
    node: Node | None  # None for a run of text (lines of a token, text between children)
    defn: Node | None
    spec: DefSpec | None
    size: int
    comments: tuple[Node, ...] = ()
    inner: list[Unit] | None = None  # a class's or scope's units, once made (``_members``)
    opens: bool = False  # the first of its node's children that were read (``closing``)
    documents: Unit | None = None  # the definition a comment too long to join it documents


def _declares_only(defn: Node, spec: DefSpec) -> bool:
    """A declaration, not a definition: a C or C++ specifier without a body (``class Tensor;``,
    ``struct tag;``), a named scope without one (Rust's ``mod a;``, PHP's ``namespace App;``,
    C#'s ``namespace Foo;``, Perl's ``package Foo;``).  It is read as the code around it, so a
    ``mod.rs`` of ``pub mod x;`` lines is one chunk, not one per line."""
    if spec.mode == "scope":
        return bool(spec.kind) and body_of(defn) is None
    return defn.type.endswith("_specifier") and defn.child_by_field_name("body") is None


def closing(u: Unit) -> bool:
    """A token that closes what comes before it (``}``, ``)``, Ruby's ``end``): unnamed,
    and not the first of its node's children (``if``, ``namespace`` open theirs).  Known
    from the children read (``opens``): tree-sitter's ``prev_sibling`` costs the nesting's
    depth, so a deep nest of lines made it quadratic."""
    node = u.node
    return node is not None and not node.is_named and not u.opens


def has_member_definitions(units: list[Unit]) -> bool:
    """Some unit defines something with a kind (a method, a class: not an ``#ifdef``)."""
    # a loop, not any(generator): closing a generator that stopped early raises
    # GeneratorExit in it, which costs more than the test (this runs once per class)
    for x in units:  # noqa: SIM110
        if x.spec is not None and x.spec.kind:
            return True
    return False


def _mark_openers(units: list[Unit], firsts: list[Node]) -> None:
    """Set ``opens`` on the units read from ``firsts``, each the first of its node's
    children that were read (the list given, a syntax error's recovered pieces)."""
    if len(firsts) == 1:  # no syntax error: only the first unit can be a first child
        if units and units[0].node == firsts[0]:
            units[0].opens = True
        return
    ids = {n.id for n in firsts}
    for x in units:
        if x.node is not None and x.node.id in ids:
            x.opens = True


class UnitReader:
    """The units and sizes of one file's spans (see the module docstring)."""

    def __init__(
        self, src: bytes, rules: Rules, budget: int, plain_kinds: dict[int, bool] | None
    ) -> None:
        """``plain_kinds`` caches ``rules.plain`` by node kind id: pass the same dict for
        the files of one grammar (and rules), or none."""
        self.src = src
        self.rules = rules
        self.budget = max(1, budget)
        self._plain = plain_kinds if plain_kinds is not None else {}
        self._blocks: array[int] | None = None  # see _before

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

    def _units(self, children: Iterable[Node]) -> list[Unit]:
        rules = self.rules
        attached = rules.attached
        wrappers = rules.wrappers
        spec_of = rules.spec
        plain = self._plain
        src = self.src
        units: list[Unit] = []
        append = units.append
        pending: list[Node] = []
        prev_end = -1
        todo = list(children)[::-1]
        firsts = [todo[-1]] if todo else []  # the first of each list of children read
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
                    append(Unit(s0, e0, c, None, None, size))
                    prev_end = e0
                    continue
            t = c.type
            if t == "ERROR" and c.child_count:
                # syntax error: tree-sitter's recovered pieces are units of their own
                todo.extend(reversed(c.children))
                firsts.append(todo[-1])
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
            if spec is not None and defn is not None and not _declares_only(defn, spec):
                k = self._own_comments(pending, c)
                units.extend(self._glue(p) for p in pending[:k])
                comments = tuple(pending[k:])
                start = comments[0].start_byte if comments else c.start_byte
                size = self._size(start, c.end_byte)
                docs: list[Unit] = []
                if comments and size > self.budget:
                    alone = self._size(c.start_byte, c.end_byte)
                    if alone <= self.budget:
                        # never cut a definition that fits for the sake of its comments:
                        # they are a piece of their own that documents it (``_layout``)
                        docs = [self._glue(p) for p in comments]
                        units.extend(docs)
                        comments, start, size = (), c.start_byte, alone
                units.append(Unit(start, c.end_byte, c, defn, spec, size, comments))
                for d in docs:
                    d.documents = units[-1]
            else:
                for p in pending:
                    units.append(self._glue(p))
                units.append(self._glue(c))
            if pending:
                pending = []
            prev_end = c.end_byte
        for p in pending:
            units.append(self._glue(p))
        _mark_openers(units, firsts)
        return units

    def _own_comments(self, pending: list[Node], defn: Node) -> int:
        """Where the comments right above ``defn`` begin in ``pending`` (the comments read
        since the last unit): those with no blank line between them and it, or one blank
        line for a doc block (Perl's POD)."""
        k = len(pending)
        pos = defn.start_byte
        while k > 0:
            above = pending[k - 1]
            gap = self.src.count(b"\n", max(above.end_byte - 1, 0), pos)
            if gap > (2 if above.type in self.rules.doc_blocks else 1):
                break
            k -= 1
            pos = above.start_byte
        return k

    def _glue(self, c: Node) -> Unit:
        return Unit(c.start_byte, c.end_byte, c, None, None, self._size(c.start_byte, c.end_byte))

    def _expand(self, u: Unit) -> list[Node]:
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

    def _header_end(self, defn: Node) -> int:
        """Where a scope's header ends: after its body's ``{`` and, when only a comment or
        blanks follow it, after that line; -1 for a scope without such a body."""
        body = body_of(defn)
        if body is None or body.child_count == 0 or body.children[0].type != "{":
            return -1
        end = body.start_byte + 1
        eol = self.src.find(b"\n", end, body.end_byte)
        rest = self.src[end:eol].strip() if eol >= 0 else b"x"
        return eol if not rest or rest.startswith((b"//", b"/*")) else end

    def _members(self, u: Unit) -> list[Unit]:
        """The units of a class or scope ``u`` (made once), or [] when none defines."""
        if u.inner is None:
            u.inner = self._units(self._expand(u))
        return u.inner if has_member_definitions(u.inner) else []

    def _open(self, u: Unit) -> list[Unit] | None:
        """The pieces of an oversized unit: its children (and the text between), or lines;
        the pieces of a doc comment document what it does."""
        pieces = self._pieces(u)
        if pieces is not None and u.documents is not None:
            for x in pieces:
                x.documents = u.documents
        return pieces

    def _pieces(self, u: Unit) -> list[Unit] | None:
        node = u.node
        if node is not None and node.type in self.rules.doc_blocks:
            pieces = self._paragraph_units(u.start, u.end)
            return pieces if len(pieces) > 1 else None
        if node is None or node.child_count == 0:
            pieces = self._text_units(u.start, u.end)
            return pieces if len(pieces) > 1 else None
        out: list[Unit] = []
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

    def _paragraph_units(self, a: int, b: int) -> list[Unit]:
        """A doc block's paragraphs (POD), each command (``=head2 Name``, ``=item x``,
        ``=over``) with the paragraphs up to and including the next that is not one, so no
        piece ends with a heading; a paragraph over the budget at lines."""
        src = self.src
        starts = [a, *(m.end() for m in _PARAGRAPH_BREAK.finditer(src, a, b))]
        ends = [*starts[1:], b]
        out: list[Unit] = []
        i = 0
        while i < len(starts):
            x = starts[i]
            while (
                i + 1 < len(starts)
                and src.startswith(b"=", starts[i])
                and not _CLOSING_COMMAND.match(src, starts[i])
            ):
                i += 1
            y = ends[i]
            i += 1
            size = self._size(x, y)
            if size > self.budget:
                out.extend(self._text_units(x, y))
            elif size:
                out.append(Unit(x, y, None, None, None, size))
        return out

    def _text_units(self, a: int, b: int) -> list[Unit]:
        """Runs of text in ``[a, b)`` cut at lines (and at whitespace in long lines)."""
        bounds = [a, *line_cuts(self.src, a, b, self.budget), b]
        out = []
        for i in range(len(bounds) - 1):
            x, y = bounds[i], bounds[i + 1]
            size = self._size(x, y)
            if size:
                out.append(Unit(x, y, None, None, None, size))
        return out
