"""By-name guesses: what a used name may mean when neither its file nor its imports say
(``RefGraph`` of storage/refgraph.py is a :class:`Guesses`).

The last resort of ``RefGraph._resolve`` is every definition of the name in the source, in
a language the use's can call (``refnames.family``): a guess, ``by-name``.  None for a bare
Python or Go name: Python names nothing bare beyond its file's scope (the file's
definitions and imports, then the builtins), Go nothing beyond its package's, so
``open(p)`` or a local ``title`` there is never another module's ``open`` or
``UserString.title``, nor a Go local ``index`` another package's function.  None for a
value either (``MAX = 3`` resolves in its file or through an import; it is not in
``_by_src_name``).  On a receiver of no known class, none for a method of the language's
own types (``"\\n".join(x)``, ``d.items()``, ``arr.push(x)``:
``chunking/predeclared.BUILTIN_METHODS``) nor for a name read, not called (``r.body``: a
field of some class), unless the receiver is named for a class that has it
(``message.get``: ``Message.get``).  A bare JavaScript or TypeScript name (``data``,
``cb()``: a parameter, a local) guesses no class's member and no function nested in
another (``MessageEvent.data``, ``LRUCache.#fetch.cb``): the language has no implicit
``this``.  When uses are listed, a guess is narrowed by the
use's form (:meth:`Guesses._by_form`: ``x.m()`` a member, ``m()`` a function).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from codechunkd.chunking.predeclared import BUILTIN_METHODS
from codechunkd.storage.refnames import BY_NAME, SELF, family

__all__ = ["BARE_MEMBERS", "Guesses", "owner_name"]

BARE_MEMBERS: Final = frozenset({"java", "ruby"})
"""Languages where a bare name can call a member of the enclosing class."""
_MEMBER: Final = re.compile(r"\.|::")
_SCOPED: Final = frozenset({"python", "go"})
"""Languages whose bare names mean nothing beyond the file (Python) or package (Go) and
their imports, where ``RefGraph._resolve`` looked before any guess."""

Forms = tuple[
    list[int], list[int], dict[str, list[int]], dict[str, list[int]], dict[str, list[int]]
]
"""A name's definitions split by form: members, functions, members by their class's name
and by its name lower-cased, and (filled as asked) by the receiver names that name a kind
of class (:func:`_kind_named`)."""


class Guesses:
    """The reference graph's guesses by name: what they read of the graph's rows."""

    _src: list[str]
    _lang: list[str]
    _kind: list[str]
    _name: list[str]
    _qual: list[str]
    _sym: list[str]
    _owner: list[str]
    _by_src_name: dict[tuple[str, str, str], list[int]]
    _form_cache: dict[tuple[str, str, str], Forms]
    _bases: dict[tuple[str, str], dict[str, None]]

    def _guess(self, i: int, qual: str) -> tuple[list[int], str]:
        """Every definition the use row ``i`` (written after ``qual``) can mean by its name
        alone, ``by-name`` (a shared list: callers never change it), or none."""
        if not qual and (self._lang[i] in _SCOPED or self._bare_perl_value(i)):
            return [], ""  # a builtin or a local, never another file's (package's) name
        fam = family(self._lang[i])
        anywhere = self._by_src_name.get((self._src[i], fam, self._name[i]))
        if anywhere and not qual and fam == "js":  # a bare ``data`` is no class's member (in
            anywhere = self._forms(self._src[i], fam, self._name[i], anywhere)[1]  # JS/TS)
        own = self._name[i] in BUILTIN_METHODS.get(fam, ())  # ``d.items()``: the language's
        if anywhere and qual and (own or self._kind[i] == "value"):  # ``r.body`` read: a field
            # of some class; either way, only a class named for the receiver's (``message.get``)
            anywhere = self._receiver_named(i, qual, anywhere) or []
        return (anywhere, BY_NAME) if anywhere else ([], "")

    def _bare_perl_value(self, i: int) -> bool:
        """A Perl constant written bare (``DEBUG``): its package's or imported, never
        another package's of that name (``B::Deparse::DEBUG``)."""
        return self._lang[i] == "perl" and self._kind[i] == "value"

    def _receiver_named(self, i: int, qual: str, rows: list[int]) -> list[int] | None:
        """The members among ``rows`` of a class named like the receiver ``qual`` of the use
        row ``i`` (``subscriber.next``: ``Subscriber.next``), or None."""
        fam = family(self._lang[i])
        by_lower = self._forms(self._src[i], fam, self._name[i], rows)[3]
        return by_lower.get(_MEMBER.split(qual)[-1].strip("_()").lower())

    def _by_form(self, i: int, rows: list[int]) -> list[int]:
        """The definitions a by-name use can mean, by its form: ``x.m()`` a member (of a
        class named like the receiver, ``subscriber.next`` -> ``Subscriber.next``, else,
        for a plain variable, of the class the use is written in, when either has one: a
        Go receiver), ``m()`` a function (or, in Java, a member too). The lists are shared
        (``_forms``): callers never change them."""
        qual = self._qual[i] if self._kind[i] != "binds" else ""
        fam = family(self._lang[i])
        forms = self._forms(self._src[i], fam, self._name[i], rows)
        members, functions, by_owner, by_lower, kinds = forms
        if not qual:
            return rows if self._lang[i] in BARE_MEMBERS else functions
        if qual[:1].isupper() and qual.isidentifier() and qual not in SELF:
            return by_lower.get(qual.lower(), [])  # ``Thread.State``: that class's, if here
        named = self._receiver_named(i, qual, rows)  # (a read's guess is only these: ``_guess``)
        if len(members) <= 1:
            return members
        if named:
            return named
        if self._lang[i] == "python" and not _DUNDER.match(self._name[i]):
            last = _MEMBER.split(qual)[-1]  # ``executor.start()``: an ``…Executor``'s
            kind = kinds.get(last)
            if kind is None:  # each list made once: callers tell lists apart by identity
                kind = kinds[last] = _kind_named(last, by_owner)
            if kind:
                return kind
        if _MEMBER.search(qual):  # ``b.rd.Read()``: a field's method, of a class unknown
            return members
        here = self._owner[i].split(".")
        mine = by_owner.get(here[-2]) if len(here) > 1 else None
        return mine or members

    def _overrides(self, j: int, classes: set[tuple[str, str]]) -> bool:
        """Whether the member row ``j`` is of a class that inherits, up to four levels, from
        one of ``classes`` ((source, class name) pairs): ``ThreadPoolExecutor.start``
        overrides ``BaseExecutor.start``, so a call guessed to be either is a use of the
        base's."""
        owner = self._sym[j].rpartition(".")[0]  # (canonical: ``Span::new`` is ``Span.new``)
        if not owner:
            return False  # a function, of no class
        src = self._src[j]
        levels = self._base_levels(src, family(self._lang[j]), owner, 4)
        return any((src, _MEMBER.split(base)[-1]) in classes for bases in levels for base in bases)

    def _base_levels(self, src: str, fam: str, cls: str, levels: int) -> Iterator[list[str]]:
        """The base classes of ``cls`` in ``src`` and language family ``fam``, by the names
        they are written with, a level at a time, nearest first, up to ``levels`` levels:
        breadth first, each base once, at most 20 classes of one name followed."""
        seen: set[str] = set()
        frontier = [cls] if cls else []
        for _ in range(levels):
            bases: list[str] = []
            nxt: list[str] = []
            for c in frontier:
                for base in self._bases.get((src, c), ()):
                    if base not in seen:
                        seen.add(base)
                        bases.append(base)
                        named = self._by_src_name.get((src, fam, base), ())
                        nxt += [self._sym[k] for k in named[:20]]
            if not bases:
                return
            yield bases
            frontier = nxt

    def _forms(self, src: str, fam: str, name: str, rows: list[int]) -> Forms:
        """The definitions of ``name`` in ``src`` and language family ``fam`` (``rows``) split
        once: members, functions, members by their class's name and by its name lower-cased,
        and an empty cache of the kinds receivers name."""
        got = self._form_cache.get((src, fam, name))
        if got is None:
            members = [j for j in rows if "." in self._sym[j]]
            functions = [j for j in rows if "." not in self._sym[j]]
            by_owner: dict[str, list[int]] = {}
            by_lower: dict[str, list[int]] = {}
            for j in members:
                owner = self._sym[j].split(".")[-2]
                by_owner.setdefault(owner, []).append(j)
                by_lower.setdefault(owner.lower(), []).append(j)
            got = (members, functions, by_owner, by_lower, {})
            self._form_cache[(src, fam, name)] = got
        return got


