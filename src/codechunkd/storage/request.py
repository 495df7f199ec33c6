"""One search request, the same value at every door: CLI, control socket, MCP, reader.

The search options used to be spelled out at each door (two CLI paths, the
control socket's ``search`` handler, ``Index.search``), and the socket accepted
both ``lang`` and ``language``.  ``SearchRequest`` is the one value: built from
keyword arguments or from the JSON document the control socket reads, checked
once (a bad value is a ``ConfigError`` naming the field, never a crash of the
server that received it), and turned into the storage ``Filters``.

The JSON form is the control socket's ``search`` request as it is today, minus
``cmd``::

    {"query": "parse the config", "k": 10, "mode": "hybrid", "repo": "/abs/repo",
     "branch": null, "commit": null, "path": "src/*.py", "language": "python",
     "kind": null, "context": false, "stale": false}

``from_json`` also takes the older ``lang`` for ``language``, ignores ``cmd``,
treats ``null``/``""`` as "not given" (as the daemon always did), and refuses
unknown keys.  ``to_json`` writes ``language``, which the daemon has always
accepted, so either end can adopt this value first.

Sizes are capped here, at the one place every door passes: a query of at most
:data:`MAX_QUERY_CHARS` characters and filters of at most :data:`MAX_FILTER_CHARS` each
(docs/operations.md, "Limits").  Past a cap the error gives the length and the limit, never
the value; no error here repeats more than :data:`SHOWN_CHARS` characters of what it got.

Importing this module costs nothing (no numpy, no LanceDB): clients that only
talk to the daemon use it too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from codechunkd.errors import ConfigError

if TYPE_CHECKING:
    from codechunkd.storage.search import Filters

MODES = ("hybrid", "vector", "text")
"""The values of ``storage.search.Mode`` (repeated here so this module imports nothing)."""
MAX_K = 1000
MAX_QUERY_CHARS = 16_000
"""The longest query, in characters: a 300-line code fragment.  The model reads its first
256 tokens (about 1,000 characters) and full-text search each word, so a longer query finds
nothing more, and a 20 MB one took minutes."""
MAX_FILTER_CHARS = 4_096
"""The longest filter value (``repo``, ``path`` glob, ``branch``, …), in characters: Linux's
``PATH_MAX``."""
SHOWN_CHARS = 60
"""At most this much of a bad value is repeated in an error (then ``…``)."""
FILTER_KEYS = ("repo", "branch", "commit", "path", "language", "kind")
FLAG_KEYS = ("context", "stale")
PATH_KEYS = ("repo", "prefer")
"""Absolute paths: a filter (``repo``), and the checkout whose copies to give (``prefer``)."""
STRING_KEYS = (*FILTER_KEYS, "prefer")
KEYS = frozenset({"query", "k", "mode", *STRING_KEYS, *FLAG_KEYS, "disable", "enable"})
ALIASES = {"lang": "language"}
IGNORED = frozenset({"cmd"})
"""The control socket's envelope: part of the document, not of the request."""


