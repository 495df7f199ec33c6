"""What a sync must do: the change set, and from it the files to write, the paths to
delete, the paths that may have rows, and the order to write them in.

It owns the decisions made before anything is written: the settings' fingerprint
(``fingerprint``), whether a source is already up to date (``up_to_date``,
``fresh_changes``: the no-op path of ``codechunkd index``), the skips a run reports
without reading (``standing_skip``), the change set of one sync (``change_set``), the
plan (``plan``: counts the report's added/changed/renamed/deleted/unchanged) and the
order (``in_order``, ``pipeline/order.py``).  It reads the git source and the store's
manifest and chunk paths; it must not write anything (rows, state, caches): that is
``pipeline/batches.py`` and ``pipeline/sync.py``.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Final

from codechunkd import logs
from codechunkd.chunking.chunker import CHUNKER_VERSION, LANGUAGE_VERSIONS
from codechunkd.config.settings import Settings
from codechunkd.git.changes import (
    REFUSALS,
    UNREADABLE,
    ChangeSet,
    FileVersion,
    GitSource,
    Matcher,
)
from codechunkd.git.files import DATA_RULES, GENERATED_RULES
from codechunkd.pipeline.order import Rank, ordered, ranker
from codechunkd.pipeline.report import SyncReport
from codechunkd.storage.rows import FileRecord
from codechunkd.storage.store import IndexStore, SourceState

log = logs.get_logger("codechunkd.sync")


def fingerprint(
    settings: Settings, model_id: str, languages: Mapping[str, int] = LANGUAGE_VERSIONS
) -> str:
    """Hash of everything that shapes a source's rows: when it changes, rows are rebuilt;
    then ``;lang=N,…``, the chunker's own version of each language that has one, which
    rebuilds only that language's files (``stale``)."""
    s = settings
    parts = [
        f"chunker={CHUNKER_VERSION}",
        f"budget={s.chunking.budget}",
        f"merge={s.chunking.merge_siblings}",
        f"ext={sorted(s.chunking.extensions.items())}",
        f"model={model_id}",
        f"max={s.files.max_file_size}",
        f"inc={s.files.include}",
        f"exc={s.files.exclude}",
        f"gen={s.files.skip_generated and GENERATED_RULES}",
        f"data={s.files.skip_data and DATA_RULES}",
    ]
    base = hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
    versions = ",".join(f"{lang}={v}" for lang, v in sorted(languages.items()))
    return f"{base};{versions}" if versions else base


ALL: Final = frozenset({"*"})
"""``stale``'s answer when every file is to be rebuilt."""


def stale(recorded: str, current: str) -> frozenset[str]:
    """The languages whose indexed rows the fingerprint ``current`` no longer matches
    (``recorded`` is the state's): :data:`ALL` when the settings, the model or the chunker
    of every language changed, else those whose version differs; empty when none."""
    if recorded == current:
        return frozenset()
    base, _, langs = recorded.partition(";")
    now_base, _, now_langs = current.partition(";")
    if base != now_base:
        return ALL
    was, now = _versions(langs), _versions(now_langs)
    return frozenset(lang for lang in was.keys() | now.keys() if was.get(lang) != now.get(lang))


def _versions(text: str) -> dict[str, str]:
    """``c=1,cpp=2`` as {language: version}."""
    pairs = (part.partition("=") for part in text.split(",") if part)
    return {lang: version for lang, _, version in pairs}


def up_to_date(git: GitSource, recorded: Mapping[str, Any] | None, fingerprint: str) -> bool:
    """True when the recorded state (``state.json``) is exactly the source as it is now.

    Exact because the index reflects (commit, working-tree differences): when
    HEAD and every difference's blob id are the same, so is every file.  The
    mirror is written after the table, so it can only lag behind: a lagging
    mirror answers False and the caller takes the full path.
    """
    return fresh_changes(git, recorded, fingerprint) is not None


def fresh_changes(
    git: GitSource, recorded: Mapping[str, Any] | None, fingerprint: str
) -> ChangeSet | None:
    """The source's change set when it is ``up_to_date`` (nothing to write), else None:
    what a no-op run still reports (``standing_skips``)."""
    if not recorded or recorded.get("pending") or recorded.get("fingerprint") != fingerprint:
        return None
    since = recorded.get("commit")
    since_dirty = recorded.get("dirty") or {}
    if git.head().commit != since:
        return None
    changes = git.change_set(since=since, since_dirty=since_dirty)
    if changes.full or dict(changes.dirty) != dict(since_dirty):
        return None
    return changes