_DUNDER: Final = re.compile(r"__\w+__$")
"""A Python special method (``__enter__``, ``__call__``): every kind of object has one."""
_WORD: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+")
"""The words of an identifier: ``jobStore`` and ``job_store`` -> ``job``, ``store``."""


def _kind_named(last: str, by_owner: dict[str, list[int]]) -> list[int]:
    """The members of the classes named for the receiver ``last`` (its last part): whose name
    ends with it, or whose last word begins with it (``proto``: a ``…Protocol``), else with
    its last word, and so on: ``executor.start()`` means a ``BaseExecutor``'s or
    ``ThreadPoolExecutor``'s ``start``, ``jobstore_instance.add_job`` a ``BaseJobStore``'s,
    not the ``start`` of the class the call is written in; [] when no class of the name's
    definitions is named so, or when the receiver is no name (``super(A, self)``,
    ``items[0]``). Words shorter than 3 letters name no kind."""
    if not last.isidentifier() or last.lstrip("_")[:1].isupper():  # ``mod.Client.get``: a
        return []  # class, not an instance of one
    words = [w.lower() for w in _WORD.findall(last)]
    for word in dict.fromkeys(["".join(words), *reversed(words)]):
        if len(word) >= 3:
            found = [j for owner, rows in by_owner.items() if _names(owner, word) for j in rows]
            if found:
                return found
    return []


def _names(owner: str, word: str) -> bool:
    """Whether the class ``owner`` is of the kind ``word`` (lower case) names."""
    kind = owner.lower()
    return kind.endswith(word) or bool(
        (last := _WORD.findall(owner)) and last[-1].lower().startswith(word)
    )


def owner_name(symbol: str) -> str:
    """The last name of the class a member belongs to (``BaseExecutor`` of
    ``BaseExecutor.start`` and of ``App\\Http::BaseExecutor::start``), or ``""``."""
    parts = _MEMBER.split(symbol)
    return parts[-2] if len(parts) > 1 else ""
