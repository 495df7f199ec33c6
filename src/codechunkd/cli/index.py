"""``codechunkd index``: index one source once, incrementally, and say what it did.

Owns the command's parser, its fast no-op path (state.json already reflects the source), the
refusals before it writes (another writer, visible damage), the progress bar and the report
it prints.  The sync itself is ``pipeline.sync`` (or ``pipeline.distributed`` on Ray): this
module wires the stages together and must not chunk, embed or write rows itself.  Every
heavy import (LanceDB, the model, the pipeline) stays inside ``cmd_index``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from typing import Any

import codechunkd.cli.common as common
from codechunkd.config import Settings


def add_parsers(sub: Any) -> None:
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
    common.options(p)


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
        finished = done >= total and p.activity in ("indexing", "writing text", "filling vectors")
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


def _command_line(args: argparse.Namespace) -> str:
    """The command as it was given, ready to paste into a shell."""
    import shlex

    return shlex.join(["codechunkd", *(getattr(args, "argv", None) or [args.command])])


def _already_fresh(settings: Settings, paths: Any, git: Any, args: argparse.Namespace) -> bool:
    """The no-op fast path: state.json already reflects the source (no LanceDB import)."""
    from codechunkd.embedding.embedder import make_embedder
    from codechunkd.git.changes import Matcher
    from codechunkd.pipeline.plan import fingerprint, fresh_changes, standing_skips
    from codechunkd.pipeline.report import SyncReport
    from codechunkd.storage.store import read_state_file

    entry = _state_entry(read_state_file(paths.state_file), git.source.id)
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
    _print_report(report, args, _not_indexed(entry))
    return True


def _refuse_a_writer(paths: Any) -> None:
    """``IndexLocked`` (exit 5) when another writer holds the index, naming it: the daemon
    keeps its sources fresh by itself (stop it to index by hand); any other writer (another
    ``codechunkd index``, ``summarize``) is waited for."""
    from codechunkd.display import printable
    from codechunkd.errors import IndexLocked
    from codechunkd.storage.lease import LeaseHeld, writer_lock
    from codechunkd.storage.lock import read_holder

    try:
        with writer_lock(paths, what="codechunkd index"):
            pass
    except IndexLocked as exc:
        what: str | None = None
        if isinstance(exc, LeaseHeld):  # s3://: the lease names its holder (and the message)
            what = exc.holder.what if exc.holder else None
        elif exc.pid is not None:  # a directory: the lock file that named the pid says what
            for lock in (paths.runtime_lock, paths.lock):
                found = read_holder(lock)
                if found is not None and found[0] == exc.pid:
                    what = found[1]
                    break
        if what == "codechunkd run":
            exc.args = (
                f"{exc}: a running `codechunkd run` keeps its sources fresh by itself "
                "(`codechunkd status` shows them; `codechunkd add PATH` adds one); "
                "stop it to run `codechunkd index`",
            )
        elif what:
            named = "" if isinstance(exc, LeaseHeld) else f" (`{printable(what)}`)"
            exc.args = (f"{exc}{named}; wait for it to finish, then run `codechunkd index` again",)
        raise


def cmd_index(args: argparse.Namespace) -> int:
    from codechunkd.embedding.embedder import make_embedder
    from codechunkd.errors import ModelMismatch, SchemaMismatch
    from codechunkd.pipeline.sync import Syncer
    from codechunkd.storage.cache import EmbeddingCache
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.lease import lease_check, writer_lock
    from codechunkd.storage.store import IndexStore

    settings = common.settings(args)
    if args.seed is not None:  # the flag wins over index.seed ("" turns the seed off)
        settings = dataclasses.replace(
            settings, index=dataclasses.replace(settings.index, seed=args.seed)
        )
    git = common.git_source(args.path, args.ref)
    paths = IndexPaths.of(settings)
    _refuse_a_writer(paths)  # exit 5 while another writer (the daemon) runs; makes nothing then
    paths.make_local()  # a file where the index should be is said as such, not as damage
    if not args.rebuild:
        common.refuse_damaged(paths)
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
    from codechunkd.storage.store import read_state_file

    entry = _state_entry(read_state_file(paths.state_file), git.source.id)
    _print_report(report, args, _not_indexed(entry))
    return 0


def _state_entry(doc: dict[str, Any] | None, source: str) -> dict[str, Any] | None:
    """The source's entry of a ``state.json`` document (None: none, or no document)."""
    return next((s for s in (doc or {}).get("sources", []) if s["source"] == source), None)


def _not_indexed(entry: dict[str, Any] | None) -> dict[str, int]:
    """A source's files recorded without chunks, by reason, as its ``state.json`` entry
    counts them (earlier runs' too: a run's own ``skipped`` counts only the files it read)."""
    return dict((entry or {}).get("skipped") or {})


def _print_report(report: Any, args: argparse.Namespace, not_indexed: dict[str, int]) -> None:
    from codechunkd.display import printable

    doc = report.as_dict()
    if args.json:
        common.print_json({**doc, "not_indexed": not_indexed})
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
    if not_indexed and not_indexed != dict(report.skipped):
        from codechunkd.daemon.status import skipped_text

        print(f"  {skipped_text(not_indexed)} (all files of the index)")
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
