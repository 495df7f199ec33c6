"""Queries that name code: a query that is a symbol's name (``HTTPAdapter``, ``where is
Context.invoke defined``, ``json.Unmarshal``) and the code names a sentence mentions
(``HelpFormatter``, ``parse_args``), and the boosts they give the chunks that define them.

``storage/search.py`` adds :func:`symbol_boosts` (the ``symbol`` rule) and, opt-in,
:func:`named_in_sentence` (``symbol_in_query``) to the fused scores. A definition is found
by its chunk's ``symbol``, or through the ``references`` table's definition rows: a
constant, variable or field (``MAX_RETRIES = 3``, ``Color.RED``) lives in module code or a
class body, whose chunks have no symbol of their own.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from codechunkd.storage import ranking
from codechunkd.storage.globs import glob_to_like
from codechunkd.storage.rows import quote

if TYPE_CHECKING:
    from codechunkd.storage.lance_reader import ChunkReader

__all__ = [
    "SYMBOL_EXACT_BOOST",
    "SYMBOL_IN_SENTENCE_BOOST",
    "SYMBOL_PREFIX_BOOST",
    "code_names",
    "named_in_sentence",
    "symbol_boosts",
    "symbol_query",
]

SYMBOL_EXACT_BOOST = 2.0
"""Added to a chunk whose symbol the query names: above any fused score (at most 1) and a
prefix nudge together."""
SYMBOL_PREFIX_BOOST = 0.55
"""Added to a chunk whose symbol starts with the name the query is: a nudge."""
SYMBOL_IN_SENTENCE_BOOST = 1.0
"""Added to a definition of a code name a sentence mentions (opt-in ``symbol_in_query``):
half a named symbol's."""
_NAME = re.compile(
    r"`([^`\s]{2,80})`|\b([A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*)"
)


def code_names(text: str) -> list[str]:
    """The words of a sentence written as code: in backticks, or with an underscore, an
    inner capital (``HelpFormatter``, ``getUserName``), a dot or ``::`` between names."""
    out: list[str] = []
    for quoted, word in _NAME.findall(text):
        name = (quoted or word).strip("()")
        if not re.fullmatch(r"[A-Za-z_][\w.:]*", name):
            continue
        coded = bool(quoted) or "_" in name.strip("_") or "." in name or "::" in name
        coded = coded or bool(re.search(r"[a-z][A-Z]", name)) or name.startswith("_")
        if coded and len(name) > 2 and name not in out:
            out.append(name)
    return out


_SYMBOL_QUERY = re.compile(
    r"(?:(?:where\s+(?:is|are)|find|show(?:\s+me)?|locate|definition\s+of)\s+)?"
    r"(?:the\s+)?`?(?P<name>[A-Za-z_][\w]*(?:(?:\.|::)[A-Za-z_]\w*)*)`?"
    r"(?:\s+(?:class|function|method|interface|type|struct|exception|trait|enum|constant))?"
    r"(?:\s+(?:is\s+)?(?:defined|implemented|declared|located))?\s*\??",
    re.I,
)


def symbol_query(text: str) -> str | None:
    """The name a query asks for when the query is a name: ``HTTPAdapter``,
    ``Context.invoke``, ``where is HelpFormatter defined``, ``find the Option class``."""
    text = text.strip()
    if re.fullmatch(r"[A-Za-z_][\w.:]*", text):
        return text
    m = _SYMBOL_QUERY.fullmatch(text)
    return m.group("name") if m and m.group("name").lower() not in _NOT_NAMES else None


_NOT_NAMES = frozenset({"where", "find", "show", "the", "is", "are", "locate"})


def _named(name: str) -> str:
    """An SQL condition for the symbols a name names: itself, or any symbol ending with its
    last part after ``.`` or ``::`` (``Context.invoke`` and ``invoke`` both name
    ``Context.invoke``; ``ResourceConstraints`` names C++'s ``v8::ResourceConstraints``,
    ``wrap`` Perl's ``Text::Wrap::wrap``, ``UserService`` PHP's
    ``google\\appengine\\api\\users::UserService``)."""
    last = glob_to_like(ranking.last_name(name))
    ends = " OR ".join(f"symbol LIKE {quote(sep + last)} ESCAPE '\\'" for sep in ("%.", "%::"))
    return f"symbol = {quote(name)} OR {ends}"


