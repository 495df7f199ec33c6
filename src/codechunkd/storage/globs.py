"""A ``--path`` glob as a LanceDB filter: ``LIKE`` where it can, a regular expression where not.

Owns the translation of a glob (``*``, ``?``, ``[…]``, ``[!…]``; ``*`` also matches ``/``)
into SQL, linear in the glob's length whatever it holds (hostile input: a glob comes from
a request).  Pure text: it must not read the index (``storage/search.py`` filters with it).
"""

from __future__ import annotations

from codechunkd.storage.rows import quote


def path_filter(glob: str) -> str:
    """The SQL filter of a ``--path`` glob: ``*``, ``?`` and ``[…]``/``[!…]`` as in fnmatch.

    ``*`` also matches ``/``.  A glob without a character class is a ``LIKE`` (which a
    scalar index can serve); one with a class is a regular expression (``LIKE`` has none).
    An unclosed ``[`` is a literal ``[``, as in fnmatch.
    """
    regex = _glob_regex(glob)
    if regex is None:
        return f"path LIKE {quote(glob_to_like(glob))} ESCAPE '\\'"
    return f"regexp_like(path, {quote(regex)})"


_REGEX_META = frozenset("\\.+*?()|[]{}^$")
_CLASS_META = frozenset("\\[]&~^-")  # ``&&``, ``~~`` and ``--`` are set operations in Rust regex
_NOTHING = "[^\\s\\S]"
"""A class that matches no character (``[z-a]``: fnmatch drops a reversed range)."""


def _next_close(glob: str) -> list[int]:
    """For each position, the index of the first ``]`` at or after it (``len(glob)``: none).

    Looked up rather than scanned for at each ``[``: a scan made 20,000 unclosed ``[``
    quadratic (162 s); the lookup keeps the parse linear in the glob's length.
    """
    closes = [len(glob)] * (len(glob) + 1)
    for pos in range(len(glob) - 1, -1, -1):
        closes[pos] = pos if glob[pos] == "]" else closes[pos + 1]
    return closes


def _glob_regex(glob: str) -> str | None:
    """The anchored regex of a glob that has a character class; None when it has none.

    Linear in the glob's length (each character is read once, each class's end looked up).
    """
    out: list[str] = []
    has_class = False
    i, n = 0, len(glob)
    closes = _next_close(glob)
    while i < n:
        ch = glob[i]
        i += 1
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            j = i + 1 if i < n and glob[i] in "!^" else i
            j = j + 1 if j < n and glob[j] == "]" else j  # a leading ``]`` is literal
            j = closes[j] if j < n else n
            if j >= n:  # unclosed: a literal ``[``
                out.append("\\[")
                continue
            body, i = glob[i:j], j + 1
            negate = body[:1] in {"!", "^"}
            out.append(_class_regex(body[negate:], negate))
            has_class = True
        else:
            out.append("\\" + ch if ch in _REGEX_META else ch)
    return f"(?s)^{''.join(out)}$" if has_class else None


def _class_regex(body: str, negate: bool) -> str:
    """A glob's ``[…]`` (its body without the ``!``) as a regex class, read as fnmatch reads
    it: ``a-z`` a range, a ``-`` first or last a literal, a reversed range (``z-a``) dropped.

    Every character is escaped where Rust regex gives it a meaning in a class (``--`` would
    be a set difference there).  No character left: the class matches nothing, or, negated,
    any character.
    """
    items: list[str] = []
    k, n = 0, len(body)
    while k < n:
        if k + 2 < n and body[k + 1] == "-":
            lo, hi = body[k], body[k + 2]
            k += 3
            if lo <= hi:
                items.append(f"{_class_char(lo)}-{_class_char(hi)}")
        else:
            items.append(_class_char(body[k]))
            k += 1
    if not items:
        return "." if negate else _NOTHING
    return f"[{'^' if negate else ''}{''.join(items)}]"


def _class_char(ch: str) -> str:
    return "\\" + ch if ch in _CLASS_META else ch


def glob_to_like(glob: str) -> str:
    out = []
    for ch in glob:
        if ch in "%_\\":
            out.append("\\" + ch)
        elif ch == "*":
            out.append("%")
        elif ch == "?":
            out.append("_")
        else:
            out.append(ch)
    return "".join(out)
