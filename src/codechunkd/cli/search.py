"""``codechunkd search``: one search request, asked of a running daemon or run here.

Owns the command's parser, the request it builds (the same ``SearchRequest`` every door
uses), the check of ``--lang``, asking the daemon over its socket, searching in this process
when no daemon answers, and printing the hits.  The search itself is ``storage.reader``;
this module must not import LanceDB or the model at its top (``main`` imports it for every
command), and must not rank or filter hits itself.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from typing import Any

import codechunkd.cli.common as common
from codechunkd.config import Settings
from codechunkd.storage.request import MAX_K, SearchRequest


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("search", help="search the index (hybrid: vectors + full text)")
    p.add_argument("query", help="natural-language or code query, or a symbol name")
    p.add_argument("-k", type=int, default=10, help=f"number of results, 1 to {MAX_K} (default 10)")
    p.add_argument("--mode", choices=["hybrid", "vector", "text"], default="hybrid", help="ranking")
    common.repo_options(p)
    p.add_argument("--branch", help="only rows indexed on this branch")
    p.add_argument("--commit", help="only rows indexed at this commit")
    p.add_argument("--path", help="only paths matching this glob")
    p.add_argument(
        "--lang", help="only this language (python, typescript, markdown, …; checked, not guessed)"
    )
    p.add_argument("--kind", help="only this kind (function, method, class, …)")
    p.add_argument("--context", action="store_true", help="add enclosing class/module signatures")
    p.add_argument("--stale", action="store_true", help="flag hits whose file changed on disk")
    common.options(p)


def _search_request(args: argparse.Namespace, roots: set[str]) -> SearchRequest:
    """The command line's search as the one request every door uses (``--lang`` is ``language``).

    Built with ``from_json``, as the daemon parses it: an empty flag means "not given"
    on either path.  A bad ``-k`` keeps the flag's name in its error.  The repository is
    ``--repo``'s, else the one the current folder is in (``common.scope``); of a chunk
    indexed in several checkouts, the copy in the one the current folder is in is shown,
    not another checkout's file that a user in this one would open and edit by mistake.
    """
    from codechunkd.errors import ConfigError
    from codechunkd.storage.refviews import repository_of

    repo, here = common.scope(args, roots), repository_of(".", roots)
    try:
        return SearchRequest.from_json(
            {
                "query": args.query,
                "k": args.k,
                "mode": args.mode,
                "repo": repo,
                "branch": args.branch,
                "commit": args.commit,
                "path": args.path,
                "language": args.lang,
                "kind": args.kind,
                "context": args.context,
                "stale": args.stale,
                "prefer": here,
            }
        )
    except ConfigError as exc:
        if exc.key == "k":
            raise ConfigError(f"-{exc}", key="k") from None
        raise


def _roots(args: argparse.Namespace) -> set[str]:
    """The indexed repositories, as state.json names them: one read, no LanceDB import."""
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.statefile import indexed_roots

    return indexed_roots(IndexPaths.of(common.settings(args)).state_file)


def _check_language(language: str | None, settings: Settings) -> None:
    """A ``--lang`` no file can have is an error naming the known ones (not "no results")."""
    if language is None:
        return
    import difflib

    from codechunkd.chunking.languages import known_languages
    from codechunkd.errors import ConfigError

    known = known_languages(settings.chunking.extensions)
    if language in known:
        return
    close = difflib.get_close_matches(language, sorted(known), n=3)
    guess = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise ConfigError(
        f"unknown language {language!r} for --lang{guess} (known: {', '.join(sorted(known))})",
        key="language",
    )


def _search_via_daemon(args: argparse.Namespace, req: SearchRequest) -> dict[str, Any] | None:
    """The answer of a running daemon (warm model): ``hits``, and ``partial`` while a first
    index runs; None when no daemon answers (or it answers an error: search here instead)."""
    from codechunkd.daemon.control import DaemonUnavailable, daemon_pid, request
    from codechunkd.storage.layout import IndexPaths

    paths = IndexPaths.of(common.settings(args))
    try:
        answer = request(
            paths.socket,
            {"cmd": "search", **req.to_json()},
            timeout=60.0,
            running=lambda: daemon_pid(paths),
        )
    except DaemonUnavailable:
        return None
    if not isinstance(answer, dict) or "hits" not in answer:
        return None
    return answer


def _coverage_notes(answer: dict[str, Any] | None) -> list[str]:
    """``note: ...`` (a search answered without its query vector, and why) and the coverage
    while it is incomplete (``coverage: text 2,303/2,303 chunks · vectors 412/2,303``)."""
    if not answer:
        return []
    from codechunkd.display import printable

    # a server's error text is in it (a reranker's, the model's): no escape reaches the terminal
    lines = [f"note: {printable(str(answer['note']))}"] if answer.get("note") else []
    cov = answer.get("coverage") or {}
    if cov and cov.get("vector_chunks", 0) < cov.get("text_chunks", 0):
        lines.append(f"coverage: {cov.get('text')}")
    return lines


def _search_here(
    settings: Settings, req: SearchRequest
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Search the index in this process: Lance alone, no LanceDB (``open_index``); the
    query model loads on a thread meanwhile (onnxruntime releases the GIL for much of it).
    No child process for the vector: it would import numpy and the model's runtime a
    second time, for a small gain in wall time now that opening the index is quick.
    With the hits comes the coverage while it is incomplete (as a daemon's answer has it)."""
    import threading

    from codechunkd.storage.reader import open_index, query_embedder

    warm: threading.Thread | None = None
    embedder = None
    if req.mode != "text":
        embedder = query_embedder(settings)
        warm = threading.Thread(target=_warm_up, args=(embedder, req.query), daemon=True)
        warm.start()
    index = open_index(settings=settings, embedder=embedder)
    if warm is not None:
        warm.join()
    found, notes = index.answer(req)
    hits = [h.as_dict() for h in found]
    cov = index.coverage(repo=req.repo)
    about: dict[str, Any] = {"note": "; ".join(notes)} if notes else {}
    if not cov.complete:
        about["coverage"] = {**cov.as_dict(), "text": cov.text()}
    return hits, (about or None)