def _constructor(symbol: str) -> bool:
    """A C++, Java or PHP constructor: a member named as its class (``geo::Circle::Circle``),
    which asking for the class (``Circle``) must not put before the class."""
    parts = re.split(r"\.|::", symbol)
    return len(parts) >= 2 and parts[-1] == parts[-2]


def _qualified(name: str) -> str:
    """An SQL alternative for a name qualified by its package or module (``json.Unmarshal``,
    ``bufio.Reader``, ``url.Values``): the symbol ``Unmarshal`` in a file whose folder or
    stem is ``json``."""
    parts = re.split(r"\.|::", name)
    if len(parts) != 2 or not all(parts):
        return ""
    pkg, sym = parts
    globs = (f"*/{pkg}/*", f"{pkg}/*", f"*/{pkg}.*", f"{pkg}.*")
    like = " OR ".join(f"path LIKE {quote(glob_to_like(g))} ESCAPE '\\'" for g in globs)
    return f" OR (symbol = {quote(sym)} AND ({like}))"


def symbol_boosts(store: ChunkReader, text: str, where: str | None) -> dict[str, float]:
    """Chunks whose symbol the query names: exactly (strong) or by prefix (a nudge)."""
    name = symbol_query(text)
    if name is None:
        return {}
    cond = f"({_named(name)}{_qualified(name)}{_defining(store, name)})"
    rows = store.select(" AND ".join(x for x in (cond, where) if x), ["id", "symbol"], limit=50)
    ctor = _constructor(name)  # ``Circle::Circle`` asked for: the constructor itself
    boosts = {
        r["id"]: SYMBOL_PREFIX_BOOST
        if _constructor(r["symbol"]) and not ctor
        else SYMBOL_EXACT_BOOST
        for r in rows
    }
    if len(name) >= 3:
        like = glob_to_like(name)
        starts = f"(symbol LIKE {quote(like + '%')} ESCAPE '\\'"
        starts += f" OR symbol LIKE {quote('%::' + like + '%')} ESCAPE '\\')"
        prefix = store.select(
            " AND ".join(x for x in (starts, where) if x),
            ["id"],
            limit=50,
        )
        for r in prefix:
            boosts.setdefault(r["id"], SYMBOL_PREFIX_BOOST)
    return boosts


def _defining(store: ChunkReader, name: str) -> str:
    """An SQL alternative for the chunks whose definitions in the ``references`` table
    ``name`` names as ``_named`` does: a constant, variable or field (``MAX_RETRIES``,
    ``Color.RED``), or a function that shares its chunk with others; ``""`` for none."""
    refs = store.references_snapshot()
    if refs is None:
        return ""
    last = ranking.last_name(name)
    rows = refs.scan(
        ["chunk_id", "qualifier"],
        f"kind = 'definition' AND name IN ({quote(last)}, {quote(last.lower())})",
    )
    quals = rows.column("qualifier").to_pylist()
    ids = sorted(
        {
            cid
            for cid, qual in zip(rows.column("chunk_id").to_pylist(), quals, strict=True)
            if qual == name or qual.endswith((f".{last}", f"::{last}"))
        }
    )[:50]
    return f" OR id IN ({', '.join(map(quote, ids))})" if ids else ""


def named_in_sentence(store: ChunkReader, text: str, where: str | None) -> dict[str, float]:
    """Definitions of the code names a sentence mentions (``HelpFormatter``,
    ``parse_args``, ``Context.invoke``, anything in backticks): each gets
    :data:`SYMBOL_IN_SENTENCE_BOOST`, half a named symbol's."""
    if symbol_query(text) is not None:
        return {}  # the query is a name: symbol_boosts answers it
    names = code_names(text)[:3]
    if not names:
        return {}
    cond = "(" + " OR ".join(f"({_named(name)})" for name in names) + ")"
    rows = store.select(" AND ".join(x for x in (cond, where) if x), ["id"], limit=50)
    return {r["id"]: SYMBOL_IN_SENTENCE_BOOST for r in rows}
