"""The ``codechunkd`` command: the composition root.

Settings are loaded and logging configured here, once; the stages are built
and wired here and nowhere else.  Commands that do not embed (``status``,
``--help``) never import torch, and ``status`` does not even import LanceDB.

Exit codes: 0 success; 1 unexpected error; 2 bad settings or usage; 3 git
error; 4 index error; 5 the index is locked by another writer; 6 embedding
error; 8 the index is damaged (run ``codechunkd index --rebuild``; ``status``
too).  ``status`` adds 10 (some source is stale), 11 (degraded: a source is
not fully watched, or keeps failing), 12 (nothing indexed), 13 (stopped: no
daemon runs for this index; the indexed state is still printed) and 14
(stalled: the daemon is silent or its changes wait too long); see
``codechunkd.daemon.status``.  ``status PATH`` for a PATH that is in no source
of the index exits 2 and lists the sources.

With a daemon running (``codechunkd run``), ``status`` and ``search`` ask it
over its Unix socket (a warm model, no torch import); without one they work
on their own.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from codechunkd import __version__, cli_refs
from codechunkd.config import Settings, load_settings
from codechunkd.errors import CodechunkdError
from codechunkd.storage.request import MAX_K, SearchRequest


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        type=Path,
        help="settings file (default: $XDG_CONFIG_HOME/codechunkd/config.toml)",
    )
    p.add_argument(
        "--index-dir", help="index directory or URI (default: $XDG_DATA_HOME/codechunkd/index)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug details")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codechunkd",
        description="A git-aware indexer of syntax-aware code chunks into LanceDB.",
    )
    parser.add_argument("--version", action="version", version=f"codechunkd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("index", help="index a repository once (incrementally)")
    p.add_argument("path", nargs="?", default=".", help="any folder inside the repository")
    p.add_argument("--ref", help="index this ref from the object database (bare mirrors)")
    p.add_argument("--rebuild", action="store_true", help="drop this source's rows and rebuild")
    p.add_argument(
        "--seed",
        metavar="INDEX",
        help="take vectors from this other index (directory or s3://) before embedding "
        "(setting index.seed)",
    )
    p.add_argument(
        "--engine",
        choices=["local", "ray"],
        help="local: this process; ray: read, chunk and embed on a Ray cluster "
        "(setting index.engine; needs codechunkd[ray])",
    )
    p.add_argument(
        "--address",
        metavar="ADDR",
        help="with --engine ray: the cluster to join (default $RAY_ADDRESS, else a local one)",
    )
    _common(p)

    p = sub.add_parser("search", help="search the index (hybrid: vectors + full text)")
    p.add_argument("query", help="natural-language or code query, or a symbol name")
    p.add_argument("-k", type=int, default=10, help=f"number of results, 1 to {MAX_K} (default 10)")
    p.add_argument("--mode", choices=["hybrid", "vector", "text"], default="hybrid", help="ranking")
    p.add_argument("--repo", help="only this repository (its root path)")
    p.add_argument("--branch", help="only rows indexed on this branch")
    p.add_argument("--commit", help="only rows indexed at this commit")
    p.add_argument("--path", help="only paths matching this glob")
    p.add_argument(
        "--lang", help="only this language (python, typescript, markdown, …; checked, not guessed)"
    )
    p.add_argument("--kind", help="only this kind (function, method, class, …)")
    p.add_argument("--context", action="store_true", help="add enclosing class/module signatures")
    p.add_argument("--stale", action="store_true", help="flag hits whose file changed on disk")
    _common(p)

    p = sub.add_parser("model", help="manage the embedding model")
    model_sub = p.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    p = model_sub.add_parser(
        "export", help="export the configured model to ONNX now (otherwise done at first use)"
    )
    p.add_argument("--force", action="store_true", help="export again even when cached")
    _common(p)

    p = sub.add_parser(
        "verify", help="compare the index with a fresh chunking of the source (exit 1 on mismatch)"
    )
    p.add_argument("path", nargs="?", default=".", help="any folder inside the repository")
    p.add_argument("--ref", help="verify this ref's source (bare mirrors)")
    _common(p)

    p = sub.add_parser("summarize", help="regenerate stale LLM summaries once, within the budget")
    p.add_argument("--limit", type=int, metavar="N", help="send at most N chunks this pass")
    p.add_argument(
        "--dry-run", action="store_true", help="list what is stale and estimate the tokens only"
    )
    _common(p)

    p = sub.add_parser("status", help="what is indexed, and how fresh it is")
    p.add_argument(
        "path", nargs="?", help="only the source containing this folder (exit 2 if none does)"
    )
    _common(p)

    p = sub.add_parser("run", help="run the daemon: watch sources and keep the index fresh")
    p.add_argument(
        "paths", nargs="*", metavar="PATH", help="sources to watch (besides the configured ones)"
    )
    _common(p)

    p = sub.add_parser("add", help="add a source to the daemon's list (a running daemon follows)")
    p.add_argument("path", help="any folder inside the repository")
    p.add_argument("--ref", help="follow this ref instead of the working tree (bare mirrors)")
    _common(p)

    p = sub.add_parser("remove", help="remove a source from the daemon's list")
    p.add_argument("path", help="the source's folder")
    p.add_argument("--ref", help="the ref it follows, if any")
    _common(p)

    p = sub.add_parser("mcp", help="serve the index to coding agents (Model Context Protocol)")
    p.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 (not stdio)")
    p.add_argument("--port", type=int, default=8765, help="port for --http (default 8765; 0: any)")
    p.add_argument("--config", type=Path, help="settings file")
    p.add_argument("--index-dir", help="index directory or URI")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug details")

    p = sub.add_parser("service", help="systemd units (Linux) or a launchd agent (macOS)")
    ssub = p.add_subparsers(dest="service_command", required=True, metavar="ACTION")
    q = ssub.add_parser("install", help="write and enable the unit (or print what to do)")
    kind = q.add_mutually_exclusive_group()
    kind.add_argument(
        "--user",
        dest="kind",
        action="store_const",
        const="user",
        help="a unit for this user, run by `systemctl --user` (the default)",
    )
    kind.add_argument(
        "--system",
        dest="kind",
        action="store_const",
        const="system",
        help="a template unit codechunkd@NAME for a CI box, one per /etc/codechunkd/NAME.toml",
    )
    q.set_defaults(kind="user")
    q.add_argument(
        "--manager",
        choices=("systemd", "launchd"),
        help="systemd units or a launchd agent (default: what this OS has)",
    )
    q.add_argument("--print", action="store_true", help="print the unit and commands only")
    q.add_argument("--no-enable", action="store_true", help="write the unit, do not enable it")
    _common(q)  # --config and --index-dir are passed on to the unit's `codechunkd run`
    cli_refs.add_parsers(sub, _common)
    return parser


#: Commands that read an index: a missing one is an error, never created (a typo'd --index-dir).
READ_COMMANDS = frozenset({"search", "status", "verify", *cli_refs.COMMANDS})


def _settings(args: argparse.Namespace, *, check_index: bool = True) -> Settings:
    """The settings, with what every command needs first: a private umask, an index to read
    (``check_index=False``: the caller looks at the index itself)."""
    from codechunkd.errors import StoreError
    from codechunkd.storage.layout import IndexPaths, private_umask

    settings = load_settings(config=args.config, overrides={"index.dir": args.index_dir})
    private_umask()  # the index, its cache and the socket hold source code
    command = getattr(args, "command", None)
    # `status` on the default index before anything was indexed says so (exit 12/13);
    # a directory named on the command line must be an index for every read command.
    if check_index and command in READ_COMMANDS and (args.index_dir or command != "status"):
        problem = IndexPaths.of(settings).index_problem()
        if problem:
            raise StoreError(f"{problem}; check --index-dir, or `codechunkd index` to make one")
    return settings


def _git_source(path: str, ref: str | None = None) -> Any:
    """The source at ``path`` (``GitSource``); a path that does not exist says so (exit 3)."""
    from codechunkd.errors import RepoError
    from codechunkd.git.changes import GitSource

    if not os.path.exists(path):
        raise RepoError(f"{path} does not exist")
    return GitSource(path, ref=ref)  # NotAGitRepo / RefNotFound: exit 3


def _command_line(args: argparse.Namespace) -> str:
    """The command as it was given, ready to paste into a shell."""
    import shlex

    return shlex.join(["codechunkd", *(getattr(args, "argv", None) or [args.command])])


def _print_json(doc: object) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


# -- index ----------------------------------------------------------------------


class _ProgressBar:
    """Files, chunks, pace and ETA on one redrawn line, on a terminal only.

    Keeps the latest progress either way: an interrupted index says what it saved.
    """

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self.last: Any = None
        self._drawn_at = 0.0
        self._width = 0

    def __call__(self, p: Any) -> None:
        from codechunkd.daemon.status import progress_text

        self.last = p
        now = time.monotonic()
        filling = p.activity == "filling vectors"
        done, total = (p.fill_embedded, p.fill_texts) if filling else (p.files_done, p.files_total)
        finished = done >= total and (filling or p.activity == "indexing")
        if not self.enabled or total == 0 or (now - self._drawn_at < 0.2 and not finished):
            return
        self._drawn_at = now
        if p.activity == "loading the model":
            line = f"{p.activity} (a first run exports it and measures the threads)..."
        else:
            filled = int(20 * done / total)
            line = f"[{'#' * filled}{'-' * (20 - filled)}] {progress_text(p.as_dict())}"
        sys.stderr.write("\r" + line.ljust(self._width))
        self._width = len(line)
        if finished:
            sys.stderr.write("\n")
        sys.stderr.flush()

    def interrupted(self, command: str) -> str:
        """What an interrupted index saved, and how to resume (``command``, as given)."""
        p = self.last
        saved = (
            f"{p.embedded:,} vectors computed are saved in the embedding cache, "
            f"{p.chunks:,} chunks written"
            if p is not None
            else "nothing was computed yet"
        )
        return (
            f"codechunkd: interrupted: {saved}.\n"
            f"To resume, run the same command again (`{command}`): "
            f"saved vectors are reused, not computed again.\n"
        )


def _already_fresh(settings: Settings, paths: Any, git: Any, args: argparse.Namespace) -> bool:
    """The no-op fast path: state.json already reflects the source (no LanceDB import)."""
    from codechunkd.embedding.embedder import make_embedder
    from codechunkd.git.changes import Matcher
    from codechunkd.pipeline.plan import fingerprint, fresh_changes, standing_skips
    from codechunkd.pipeline.report import SyncReport
    from codechunkd.storage.store import read_state_file

    doc = read_state_file(paths.state_file) or {}
    entry = next((s for s in doc.get("sources", []) if s["source"] == git.source.id), None)
    model_id = make_embedder(settings.embedding).model_id
    changes = fresh_changes(git, entry, fingerprint(settings, model_id)) if entry else None
    if entry is None or changes is None:
        return False
    report = SyncReport(
        repo=git.source.repo,
        branch=entry["branch"],
        commit=entry["commit"],
        unchanged=entry["files"],
        # what is still unreadable or refused is said by every run, this one too
        skipped=standing_skips(changes, Matcher(settings.files.include, settings.files.exclude)),
    )
    _print_report(report, args)
    return True


def _damage_lines(paths: Any) -> list[str]:
    """Damage visible without importing LanceDB (``storage.repair.quick_damage``)."""
    from codechunkd.storage.repair import quick_damage

    return [str(d) for d in quick_damage(paths)]


def _refuse_damaged(paths: Any) -> None:
    """Raise ``IndexDamaged`` for damage visible without LanceDB."""
    from codechunkd.errors import IndexDamaged

    found = _damage_lines(paths)
    if found:
        raise IndexDamaged("; ".join(found))


def _refuse_a_writer(paths: Any) -> None:
    """``IndexLocked`` (exit 5) when another writer (the daemon) holds the index, naming it."""
    from codechunkd.errors import IndexLocked
    from codechunkd.storage.lease import writer_lock

    try:
        with writer_lock(paths, what="codechunkd index"):
            pass
    except IndexLocked as exc:
        exc.args = (
            f"{exc}: a running `codechunkd run` keeps its sources fresh by itself "
            "(`codechunkd status` shows them; `codechunkd add PATH` adds one); "
            "stop it to run `codechunkd index`",
        )
        raise


def cmd_index(args: argparse.Namespace) -> int:
    from codechunkd.embedding.embedder import make_embedder
    from codechunkd.errors import ModelMismatch, SchemaMismatch
    from codechunkd.pipeline.sync import Syncer
    from codechunkd.storage.cache import EmbeddingCache
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.lease import lease_check, writer_lock
    from codechunkd.storage.store import IndexStore

    settings = _settings(args)
    if args.seed is not None:  # the flag wins over index.seed ("" turns the seed off)
        settings = dataclasses.replace(
            settings, index=dataclasses.replace(settings.index, seed=args.seed)
        )
    git = _git_source(args.path, args.ref)
    paths = IndexPaths.of(settings)
    _refuse_a_writer(paths)  # exit 5 while the daemon runs, fresh or not; makes nothing then
    paths.make_local()  # a file where the index should be is said as such, not as damage
    if not args.rebuild:
        _refuse_damaged(paths)
    if not args.rebuild and _already_fresh(settings, paths, git, args):
        return 0
    with writer_lock(paths, what="codechunkd index") as lock:
        check = lease_check(lock)  # a lease taken over stops the next commit (LeaseLost, exit 15)
        if args.rebuild:  # set aside whatever cannot be opened, and say so
            from codechunkd.storage.repair import repair

            for line in repair(paths):
                sys.stderr.write(f"codechunkd: repaired: {line}\n")
        store = IndexStore(
            paths.uri, state_file=paths.state_file, storage_options=paths.storage_options
        )
        embedder = make_embedder(settings.embedding)
        if args.rebuild:
            try:
                store.check_model(embedder.model_id, embedder.dimension)
                store.ensure_writable(embedder.model_id, embedder.dimension)
                store.remove_source(git.source.id)
            except (ModelMismatch, SchemaMismatch):
                store.drop_all()
        cache = EmbeddingCache(paths.cache, max_entries=settings.embedding.cache_size)
        bar = _ProgressBar()
        try:
            if (args.engine or settings.index.engine) == "ray":
                from codechunkd.pipeline.distributed import RaySyncer, ray_session

                with ray_session(args.address):
                    ray_syncer = RaySyncer(settings, store, embedder, cache, check_writer=check)
                    report = ray_syncer.sync(git, progress=bar)
            else:
                syncer = Syncer(settings, store, embedder, cache, check_writer=check)
                try:
                    report = syncer.sync(git, progress=bar)
                finally:
                    syncer.close()  # its chunking workers, if it started any
        except KeyboardInterrupt:
            if bar.enabled and bar.last is not None:
                sys.stderr.write("\n")
            sys.stderr.write(bar.interrupted(_command_line(args)))
            return 130
        finally:
            cache.close()
    _print_report(report, args)
    return 0


def _print_report(report: Any, args: argparse.Namespace) -> None:
    from codechunkd.display import printable

    doc = report.as_dict()
    if args.json:
        _print_json(doc)
        return
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(report.skipped.items())) or "none"
    commit = (report.commit or "unborn")[:10]
    print(
        f"indexed {printable(report.repo)} ({printable(report.branch)} @ {commit})\n"
        f"  files: {report.added} added, {report.changed} changed, {report.deleted} deleted, "
        f"{report.renamed} renamed, {report.unchanged} unchanged\n"
        f"  chunks: {report.chunks} written, {report.embedded} embedded, "
        f"{report.reused} reused from cache, {report.seeded} from the seed\n"
        f"  skipped: {skipped}\n"
        f"  {report.seconds:.1f} s, {doc['chunks_per_second']} chunks/s"
    )
    if report.truncated:
        from codechunkd.daemon.status import truncated_text

        print(f"  truncated: {truncated_text(report.truncated)}")
    if report.seed_skipped:
        print(f"  seed skipped: {report.seed_skipped}")
    if report.seed_refused:
        print(
            f"  seed vectors refused: {report.seed_refused} (not finite or all zeros: "
            "embedded here instead)"
        )


def cmd_model(args: argparse.Namespace) -> int:
    from codechunkd.embedding.onnx_export import export_model

    settings = _settings(args)
    started = time.monotonic()
    path = export_model(settings.embedding, force=args.force)
    doc = {
        "model": settings.embedding.model,
        "onnx": str(path),
        "seconds": round(time.monotonic() - started, 1),
    }
    if args.json:
        _print_json(doc)
    else:
        print(f"exported {doc['model']} to {doc['onnx']} in {doc['seconds']} s")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from codechunkd.errors import IndexDamaged
    from codechunkd.pipeline.verify import verify
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.repair import table_damage
    from codechunkd.storage.store import IndexStore

    settings = _settings(args)
    git = _git_source(args.path, args.ref)
    paths = IndexPaths.of(settings)
    _refuse_damaged(paths)
    store = IndexStore(paths.uri, storage_options=paths.storage_options)
    damage = table_damage(store)  # opens every table and index: what a search would trip on
    if damage:
        raise IndexDamaged("; ".join(map(str, damage)))
    report = verify(settings, store, git)
    if args.json:
        _print_json(report.as_dict())
    elif report.ok:
        print(f"ok: {report.repo}: {report.files} files, {report.rows} rows match the source")
    else:
        print(
            f"MISMATCH: {report.repo}: {len(report.missing)} rows missing, "
            f"{len(report.extra)} extra, {len(report.stale_files)} stale files, "
            f"{report.duplicate_ids} duplicate ids, {report.unusable_vectors} unusable vectors, "
            f"{report.vectorless} without a vector yet"
        )
        if report.vectorless:
            print("  rows without a vector yet: the next `codechunkd index` (or daemon) fills them")
        if report.unusable_vectors:
            print("  unusable vectors (NaN or all zeros): `codechunkd index --rebuild` embeds them")
        for path in report.stale_files[:20]:
            print(f"  stale: {path}")
        for p, start, end, _, _ in report.missing[:20]:
            print(f"  missing: {p} [{start}:{end}]")
        for p, start, end, _, _ in report.extra[:20]:
            print(f"  extra: {p} [{start}:{end}]")
    return 0 if report.ok else 1


# -- summarize ------------------------------------------------------------------


def cmd_summarize(args: argparse.Namespace) -> int:
    from codechunkd.errors import ConfigError
    from codechunkd.pipeline.summarize import Budget, disabled_reason, open_summarizer
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.lease import writer_lock
    from codechunkd.storage.store import IndexStore

    settings = _settings(args)
    if args.limit is not None and args.limit < 1:
        raise ConfigError("--limit must be at least 1")
    off = disabled_reason(settings.summaries)
    if off and not args.dry_run:
        raise ConfigError(f"LLM summaries are off: {off}", key="summaries.url")
    paths = IndexPaths.of(settings)
    budget = Budget.per_run(settings.summaries, limit=args.limit)
    lock = (
        contextlib.nullcontext()
        if args.dry_run
        else writer_lock(paths, what="codechunkd summarize")
    )
    with lock:
        summarizer = open_summarizer(
            settings, IndexStore(paths.uri, storage_options=paths.storage_options)
        )
        try:
            run = summarizer.run_once(budget, dry_run=args.dry_run)
        finally:
            summarizer.cache.close()
    doc = {"enabled": off is None, "reason": off, **run.as_dict()}
    if args.json:
        _print_json(doc)
    elif args.dry_run:
        print(
            f"{run.stale} stale chunk rows ({run.reused} have a cached summary); "
            f"this pass would send {len(run.planned)} requests, ~{run.estimated_tokens} tokens"
            + (f" (stopped by {run.stopped_by})" if run.stopped_by else "")
        )
        for p in run.planned:
            print(f"  {p['path']}  {p['symbol'] or '-'}  ~{p['estimated_tokens']} tokens")
    else:
        print(
            f"summaries: {run.written} written ({run.reused} from cache, {run.summarized} new), "
            f"{run.requested} requests, {run.tokens} tokens, {run.rejected} rejected, "
            f"{run.failed} failed; {run.backlog} still stale"
            + (f" (stopped by {run.stopped_by})" if run.stopped_by else "")
        )
        for e in run.errors:
            print(f"  error: {e}")
    return 1 if run.stopped_by == "endpoint_unavailable" else 0


# -- search ---------------------------------------------------------------------


def _search_request(args: argparse.Namespace) -> SearchRequest:
    """The command line's search as the one request every door uses (``--lang`` is ``language``).

    Built with ``from_json``, as the daemon parses it: an empty flag means "not given"
    on either path.  A bad ``-k`` keeps the flag's name in its error.
    """
    from codechunkd.errors import ConfigError

    try:
        return SearchRequest.from_json(
            {
                "query": args.query,
                "k": args.k,
                "mode": args.mode,
                "repo": str(Path(args.repo).resolve()) if args.repo else None,
                "branch": args.branch,
                "commit": args.commit,
                "path": args.path,
                "language": args.lang,
                "kind": args.kind,
                "context": args.context,
                "stale": args.stale,
            }
        )
    except ConfigError as exc:
        if exc.key == "k":
            raise ConfigError(f"-{exc}", key="k") from None
        raise


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

    paths = IndexPaths.of(_settings(args))
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


def _partial_note(partial: dict[str, Any]) -> str:
    """``partial: 412/1,765 files indexed so far (a first index is running)``."""
    done, total = partial.get("files_done", 0), partial.get("files_total", 0)
    counted = f"{done:,}/{total:,} files" if total else "the first files"
    return f"partial: {counted} indexed so far (a first index is running; results may be missing)"


def _coverage_notes(answer: dict[str, Any] | None) -> list[str]:
    """``note: ...`` (a search answered without its query vector, and why) and the coverage
    while it is incomplete (``coverage: text 2,303/2,303 chunks · vectors 412/2,303``)."""
    if not answer:
        return []
    lines = [f"note: {answer['note']}"] if answer.get("note") else []
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
        warm = threading.Thread(target=embedder.embed, args=([req.query],), daemon=True)
        warm.start()
    index = open_index(settings=settings, embedder=embedder)
    if warm is not None:
        warm.join()
    hits = [h.as_dict() for h in index.run(req)]
    cov = index.coverage(repo=req.repo)
    return hits, (None if cov.complete else {"coverage": {**cov.as_dict(), "text": cov.text()}})


def cmd_search(args: argparse.Namespace) -> int:
    req = _search_request(args)
    _check_language(req.language, _settings(args))
    answer = _search_via_daemon(args, req)
    hits: list[dict[str, Any]] | None = answer["hits"] if answer else None
    partial = answer.get("partial") if answer else None
    if hits is None:  # no daemon: search here (loads the query model in this process)
        hits, answer = _search_here(_settings(args), req)
    out = sys.stderr if args.json else sys.stdout  # stdout keeps its shape under --json
    if partial:
        out.write(_partial_note(partial) + "\n")
    for line in _coverage_notes(answer):
        out.write(line + "\n")
    if args.json:
        _print_json(hits)
        return 0
    _print_hits(hits, req.query)
    return 0


def _print_hits(hits: Sequence[dict[str, Any]], query: str) -> None:
    """One line per hit, then its snippet indented: every path, symbol and line of text
    through ``display.printable``, so a file name or a chunk holding a newline or an
    escape sequence can neither forge a hit line nor drive the terminal."""
    from codechunkd.chunking.snippet import dedent
    from codechunkd.display import printable

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

    for h in hits:
        flag = "  [stale]" if h.get("stale") else ""
        where = f"{printable(h['path'])}:{h['start_line']}-{h['end_line']}"
        print(f"{where}  {printable(h['symbol'] or '-')}  {h['score']:.4f}{flag}")
        for ctx in h.get("context") or ():
            print(f"    in: {printable((ctx.splitlines() or [''])[0][:110], keep_tab=True)}")
        snippet = [line for line in dedent(h["content"]).splitlines() if line.strip()][:4]
        for line in snippet:
            print(f"    {mark(printable(line[:120], keep_tab=True))}")


# -- status ---------------------------------------------------------------------


def _status_via_daemon(paths: Any) -> dict[str, Any]:
    """The running daemon's status document, or a ``stopped``/``stalled`` stub.

    A daemon that holds the index's lock is never ``stopped``: busy, starting or stopping,
    it is asked again until the timeout, then reported ``stalled``."""
    from codechunkd.daemon.control import DaemonUnavailable, daemon_pid, request

    try:
        doc = request(
            paths.socket, {"cmd": "status"}, timeout=2.0, running=lambda: daemon_pid(paths)
        )
    except DaemonUnavailable as exc:
        return {"daemon": {"state": "stalled" if exc.stalled else "stopped", "reason": exc.reason}}
    if not isinstance(doc, dict) or "daemon" not in doc:
        return {"daemon": {"state": "stalled", "reason": "unexpected answer from the daemon"}}
    return doc


def cmd_status(args: argparse.Namespace) -> int:
    from codechunkd.daemon.status import exit_code, render_text
    from codechunkd.errors import IndexDamaged, StoreError
    from codechunkd.storage.layout import IndexPaths

    settings = _settings(args, check_index=False)  # a running daemon is asked first
    paths = IndexPaths.of(settings)
    out = _status_via_daemon(paths)
    only = str(Path(args.path).resolve()) if args.path else None
    if "sources" not in out:  # no daemon answered: the same document, from state.json
        from codechunkd.daemon.offline import stopped_status

        stopped = out["daemon"]["state"] == "stopped"  # (a stalled daemon is reported)
        problem = paths.index_problem() if args.index_dir and stopped else None
        if problem:
            raise StoreError(f"{problem}; check --index-dir, or `codechunkd index` to make one")

        out = stopped_status(
            paths, state=out["daemon"]["state"], reason=out["daemon"].get("reason")
        )
    if only:
        every = out["sources"]
        out["sources"] = [
            s for s in every if only == s["repo"] or only.startswith(s["repo"] + os.sep)
        ]
        if every and not out["sources"]:
            listed = "".join(f"\n  {s['repo']}" for s in every)
            sys.stderr.write(
                f"codechunkd: error: {only} is in none of the sources of {out['index']}; "
                f"they are:{listed}\n"
            )
            return 2
    code = exit_code(out)
    damage = _damage_lines(paths)  # issue #15: a damaged index is never "fresh"
    if damage:
        out["damage"], code = damage, IndexDamaged.exit_code
    if args.json:
        _print_json(out)
    else:
        print(render_text(out))
        for line in damage:
            print(f"DAMAGED: {line}")
        if damage:
            print(f"  {IndexDamaged.HINT}")
    return code


# -- the daemon -----------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from codechunkd import logs
    from codechunkd.daemon.control import SourceSpec

    logs.configure(level=logs.DEBUG if args.verbose else logs.INFO)
    os.environ.setdefault("LANCEDB_LOG", "error")
    settings = _settings(args)
    specs = [SourceSpec.parse(p) for p in args.paths]
    for spec in specs:  # a path that is no source fails now, having created nothing
        _git_source(spec.path, spec.ref)
    from codechunkd.daemon.control import ensure_socket_dir
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.lease import writer_lock

    paths = IndexPaths.of(settings)
    ensure_socket_dir(paths.runtime)  # refuse a socket directory someone else made
    with writer_lock(paths, what="codechunkd run"):
        pass  # refuse early (exit 5) before the slow imports; Service.run takes it for real
    from codechunkd.daemon.service import Service

    service = Service(settings, specs=specs, load_settings=lambda: _settings(args))
    if not service.specs():
        sys.stderr.write(
            "codechunkd: error: no sources: pass a PATH, run `codechunkd add PATH`, "
            "or set [daemon] sources\n"
        )
        return 2
    code = service.run()
    if service.abandoned:
        # the writer is still inside a batch and holds the lock: end the process now, with no
        # interpreter teardown (which would wait on, or tear down under, that thread);
        # exiting releases the lock, and the next start repairs the pending state
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _edit_sources(args: argparse.Namespace, *, add: bool) -> int:
    from codechunkd.daemon.control import (
        DaemonUnavailable,
        SourceSpec,
        daemon_pid,
        read_sources,
        request,
        write_sources,
    )
    from codechunkd.storage.layout import IndexPaths

    paths = IndexPaths.of(_settings(args))
    file = paths.meta / "sources.json"
    specs = read_sources(file)
    if add:
        git = _git_source(args.path, args.ref)
        spec = SourceSpec(path=git.source.repo, ref=args.ref)
        if spec in specs:
            print(f"already listed: {spec}")
            return 0
        specs.append(spec)
    else:
        spec = SourceSpec.parse(args.path + (f"#{args.ref}" if args.ref else ""))
        if spec not in specs:
            sys.stderr.write(f"codechunkd: error: not listed: {spec}\n")
            return 2
        specs.remove(spec)
    write_sources(file, specs)
    try:
        request(paths.socket, {"cmd": "reload"}, timeout=2.0, running=lambda: daemon_pid(paths))
        running = "; the running daemon follows"
    except DaemonUnavailable:
        running = "; no daemon is running"
    print(f"{'added' if add else 'removed'} {spec}{running}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    return _edit_sources(args, add=True)


def cmd_remove(args: argparse.Namespace) -> int:
    return _edit_sources(args, add=False)


def _service_run_args(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """The ``--config``/``--index-dir`` the unit's ``codechunkd run`` gets (absolute), and
    the local index directory it will write (None: an object store, or the system unit's
    own ``/etc/codechunkd/%i.toml`` decides)."""
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.objectstore import is_local

    run_args: list[str] = []
    index_dir = args.index_dir
    if index_dir and is_local(index_dir):
        index_dir = str(Path(index_dir.removeprefix("file://")).expanduser().resolve())
    if index_dir:
        run_args += ["--index-dir", index_dir]
    if args.config is not None:
        run_args += ["--config", str(args.config.expanduser().resolve())]
    if args.kind == "system" and not run_args:
        return run_args, None
    uri = IndexPaths.of(load_settings(config=args.config, overrides={"index.dir": index_dir})).uri
    return run_args, uri if is_local(uri) else None


def cmd_service(args: argparse.Namespace) -> int:
    from codechunkd import platform
    from codechunkd.daemon import launchd, systemd

    manager = args.manager or platform.service_manager()
    if manager is None:
        sys.stderr.write(
            "codechunkd: error: no service manager known on this OS; run `codechunkd run` "
            "(or print one with --manager systemd|launchd --print)\n"
        )
        return 2
    if manager == "launchd" and args.kind == "system":
        sys.stderr.write("codechunkd: error: launchd: only a user agent (--user) is written\n")
        return 2
    run_args, index_dir = _service_run_args(args)
    plan = (
        launchd.plan(run_args=run_args)
        if manager == "launchd"
        else systemd.plan(args.kind, run_args=run_args, index_dir=index_dir)
    )
    if args.print:
        print(f"# {plan.path}\n{plan.text}")
        print("# then run:")
        for cmd in plan.commands:
            print(" ".join(cmd))
        return 0
    if index_dir is not None and args.kind == "user":  # ReadWritePaths= needs it to exist
        Path(index_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        install = launchd.install if manager == "launchd" else systemd.install
        left = install(plan, enable=not args.no_enable)
    except PermissionError:
        sys.stderr.write(
            f"codechunkd: error: cannot write {plan.path} (run as root, or use --print)\n"
        )
        return 1
    print(f"wrote {plan.path}")
    if left:
        print("to finish, run:")
        for line in left:
            print(f"  {line}")
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """The MCP server; the SDK is imported only here (``--help`` stays light)."""
    from codechunkd import mcp_server

    os.environ.setdefault("LANCEDB_LOG", "error")  # stderr is the agent's log: no Rust WARN noise
    return mcp_server.serve(_settings(args), http=args.http, port=args.port)


def _refs_command(name: str) -> Callable[[argparse.Namespace], int]:
    """A command of cli_refs.py, given the settings loader."""
    return lambda args: cli_refs.COMMANDS[name](args, _settings)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "index": cmd_index,
    "search": cmd_search,
    "status": cmd_status,
    "summarize": cmd_summarize,
    "verify": cmd_verify,
    "model": cmd_model,
    "run": cmd_run,
    "add": cmd_add,
    "remove": cmd_remove,
    "service": cmd_service,
    "mcp": cmd_mcp,
    **{name: _refs_command(name) for name in cli_refs.COMMANDS},
}


def _unexpected(exc: Exception, *, verbose: bool) -> int:
    """An error nothing translated (a bug, or an OS error): one line, exit 1; ``-v``: traceback."""
    from codechunkd.storage._errors import one_line

    if verbose:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    what = one_line(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {one_line(exc)}"
    hint = "" if verbose else " (run with -v for the traceback)"
    sys.stderr.write(f"codechunkd: error: unexpected: {what}{hint}\n")
    return 1


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for the resume hint
    if args.command != "status":  # status starts no thread: skip ctypes' import
        from codechunkd import heap

        heap.limit_arenas()  # before any thread starts (LanceDB, onnxruntime, the sync's reader)
    if args.command != "status" or args.verbose:  # status logs nothing: skip structlog's import
        from codechunkd import logs

        logs.configure(level=logs.DEBUG if args.verbose else logs.WARNING)
    try:
        code = COMMANDS[args.command](args)
    except CodechunkdError as exc:
        sys.stderr.write(f"codechunkd: error: {exc}\n")
        code = exc.exit_code
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # the reader went away (``| head``): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except Exception as exc:  # noqa: BLE001 - the last boundary: one line, never a traceback
        code = _unexpected(exc, verbose=args.verbose)
    if argv is None and args.command == "search":
        # a read-only command with nothing left to clean up: skip the interpreter's
        # teardown (LanceDB's runtime, module cleanup), a visible part of its wall time
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            code = 0
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