def standing_skip(version: FileVersion, matcher: Matcher) -> str | None:
    """The skip a run reports for ``version`` although nothing is read: a refused path
    (``FileVersion.refused``), or a file still unreadable (its blob ``UNREADABLE``:
    nothing could be hashed, so nothing is read either).  Said again by every run that
    looks at the path, so that a problem stays visible until it is fixed.  None for a
    path the settings exclude."""
    reason = version.refused or ("unreadable" if version.blob == UNREADABLE else None)
    if reason is None:
        return None
    if version.path.endswith("/"):  # a directory: include globs name files, only excludes apply
        return None if matcher.excludes(version.path) else reason
    return reason if matcher(version.path) else None


def standing_skips(changes: ChangeSet, matcher: Matcher) -> Counter[str]:
    """``standing_skip`` of every version of a change set, counted (a no-op run's report)."""
    return Counter(r for v in changes.versions if (r := standing_skip(v, matcher)) is not None)


def change_set(
    git: GitSource,
    state: SourceState | None,
    paths: Iterable[str] | None,
    full: bool,
) -> ChangeSet:
    """The source's changes since ``state``: only ``paths`` (file events) when HEAD has not
    moved, else git's change set (``full``: every file)."""
    if paths is not None and not full and state is not None:
        head, versions = git.versions_of(sorted(set(paths)))
        if head.commit == state.commit:  # pure working-tree edits: no status() call
            dirty = dict(state.dirty)
            for v in versions:
                if v.dirty:
                    dirty[v.path] = v.blob
                else:
                    dirty.pop(v.path, None)
            return ChangeSet(
                source=git.source, head=head, full=False, versions=tuple(versions), dirty=dirty
            )
    return git.change_set(
        since=state.commit if state else None,
        since_dirty=state.dirty if state else {},
        full=full,
    )


def plan(
    changes: ChangeSet,
    manifest: dict[str, FileRecord],
    stale_languages: frozenset[str],
    report: SyncReport,
    *,
    matcher: Matcher,
    store: IndexStore,
) -> tuple[list[FileVersion], list[str], set[str]]:
    """(files to index, paths to delete, paths that may have rows in the index).

    ``stale_languages`` (``stale``): the files indexed as those languages (any, for
    :data:`ALL`) are indexed again although their blob is the same.

    Rows of a path not in the manifest exist only after a crash, and a crash
    leaves the state pending, which makes the next sync full: a full sync
    also looks for paths with chunk rows.
    """
    todo: list[FileVersion] = []
    deletes: list[str] = []
    wanted: set[str] = set()
    for v in changes.versions:
        if v.blob is None or not matcher(v.path):
            if v.path in manifest:
                deletes.append(v.path)
            if (reason := standing_skip(v, matcher)) is not None:
                report.skipped[reason] += 1
                log.warning("file_refused", path=v.shown, reason=REFUSALS.get(reason, reason))
            continue
        wanted.add(v.path)
        rec = manifest.get(v.path)
        restale = "*" in stale_languages or (rec is not None and rec.language in stale_languages)
        if rec is not None and rec.blob == v.blob and not restale:
            if v.blob == UNREADABLE:  # still unreadable: said again by every run
                report.skipped["unreadable"] += 1
                log.warning("file_unreadable", path=v.shown)
            continue
        todo.append(v)
    known = set(manifest)
    if changes.full:
        known |= store.chunk_paths(changes.source.id)
        deletes.extend(sorted(known - wanted - set(deletes)))
    # an exact rename is a delete and an add of the same blob
    deleted_blobs = Counter(manifest[p].blob for p in deletes if p in manifest)
    for v in todo:
        if v.path in manifest:
            report.changed += 1
        elif deleted_blobs[v.blob or ""] > 0:
            deleted_blobs[v.blob or ""] -= 1
            report.renamed += 1
        else:
            report.added += 1
    report.deleted = len(deletes) - report.renamed
    if changes.full:
        report.unchanged = len(wanted) - report.added - report.changed - report.renamed
    else:
        report.unchanged = len(manifest) - report.changed - len(deletes)
    return todo, deletes, known


def in_order(
    git: GitSource, todo: list[FileVersion], changes: ChangeSet
) -> tuple[list[FileVersion], Rank]:
    """Files in the order that makes an index useful soonest (``pipeline/order.py``),
    whatever the size of the change, and that order (the vectors are filled in it)."""
    dirty = {p for p in changes.dirty}
    rank = ranker(git, changes.head.commit, walk=len(todo) > 1, dirty=dirty)
    return ordered(todo, rank), rank
