"""The ``codechunkd`` command: the composition root.

Settings are loaded and logging configured here, once; the stages are built
and wired here and nowhere else.  Commands that do not embed (``status``,
``--help``) never import torch, and ``status`` does not even import LanceDB.

Exit codes: 0 success; 1 unexpected error; 2 bad settings or usage; 3 git
error; 4 index error; 5 the index is locked by another writer; 6 embedding
error.  ``status`` adds 10 (some source is stale) and 12 (nothing indexed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codechunkd import __version__
from codechunkd.config import Settings, load_settings
from codechunkd.errors import CodechunkdError

EXIT_STALE = 10
EXIT_EMPTY = 12


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
    _common(p)

    p = sub.add_parser("search", help="search the index")
    p.add_argument("query", help="natural-language or code query")
    p.add_argument("-k", type=int, default=10, help="number of results (default 10)")
    p.add_argument("--repo", help="only this repository (its root path)")
    p.add_argument("--branch", help="only rows indexed on this branch")
    p.add_argument("--path", help="only paths matching this glob")
    p.add_argument("--lang", help="only this language")
    p.add_argument("--kind", help="only this kind (function, method, class, …)")
    _common(p)

    p = sub.add_parser(
        "verify", help="compare the index with a fresh chunking of the source (exit 1 on mismatch)"
    )
    p.add_argument("path", nargs="?", default=".", help="any folder inside the repository")
    p.add_argument("--ref", help="verify this ref's source (bare mirrors)")
    _common(p)

    p = sub.add_parser("status", help="what is indexed, and how fresh it is")
    p.add_argument("path", nargs="?", help="only the source containing this folder")
    _common(p)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(config=args.config, overrides={"index.dir": args.index_dir})


def _print_json(doc: object) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


# -- index ----------------------------------------------------------------------


class _ProgressBar:
    """files and chunks with an ETA, on a terminal only."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.enabled = sys.stderr.isatty()

    def __call__(self, done: int, total: int, chunks: int) -> None:
        if not self.enabled or total == 0:
            return
        elapsed = time.monotonic() - self.started
        eta = elapsed / done * (total - done) if done else 0.0
        width = 30
        filled = int(width * done / total)
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(
            f"\r[{bar}] {done}/{total} files  {chunks} chunks  "
            f"{chunks / elapsed if elapsed else 0:.1f} chunks/s  ETA {eta:.0f}s "
        )
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def cmd_index(args: argparse.Namespace) -> int:
    from codechunkd.daemon.lock import WriterLock
    from codechunkd.daemon.sync import Syncer
    from codechunkd.errors import ModelMismatch
    from codechunkd.indexer.changes import GitSource
    from codechunkd.indexer.embedder import make_embedder
    from codechunkd.storage.cache import EmbeddingCache
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.store import IndexStore

    settings = _settings(args)
    git = GitSource(args.path, ref=args.ref)
    paths = IndexPaths.of(settings)
    with WriterLock(paths.lock, what="codechunkd index"):
        store = IndexStore(paths.uri, state_file=paths.state_file)
        embedder = make_embedder(settings.embedding)
        if args.rebuild:
            try:
                store.check_model(embedder.model_id, embedder.dimension)
                store.remove_source(git.source.id)
            except ModelMismatch:
                store.drop_all()
        cache = EmbeddingCache(paths.cache, max_entries=settings.embedding.cache_size)
        try:
            report = Syncer(settings, store, embedder, cache).sync(git, progress=_ProgressBar())
        finally:
            cache.close()
    doc = report.as_dict()
    if args.json:
        _print_json(doc)
        return 0
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(report.skipped.items())) or "none"
    commit = (report.commit or "unborn")[:10]
    print(
        f"indexed {report.repo} ({report.branch} @ {commit})\n"
        f"  files: {report.added} added, {report.changed} changed, {report.deleted} deleted, "
        f"{report.renamed} renamed, {report.unchanged} unchanged\n"
        f"  chunks: {report.chunks} written, {report.embedded} embedded, "
        f"{report.reused} reused from cache\n"
        f"  skipped: {skipped}\n"
        f"  {report.seconds:.1f} s, {doc['chunks_per_second']} chunks/s"
    )
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from codechunkd.daemon.verify import verify
    from codechunkd.indexer.changes import GitSource
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.store import IndexStore

    settings = _settings(args)
    git = GitSource(args.path, ref=args.ref)
    report = verify(settings, IndexStore(IndexPaths.of(settings).uri), git)
    if args.json:
        _print_json(report.as_dict())
    elif report.ok:
        print(f"ok: {report.repo}: {report.files} files, {report.rows} rows match the source")
    else:
        print(
            f"MISMATCH: {report.repo}: {len(report.missing)} rows missing, "
            f"{len(report.extra)} extra, {len(report.stale_files)} stale files, "
            f"{report.duplicate_ids} duplicate ids"
        )
        for path in report.stale_files[:20]:
            print(f"  stale: {path}")
        for p, start, end, _, _ in report.missing[:20]:
            print(f"  missing: {p} [{start}:{end}]")
        for p, start, end, _, _ in report.extra[:20]:
            print(f"  extra: {p} [{start}:{end}]")
    return 0 if report.ok else 1