def _warm_up(embedder: Any, query: str) -> None:
    """Load the query model (and embed the query) while the index opens.  A failure is left
    to the search, which embeds the query again and says what went wrong in one line (a
    thread's exception printed a traceback)."""
    with contextlib.suppress(Exception):
        embedder.embed([query])


def cmd_search(args: argparse.Namespace) -> int:
    roots = _roots(args)
    req = _search_request(args, roots)
    _check_language(req.language, common.settings(args))
    answer = _search_via_daemon(args, req)
    hits: list[dict[str, Any]] | None = answer["hits"] if answer else None
    partial = answer.get("partial") if answer else None
    if hits is None:  # no daemon: search here (loads the query model in this process)
        hits, answer = _search_here(common.settings(args), req)
    out = sys.stderr if args.json else sys.stdout  # stdout keeps its shape under --json
    if partial:
        from codechunkd.daemon.status import partial_text

        out.write(f"partial: {partial_text(partial)}\n")
    for line in _coverage_notes(answer):
        out.write(line + "\n")
    if args.json:
        common.print_json(hits)
        return 0
    _print_hits(hits, req.query)
    if not hits and (note := common.scope_note(args, req.repo, roots)):
        print(f"note: {note}")
    return 0


def _print_hits(hits: Sequence[dict[str, Any]], query: str) -> None:
    """One line per hit, then its snippet indented: every path, symbol and line of text
    through ``display.printable``, so a file name or a chunk holding a newline or an
    escape sequence can neither forge a hit line nor drive the terminal."""
    from codechunkd.chunking.snippet import dedent
    from codechunkd.display import called_by, printable
    from codechunkd.storage.refviews import located

    if not hits:
        print("no results")
        return
    tty = sys.stdout.isatty()
    words = {w.lower() for w in query.replace(".", " ").split() if len(w) > 2}

    def mark(line: str) -> str:
        if not tty or not words:
            return line
        return " ".join(
            f"\033[1m{t}\033[0m" if t.lower().strip("(),:") in words else t for t in line.split(" ")
        )

    path = located(hits)  # each file by its full path when the hits span repositories
    for h in hits:
        flag = "  [stale]" if h.get("stale") else ""
        where = f"{printable(path(h))}:{h['start_line']}-{h['end_line']}"
        print(f"{where}  {printable(h['symbol'] or '-')}  {h['score']:.4f}{flag}")
        for ctx in h.get("context") or ():
            print(f"    in: {printable((ctx.splitlines() or [''])[0][:110], keep_tab=True)}")
        if h.get("callers"):
            print(f"    called by: {called_by(h['callers'])}")
        shown = dedent(h["content"], str(h.get("language") or ""))
        snippet = [line for line in shown.splitlines() if line.strip()][:4]
        for line in snippet:
            print(f"    {mark(printable(line[:120], keep_tab=True))}")