def shown(value: Any) -> str:
    """``repr(value)``, cut to :data:`SHOWN_CHARS` characters: what an error may repeat."""
    if isinstance(value, str) and len(value) > SHOWN_CHARS:
        value = value[:SHOWN_CHARS]
        return repr(value)[:-1] + "…" + repr(value)[-1]
    if isinstance(value, list | dict | tuple) and len(value) > 10:
        return f"a {type(value).__name__} of {len(value):,} items"
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit limit for str()
        return "a number too large to show"
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_length(key: str, value: Any, limit: int) -> None:
    if isinstance(value, str) and len(value) > limit:
        what = "the query" if key == "query" else key
        raise ConfigError(f"{what} is {len(value):,} characters; the limit is {limit:,}", key=key)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchRequest:
    """What to search for, how many, how to rank, which rows, and what to add to hits."""

    query: str
    """Natural language, code, or a symbol name; never empty."""
    k: int = 10
    """Number of hits, 1..``MAX_K``."""
    mode: str = "hybrid"
    """``hybrid`` (vectors + full text, fused), ``vector`` or ``text``."""
    repo: str | None = None
    """Repository root, absolute, exactly as ``codechunkd status`` shows it."""
    branch: str | None = None
    commit: str | None = None
    path: str | None = None
    """Glob on the path inside the repository (``*`` also matches ``/``)."""
    language: str | None = None
    kind: str | None = None
    context: bool = False
    """Add the signatures of the enclosing chunks (class, module) to each hit."""
    stale: bool = False
    """Flag hits whose file on disk no longer matches the indexed blob."""
    disable: tuple[str, ...] = ()
    """Ranking rules to switch off, by name (``storage.ranking.RULES``): for benches."""
    enable: tuple[str, ...] = ()
    """Opt-in ranking rules to switch on, by name (``storage.ranking.OPT_IN``)."""
    prefer: str | None = None
    """The repository root the asker works in (absolute): of a chunk indexed in several
    checkouts (a repository and its worktree), the hit is its copy there."""

    def __post_init__(self) -> None:
        _check_length("query", self.query, MAX_QUERY_CHARS)
        for key in STRING_KEYS:
            _check_length(key, getattr(self, key), MAX_FILTER_CHARS)
        if not isinstance(self.query, str):
            raise ConfigError(f"the query must be a string, got {shown(self.query)}", key="query")
        if not self.query.strip():
            raise ConfigError("the search query is empty", key="query")
        for key in ("query", *STRING_KEYS):  # a byte that is not UTF-8 (surrogateescape):
            value = getattr(self, key)  # no model, full-text index or filter can take it
            if isinstance(value, str) and not _is_text(value):
                what = "the query" if key == "query" else key
                raise ConfigError(
                    f"{what} is not Unicode text: it holds a byte that is not UTF-8 (a shell "
                    "argument in another encoding?) or a lone surrogate",
                    key=key,
                )
        if isinstance(self.k, bool) or not isinstance(self.k, int):
            raise ConfigError(f"k must be an integer, got {shown(self.k)}", key="k")
        if not 1 <= self.k <= MAX_K:
            raise ConfigError(f"k must be between 1 and {MAX_K}, got {shown(self.k)}", key="k")
        if self.mode not in MODES:  # a ``Mode`` member is a str: normalised below
            raise ConfigError(
                f"unknown search mode {shown(self.mode)} (expected one of: {', '.join(MODES)})",
                key="mode",
            )
        object.__setattr__(self, "mode", str(self.mode))
        for key in STRING_KEYS:
            value = getattr(self, key)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"{key} must be a non-empty string, got {shown(value)}", key=key)
        for key in PATH_KEYS:
            value = getattr(self, key)
            if value is not None and not os.path.isabs(value):
                raise ConfigError(
                    f"{key} must be an absolute path (the repository root), got {shown(value)}",
                    key=key,
                )
        for key in FLAG_KEYS:
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(
                    f"{key} must be true or false, got {shown(getattr(self, key))}", key=key
                )
        for key in ("disable", "enable"):
            self._check_rules(key)

    def _check_rules(self, key: str) -> None:
        from codechunkd.storage.ranking import RULES

        names: object = getattr(self, key)  # from JSON: anything
        if isinstance(names, str) or not isinstance(names, list | tuple):
            raise ConfigError(f"{key} must be a list of rule names, got {shown(names)}", key=key)
        unknown = [n for n in names if n not in RULES]
        if unknown:
            raise ConfigError(
                f"unknown ranking rule {shown(unknown[0])} (known: {', '.join(RULES)})", key=key
            )
        object.__setattr__(self, key, tuple(names))

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SearchRequest:
        """The request in a control-socket document (``cmd`` ignored, ``lang`` accepted)."""
        if not isinstance(doc, Mapping):
            raise ConfigError(f"a search request is a JSON object, got {type(doc).__name__}")
        values: dict[str, Any] = {}
        for raw_key, value in doc.items():
            if raw_key in IGNORED:
                continue
            key = ALIASES.get(raw_key, raw_key)
            if key not in KEYS:
                known = ", ".join(sorted(KEYS | ALIASES.keys()))
                raise ConfigError(
                    f"unknown search option {shown(raw_key)} (known: {known})",
                    key=raw_key if isinstance(raw_key, str) else None,
                )
            if value is None or value == "":
                continue  # "not given", as the daemon has always read it
            if key in values and values[key] != value:
                raise ConfigError(
                    f"conflicting values for {key}: {shown(values[key])} and {shown(value)}",
                    key=key,
                )
            values[key] = value
        if "query" not in values:
            raise ConfigError("the search query is empty", key="query")
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        """The document the control socket's ``search`` reads (add ``"cmd": "search"``);
        ``disable``, ``enable`` and ``prefer`` only when given, so a daemon from before them
        still reads the rest."""
        doc = asdict(self)
        for key in ("disable", "enable", "prefer"):
            if not doc[key]:
                del doc[key]
            elif key != "prefer":
                doc[key] = list(doc[key])
        return doc

    def filters(self) -> Filters:
        """The row filters, as ``storage.search`` applies them."""
        from codechunkd.storage.search import Filters

        return Filters(
            repo=self.repo,
            branch=self.branch,
            commit=self.commit,
            path=self.path,
            language=self.language,
            kind=self.kind,
        )


__all__ = ["MAX_FILTER_CHARS", "MAX_K", "MAX_QUERY_CHARS", "MODES", "SearchRequest"]
