"""``codechunkd defs``, ``refs`` and ``map``: the reference graph on the command line.

Owns the three commands' parsers and how their answers print (text, or ``--json`` as the
MCP tools give them: ``storage.refviews``).  The graph is read through ``storage.reader``
(``open_index``), imported inside each command; this module must not resolve references
or rank files itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

import codechunkd.cli.common as common
from codechunkd.display import printable
from codechunkd.storage.refviews import (
    MAX_BUDGET,
    MAX_DEPTH,
    definition_dicts,
    located,
    map_folder,
    reference_dicts,
    source_roots,
    working_checkout,
)

__all__ = ["COMMANDS", "add_parsers"]


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("defs", help="where a name is defined or bound (from the references table)")
    p.add_argument("name", help="a name (request) or a qualified one (Session.request)")
    common.repo_options(p)
    common.options(p)
    p = sub.add_parser("refs", help="who uses a symbol: each use and how it was resolved")
    p.add_argument("name", help="a name (request) or a qualified one (Session.request)")
    common.repo_options(p)
    p.add_argument("--calls", action="store_true", help="only calls (the callers)")
    p.add_argument("--callees", action="store_true", help="what the symbol calls instead")
    p.add_argument(
        "--depth",
        type=int,
        default=1,
        help=f"the callers of the callers too, this many levels up (1-{MAX_DEPTH}; "
        "implies --calls): what a change can reach",
    )
    common.options(p)
    p = sub.add_parser("map", help="the files and signatures that matter most, within a budget")
    p.add_argument(
        "path", nargs="?", default="", help="only files under this folder (relative to this one)"
    )
    p.add_argument("--budget", type=int, default=1024, help="tokens (default 1024)")
    p.add_argument(
        "--repo", help="this repository (default: the one you are in, else the only one indexed)"
    )
    common.options(p)


def _repo(args: argparse.Namespace, roots: Mapping[str, str]) -> str | None:
    """``--repo``: the indexed repository the folder it names is in (``--repo .``)."""
    return common.indexed_repo(args.repo, set(roots.values()))


def _scope(args: argparse.Namespace, roots: Mapping[str, str]) -> None:
    """``args.scope``: the repository ``defs`` and ``refs`` read (``common.scope``), and
    ``args.roots``, every indexed one, for the note an empty answer gets."""
    args.roots = set(roots.values())
    args.scope = common.scope(args, args.roots)


def _print(args: argparse.Namespace, value: Any, lines: list[str]) -> None:
    if args.json:
        sys.stdout.write(json.dumps(value, indent=1) + "\n")
    else:
        sys.stdout.write("".join(f"{printable(line)}\n" for line in lines))


def cmd_defs(args: argparse.Namespace) -> int:
    from codechunkd.storage.reader import open_index

    index = open_index(settings=common.settings(args))
    roots = source_roots(index)
    _scope(args, roots)
    defs = index.definitions(args.name, repo=args.scope, prefer=working_checkout(roots))
    dicts = definition_dicts(defs, roots)
    where = located(dicts)
    _print(args, dicts, [f"{where(d)}:{d['line']}  {d['symbol']}  [{d['id']}]" for d in dicts])
    if not defs:
        _none(args, "definition")
    return 0 if defs else 1


def _none(args: argparse.Namespace, what: str) -> None:
    """An empty answer said on stderr (stdout stays empty, ``[]`` with ``--json``):
    ``no definition of 'Foo' in the index (…)``."""
    if not args.json:
        where = args.scope or "the index"
        note = common.scope_note(args, args.scope, args.roots)
        sys.stderr.write(
            printable(f"no {what} of {args.name!r} in {where}")
            + " (names are case-sensitive; a member is Class.method or ns::Class::method)\n"
            + (f"note: {printable(note)}\n" if note else "")
        )


def cmd_refs(args: argparse.Namespace) -> int:
    from codechunkd.storage.reader import open_index

    index = open_index(settings=common.settings(args))
    roots = source_roots(index)
    _scope(args, roots)
    if args.depth != 1:
        return _impact(args, index, roots)
    if args.callees:
        uses = index.callees(args.name, repo=args.scope)
    else:
        kinds = ["call"] if args.calls else None
        prefer = working_checkout(roots)
        uses = index.refs.references(args.name, repo=args.scope, kinds=kinds, prefer=prefer)
    dicts = reference_dicts(uses, roots)
    where = located(dicts)
    lines = [_use_line(u, where(d), target=args.callees) for u, d in zip(uses, dicts, strict=True)]
    _print(args, dicts, lines)
    if not uses:  # a name the index does not define (a typo) is said so
        defined = index.definitions(args.name, repo=args.scope)
        _none(args, "definition" if not defined else "callees" if args.callees else "uses")
    return 0


def _impact(args: argparse.Namespace, index: Any, roots: Mapping[str, str]) -> int:
    """``refs NAME --depth N``: the callers, their callers, … ``N`` levels up, each line
    indented by its level and saying which definition it calls."""
    from codechunkd.errors import ConfigError

    if not 1 <= args.depth <= MAX_DEPTH:
        raise ConfigError(f"--depth must be 1 to {MAX_DEPTH}, got {args.depth}", key="depth")
    if args.callees:
        raise ConfigError("--depth follows callers: it goes with --calls, not --callees")
    found = index.refs.impact(
        args.name, depth=args.depth, repo=args.scope, prefer=working_checkout(roots)
    )
    dicts = reference_dicts([u for _, u in found], roots)
    value = [{"depth": level, **d} for (level, _), d in zip(found, dicts, strict=True)]
    where = located(dicts)
    lines = [
        "  " * (level - 1) + _use_line(u, where(d), target=True)
        for (level, u), d in zip(found, dicts, strict=True)
    ]
    _print(args, value, lines)
    if not found:
        defined = index.definitions(args.name, repo=args.scope)
        _none(args, "definition" if not defined else "callers")
    return 0


def _use_line(u: Any, where: str, *, target: bool) -> str:
    """``requests/api.py:70  call    sessions.Session  in request  [imported]``."""
    qual = f"{u.qualifier}." if u.qualifier and u.kind != "import" else ""
    to = f" -> {u.target.symbol}" if target and u.target else ""
    caller = u.chunk_symbol or "(module)"
    how = f"[{u.how or 'unresolved'}{to}]"
    return f"{where}:{u.line}  {u.kind:<7} {qual}{u.name}  in {caller}  {how}"


def cmd_map(args: argparse.Namespace) -> int:
    from codechunkd.chunking.tokens import counter_for
    from codechunkd.errors import ConfigError
    from codechunkd.storage.reader import open_index
    from codechunkd.storage.repomap import render

    if not 1 <= args.budget <= MAX_BUDGET:
        raise ConfigError(
            f"--budget must be 1 to {MAX_BUDGET} tokens, got {args.budget}", key="budget"
        )
    s = common.settings(args)
    index = open_index(settings=s)
    roots = source_roots(index)
    repo = _repo(args, roots) or working_checkout(roots)
    place = map_folder(args.path, repo, set(roots.values()))
    if place is None:
        raise common.not_indexed(args.path, set(roots.values()), key="path")
    repo, folder = place
    entries = index.refs.repo_map(
        count_tokens=counter_for(s.embedding.model), budget=args.budget, repo=repo, path=folder
    )
    value = [
        {
            "path": e.path,
            "rank": e.rank,
            "definitions": [{"id": i, "signature": g, "line": n} for i, g, n in e.definitions],
        }
        for e in entries
    ]
    if args.json:
        sys.stdout.write(json.dumps(value, indent=1) + "\n")
    else:
        sys.stdout.write("".join(f"{printable(line)}\n" for line in render(entries).splitlines()))
    if not entries and not args.json:
        under = f"indexed files under {folder}" if folder else "references indexed"
        sys.stderr.write(printable(f"no {under} in {repo or 'the index'}") + "\n")
    return 0 if entries else 1


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "defs": cmd_defs,
    "refs": cmd_refs,
    "map": cmd_map,
}