# -- search ---------------------------------------------------------------------


def cmd_search(args: argparse.Namespace) -> int:
    from codechunkd.indexer.embedder import make_embedder
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.search import Filters, vector_search
    from codechunkd.storage.store import IndexStore

    settings = _settings(args)
    paths = IndexPaths.of(settings)
    store = IndexStore(paths.uri)
    embedder = make_embedder(settings.embedding)
    store.check_model(embedder.model_id, embedder.dimension)
    repo = str(Path(args.repo).resolve()) if args.repo else None
    filters = Filters(
        repo=repo, branch=args.branch, path=args.path, language=args.lang, kind=args.kind
    )
    qvec = embedder.embed([args.query])[0]
    hits = vector_search(store, qvec, k=args.k, filters=filters)
    if args.json:
        _print_json([h.as_dict() for h in hits])
        return 0
    if not hits:
        print("no results")
    for h in hits:
        print(f"{h.path}:{h.start_line}-{h.end_line}  {h.symbol or '-'}  {h.score:.3f}")
        snippet = [line for line in h.content.splitlines() if line.strip()][:3]
        for line in snippet:
            print(f"    {line[:120]}")
    return 0


# -- status ---------------------------------------------------------------------


def _head_of(repo: str, git_dir: str, ref: str | None) -> tuple[str | None, str]:
    """Live (commit, branch) of a source, straight from its git dir (no index access)."""
    try:
        from codechunkd.indexer.changes import GitSource

        head = GitSource(git_dir if ref else repo, ref=ref).head()
    except CodechunkdError:
        return None, "?"
    return head.commit, head.branch


def _dir_size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, f)).st_size
    return total


def cmd_status(args: argparse.Namespace) -> int:
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.store import read_state_file

    settings = _settings(args)
    paths = IndexPaths.of(settings)
    doc = read_state_file(paths.state_file) or {"sources": []}
    only = str(Path(args.path).resolve()) if args.path else None
    sources: list[dict[str, Any]] = []
    for s in doc.get("sources", []):
        if only and not (only == s["repo"] or only.startswith(s["repo"] + os.sep)):
            continue
        head, branch = _head_of(s["repo"], s["git_dir"], s["ref"])
        s = dict(s, head=head, head_branch=branch)
        s["fresh"] = head == s["commit"] and not s["pending"]
        sources.append(s)
    local = Path(paths.uri).is_dir()
    out: dict[str, Any] = {
        "index": paths.uri,
        "index_bytes": _dir_size(Path(paths.uri)) if local else None,
        "sources": sources,
    }
    code = EXIT_EMPTY if not sources else (0 if all(s["fresh"] for s in sources) else EXIT_STALE)
    if args.json:
        _print_json(out)
        return code
    size = out["index_bytes"]
    print(f"index: {paths.uri}" + (f" ({size / 1e6:.1f} MB)" if size is not None else ""))
    if not sources:
        print("  nothing indexed yet: run `codechunkd index PATH`")
    for s in sources:
        state = "fresh" if s["fresh"] else ("interrupted" if s["pending"] else "stale")
        print(
            f"  {s['repo']}  [{state}]\n"
            f"    branch {s['head_branch']}, HEAD {(s['head'] or 'unborn')[:10]}, "
            f"indexed {(s['commit'] or 'unborn')[:10]} on {s['branch']}\n"
            f"    {s['files']} files, {s['chunks']} chunks, {len(s['dirty'])} dirty files, "
            f"model {s['embedding_model']}, updated {s['updated_at']}"
        )
    return code


COMMANDS = {
    "index": cmd_index,
    "search": cmd_search,
    "status": cmd_status,
    "verify": cmd_verify,
}


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    from codechunkd import logs

    logs.configure(level=logging.DEBUG if args.verbose else logging.WARNING)
    try:
        code = COMMANDS[args.command](args)
    except CodechunkdError as exc:
        sys.stderr.write(f"codechunkd: error: {exc}\n")
        code = exc.exit_code
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)
