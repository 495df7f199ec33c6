"""Where the MCP tools' answers come from: the daemon when one answers, else the index on disk.

Owns ``Backend``: a search goes to the running daemon (its warm model, over the control
socket) and otherwise to the index, opened read-only here on first use or ahead of it
(``warm``); the choice is made per call, so a daemon stopped or started under the server is
followed at once.  It must not
render text for the agent (render.py), declare tools (tools.py), take the writer's lock or
import LanceDB at the top (``index()`` imports the reader lazily).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from codechunkd import logs
from codechunkd.config import Settings
from codechunkd.daemon.control import DaemonUnavailable, daemon_pid, request
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.refviews import beyond, containing, in_repository, repository_of
from codechunkd.storage.request import MAX_FILTER_CHARS, SearchRequest, shown

log = logs.get_logger("codechunkd.mcp")


class Answers(Protocol):
    """What the tools ask (tools.py, refs.py): ``Backend`` here, or ``worker.BackendProcess``,
    which asks a ``Backend`` in a reader process."""

    settings: Settings

    def search(
        self, req: SearchRequest, *, every: bool = False
    ) -> tuple[list[dict[str, Any]], str, dict[str, Any]]: ...
    def outline(self, path: str, repo: str | None) -> list[Any]: ...
    def values(self, path: str, ids: list[str]) -> dict[str, list[str]]: ...
    def chunk_at(self, path: str, line: int, repo: str | None) -> str: ...
    def chunks(self, ids: list[str]) -> list[tuple[Any, list[Any]]]: ...
    def status(self) -> tuple[dict[str, Any], str]: ...
    def definitions(self, name: str, repo: str | None) -> list[dict[str, Any]]: ...
    def uses(
        self,
        name: str,
        repo: str | None,
        *,
        calls_only: bool,
        callees: bool,
        limit: int,
        depth: int = 1,
    ) -> tuple[list[dict[str, Any]], int]: ...
    def repo_map(
        self, path: str, budget: int, repo: str | None
    ) -> tuple[str, list[dict[str, Any]]]: ...
    def scope_note(self, repo: str | None) -> str: ...


class ToolFailure(Exception):
    """A tool cannot answer, and says why in one line: its text is what the agent reads
    (the server makes it the SDK's ``ToolError``, ``server.CodechunkdMCP``).  Not the SDK's
    own class: the backend runs in the reader process, which never imports the SDK."""


def checked(key: str, value: str) -> str:
    """An agent's ``path`` or ``repo``, refused before it reaches the filesystem when it is
    longer than a filter may be, or holds a NUL (``Path.resolve`` takes time quadratic in a
    path's parts: an 800 KB path once held the reader for 30 s)."""
    if len(value) > MAX_FILTER_CHARS:
        raise ToolFailure(f"{key} is {len(value):,} characters; the limit is {MAX_FILTER_CHARS:,}")
    if "\x00" in value:
        raise ToolFailure(f"{key} holds a NUL character")
    return value


EVERY = "*"
"""The ``repo`` of ``search``, ``definition`` and ``references`` that means every indexed
repository; without a ``repo``, they read the one the server runs in (``Backend.scope``)."""


def repo_root(repo: str) -> str:
    """An agent's ``repo`` as the index records repositories: checked, then made absolute."""
    return str(Path(checked("repo", repo)).expanduser().resolve())


DAEMON_SEARCH_TIMEOUT = 60.0
"""The daemon's first search may load its model (seconds)."""


class Backend:
    """Answers the tools: the daemon when one answers, else the index read-only."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.paths = IndexPaths.of(settings)
        self._index: Any = None  # storage.reader.Index, opened on first use
        self._lock = threading.Lock()

    # -- where answers come from -------------------------------------------------

    def daemon(self, doc: Mapping[str, Any], *, timeout: float) -> Any | None:
        """The daemon's answer, or None when no daemon answers (stopped or silent).  A
        daemon that holds the index but has no socket yet (starting, or starting again on
        a deleted index directory) is waited for, as ``codechunkd search`` waits: there is
        no index on disk to answer from yet, or only one it is about to write."""
        try:
            return request(
                self.paths.socket, doc, timeout=timeout, running=lambda: daemon_pid(self.paths)
            )
        except DaemonUnavailable:
            return None

    def index(self) -> Any:
        """The index on disk, opened read-only once (Lance is imported only here)."""
        with self._lock:
            return self._open()

    def warm(self) -> None:
        """Open the index and run one search ahead of the first, when no daemon is listening:
        the query model, Lance's index files and the stale check's git library are then loaded
        when an agent's first search comes.  What this costs is paid by the first search
        anyway; a daemon that is there answers searches with its own model, so nothing is
        loaded here; nor with the ``remote`` backend, whose model lives on its server (a
        server that does not answer would hold the index behind its retries).  Never raises:
        a missing index or a model that cannot load is left for the tool call to report."""
        if self.paths.socket.exists() or self.settings.embedding.backend == "remote":
            return
        missing = self._missing()
        if missing:  # said in the log: the first tool call that needs the index reports it
            log.info("mcp_warm_skipped", reason=missing[:300])
            return
        t0 = time.monotonic()
        try:
            with self._lock:
                self._open().run(SearchRequest(query="warm", k=1, stale=True))
        except Exception as exc:  # noqa: BLE001 (reported by the first tool call that needs it)
            log.info("mcp_warm_skipped", reason=f"{type(exc).__name__}: {exc}"[:300])
            return
        log.info("mcp_warm", seconds=round(time.monotonic() - t0, 3))

    def _missing(self) -> str | None:
        """Why there is no index to open (one line for the agent), or None."""
        uri = self.paths.uri
        if "://" not in uri and not (Path(uri) / "chunks.lance").is_dir():
            return (
                f"no index at {uri}: run `codechunkd run PATH` (or "
                "`codechunkd index PATH`) first, or pass the right --index-dir"
            )
        return None

    def _open(self) -> Any:
        """``index()``'s body, under ``_lock``."""
        if self._index is None:
            missing = self._missing()
            if missing:
                raise ToolFailure(missing)
            from codechunkd.storage.reader import open_index

            self._index = open_index(settings=self.settings)
        return self._index

    # -- the tools ---------------------------------------------------------------

    def search(
        self, req: SearchRequest, *, every: bool = False
    ) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
        """Hits as ``Hit.as_dict()`` (as ``codechunkd search --json`` prints), their origin,
        and what the answer says of itself: ``coverage`` (chunks answering by text and by
        vector) and a ``note`` when it went without its query vector.  Of the repository
        ``req.repo`` names, else (unless ``every``) the one the server runs in."""
        from codechunkd.storage.statefile import indexed_roots

        roots = indexed_roots(self.paths.state_file)
        here = repository_of(".", roots)
        repo = self.repo_of(req.repo, roots) if req.repo else None if every else here
        # of a worktree's chunk, the copy in the checkout the server runs in (as the CLI's)
        hits, via, about = self._search(dataclasses.replace(req, repo=repo, prefer=here))
        if not req.repo and not every and (scope := self.scope_note(None, roots)):
            about["scope"] = scope
        return hits, via, about

    def scope_note(self, repo: str | None, roots: Collection[str] | None = None) -> str:
        """What a tool given ``repo`` left unread: with none given, in an indexed repository
        beside others, that only it was read (and how to read every one); else ``""``."""
        from codechunkd.storage.statefile import indexed_roots

        roots = indexed_roots(self.paths.state_file) if roots is None else roots
        here = repository_of(".", roots)
        others = beyond(here, roots) if here and not repo else 0
        if not others:
            return ""
        return (
            f"only {here} was read, the repository the server runs in ({others} other "
            f'indexed repositor{"y" if others == 1 else "ies"}: repo "{EVERY}" for every one)'
        )

    def _search(self, req: SearchRequest) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
        """``search``'s answer, from the daemon when one runs, else from the index here."""
        answer = self.daemon({"cmd": "search", **req.to_json()}, timeout=DAEMON_SEARCH_TIMEOUT)
        if isinstance(answer, dict) and isinstance(answer.get("hits"), list):
            about = {k: answer[k] for k in ("coverage", "note", "partial") if answer.get(k)}
            return answer["hits"], "daemon", about
        if isinstance(answer, dict) and answer.get("error"):
            raise ToolFailure(f"the daemon could not search: {answer['error']}")
        index = self.index()
        hits, notes = index.answer(req)
        cov = index.coverage(repo=req.repo)
        found: dict[str, Any] = {"coverage": {**cov.as_dict(), "text": cov.text()}}
        if notes:  # a reranker that failed
            found["note"] = "; ".join(notes)
        return [h.as_dict() for h in hits], "index", found

    def repo_of(self, repo: str, roots: set[str] | None = None) -> str:
        """The indexed repository an agent's ``repo`` (absolute) is, or is a folder of, of
        ``roots`` (default: state.json's, no LanceDB import); an error naming the indexed
        ones when it is in none."""
        from codechunkd.storage.statefile import indexed_roots

        roots = indexed_roots(self.paths.state_file) if roots is None else roots
        if not roots:  # nothing to check against: the answer says what it finds
            return repo
        found = containing(repo, roots)
        if found is None:
            indexed = ", ".join(sorted(roots))
            raise ToolFailure(f"repo {repo} is not indexed (indexed: {indexed})")
        return found

    def indexed_root(self, repo: str | None) -> str | None:
        """An agent's ``repo`` made absolute, as the indexed repository it names."""
        return self.repo_of(repo_root(repo)) if repo else None

    def scope(self, repo: str | None, roots: Collection[str]) -> str | None:
        """The repository ``definition`` and ``references`` read: the agent's ``repo``; none
        for ``*`` (every one); else the one the server runs in, if it is in one (``roots``)."""
        if repo == EVERY:
            return None
        return self.indexed_root(repo) if repo else repository_of(".", roots)

    def locate(self, path: str, repo: str | None) -> tuple[str, str | None]:
        """(path inside its repository, repository root or None), from what an agent passes:
        relative to the repository's root, or absolute."""
        checked("path", path)
        repo = self.indexed_root(repo)
        if not os.path.isabs(path):
            return in_repository(path), repo
        full = str(Path(path).resolve())
        roots = self.roots()
        root = containing(full, [repo] if repo else roots)
        if root is None:
            raise ToolFailure(
                f"{shown(path)} is not inside an indexed repository "
                f"(indexed: {', '.join(roots) or 'none'})"
            )
        return in_repository(os.path.relpath(full, root)), root

    def roots(self) -> list[str]:
        """The indexed repositories' roots, sorted."""
        return sorted({s.source.repo for s in self.index().sources()})

    def outline(self, path: str, repo: str | None) -> list[Any]:
        """The chunks of ``path``; when several indexed repositories hold it and none is
        named, those of the one the server runs in, if it is one of them (an agent in a
        worktree reads its worktree's file, not the main checkout's), else every one's."""
        rel, root = self.locate(path, repo)
        rows = self.index().file(rel, repo=root)
        if root is None and len({r.repo for r in rows}) > 1:
            here = containing(os.getcwd(), {r.repo for r in rows})
            rows = [r for r in rows if r.repo == here] if here else rows
        if not rows:
            roots = ", ".join(self.roots()) or "none"
            raise ToolFailure(
                f"no chunks indexed for {shown(rel)}"
                + (f" in {root}" if root else "")
                + f"; paths are relative to the repository root (indexed: {roots})"
            )
        return list(rows)

    def values(self, path: str, ids: list[str]) -> dict[str, list[str]]:
        """The constants, variables and fields the chunks ``ids`` of ``path`` bind, by id."""
        found: dict[str, list[str]] = self.index().refs.values_in(path, ids)
        return found

    def chunk_at(self, path: str, line: int, repo: str | None) -> str:
        """The id of the innermost chunk of ``path`` that covers ``line``."""
        rows = [r for r in self.outline(path, repo) if r.start_line <= line <= r.end_line]
        if not rows:
            raise ToolFailure(f"no chunk of {shown(path)} covers line {line}")
        best = min(rows, key=lambda r: (r.end_line - r.start_line, r.synthetic))
        return str(best.id)

    def chunks(self, ids: Sequence[str]) -> list[tuple[Any, list[Any]]]:
        """Each chunk with its enclosing chunks, outermost first."""
        index = self.index()
        out = []
        for cid in ids:
            row = index.get(cid)
            if row is None:
                raise ToolFailure(
                    f"no chunk with id {shown(cid)} (ids come from `search` or `outline`; "
                    "an edit since then replaces a file's chunks and their ids)"
                )
            parents: list[Any] = []
            parent, seen = row.parent_id, {row.id}
            while parent and parent not in seen and len(parents) < 5:
                seen.add(parent)
                p = index.get(parent)
                if p is None:
                    break
                parents.append(p)
                parent = p.parent_id
            out.append((row, list(reversed(parents))))
        return out

    # -- the reference graph's answers, as plain data (``storage/refviews.py``) -----------

    def definitions(self, name: str, repo: str | None) -> list[dict[str, Any]]:
        """Where ``name`` is defined, as ``codechunkd defs --json`` prints it."""
        from codechunkd.storage.refviews import definition_dicts, source_roots, working_checkout

        index = self.index()
        roots = source_roots(index)
        prefer = working_checkout(roots)
        defs = index.definitions(name, repo=self.scope(repo, roots.values()), prefer=prefer)
        return definition_dicts(defs, roots)

    def uses(
        self,
        name: str,
        repo: str | None,
        *,
        calls_only: bool,
        callees: bool,
        limit: int,
        depth: int = 1,
    ) -> tuple[list[dict[str, Any]], int]:
        """Who uses ``name`` (only calls with ``calls_only``; with ``depth`` over 1, the
        callers' callers too, each with its ``depth``), or with ``callees`` what its
        definition calls: the first ``limit`` as ``codechunkd refs --json`` prints them, and
        how many there are."""
        from codechunkd.storage.refviews import reference_dicts, source_roots, working_checkout

        index = self.index()
        roots = source_roots(index)
        repo = self.scope(repo, roots.values())
        prefer = working_checkout(roots)
        if depth > 1:
            deep = index.refs.impact(name, depth=depth, repo=repo, prefer=prefer)
            dicts = reference_dicts([u for _, u in deep[:limit]], roots)
            return [{"depth": lv, **d} for (lv, _), d in zip(deep, dicts, strict=False)], len(deep)
        if callees:
            found = index.callees(name, repo=repo)
        else:
            kinds = ["call"] if calls_only else None
            found = index.refs.references(name, repo=repo, kinds=kinds, prefer=prefer)
        return reference_dicts(found[:limit], roots), len(found)

    def repo_map(
        self, path: str, budget: int, repo: str | None
    ) -> tuple[str, list[dict[str, Any]]]:
        """The files and signatures that matter most under ``path`` within ``budget`` tokens:
        the map's text, and its files (path, rank, definitions)."""
        from codechunkd.chunking.tokens import counter_for
        from codechunkd.storage.refviews import source_roots, working_checkout
        from codechunkd.storage.repomap import render

        folder, repo = self.locate(path, repo)
        # of several indexed repositories, the one the server runs in (as `codechunkd map`)
        repo = repo or working_checkout(source_roots(self.index()))
        count = counter_for(self.settings.embedding.model)
        refs = self.index().refs
        entries = refs.repo_map(count_tokens=count, budget=budget, repo=repo, path=folder)
        if not entries:
            where = f" in {repo}" if repo else ""
            if not folder:
                return f"no references indexed{where}", []
            return (
                f"no indexed files under {shown(folder)}{where}; paths are relative to the "
                f"repository root (indexed: {', '.join(self.roots()) or 'none'})"
            ), []
        files = [
            {
                "path": e.path,
                "rank": e.rank,
                "definitions": [{"id": i, "signature": s, "line": n} for i, s, n in e.definitions],
            }
            for e in entries
        ]
        return render(entries), files

    def status(self) -> tuple[dict[str, Any], str]:
        """The status document (the daemon's, or state.json and the live HEADs), and its origin."""
        doc = self.daemon({"cmd": "status"}, timeout=2.0)
        if isinstance(doc, dict) and "sources" in doc:
            return doc, "daemon"
        from codechunkd.daemon.offline import stopped_status

        return stopped_status(self.paths), "index"
