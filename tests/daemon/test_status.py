"""The status document from typed snapshots: labels that say what is true, progress,
a failing source degraded, and each writer job counted once."""

from __future__ import annotations

import ast
import re
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from codechunkd.daemon.control import SourceSpec
from codechunkd.daemon.jobs import Upkeep
from codechunkd.daemon.snapshot import _unavailable_snapshot
from codechunkd.daemon.status import (
    EXIT_DEGRADED,
    EXIT_STALE,
    DaemonSnapshot,
    SourceSnapshot,
    StatusSnapshot,
    document,
    exit_code,
    progress_text,
    render_text,
    status_line,
)

RECORD: dict[str, Any] = {
    "source": "s1",
    "repo": "/src/app",
    "branch": "main",
    "commit": "a" * 40,
    "dirty": {},
    "pending": None,
    "files": 10,
    "chunks": 50,
    "updated_at": None,
}
PROGRESS: dict[str, Any] = {
    "files_done": 412,
    "files_total": 1765,
    "chunks": 3000,
    "embedded": 2900,
    "reused": 220,
    "seconds": 150.0,
    "chunks_per_second": 20.8,
    "eta_s": 250,
    "activity": "indexing",
}


def daemon(**kw: Any) -> DaemonSnapshot:
    base: dict[str, Any] = dict(
        pid=1,
        version="x",
        started_at="now",
        uptime_s=5.0,
        caught_up=False,
        writer_healthy=True,
        stall_after_s=300.0,
        model_loaded=True,
    )
    return DaemonSnapshot(**{**base, **kw})


def test_a_first_index_is_indexing_with_progress_not_interrupted() -> None:
    """A sync this daemon runs now: `[indexing]` with files, chunks, rate and ETA."""
    src = SourceSnapshot(
        record={**RECORD, "pending": "b" * 40, "commit": None},
        head="b" * 40,
        head_branch="main",
        live=True,
        busy_s=150.0,
        progress=PROGRESS,
    )
    doc = document(StatusSnapshot(daemon=daemon(), index="/i", sources=(src,)))
    assert doc["daemon"]["state"] == "indexing"
    assert doc["sources"][0]["progress"]["files_done"] == 412
    assert exit_code(doc) == EXIT_STALE
    text = render_text(doc)
    assert "[indexing]" in text and "interrupted" not in text
    assert "412/1,765 files" in text and "20.8 chunks/s" in text and "ETA 4m10s" in text
    line = status_line(StatusSnapshot(daemon=daemon(), index="/i", sources=(src,)))
    assert line.startswith("indexing:") and "412/1,765 files" in line


def test_a_source_says_when_it_was_updated_in_words_and_in_utc() -> None:
    """`updated 2m ago (2026-… UTC)`, counts with thousands separators; never when unset."""
    at = datetime.now(UTC) - timedelta(seconds=150)
    record = {**RECORD, "files": 5620, "chunks": 107842, "updated_at": at.isoformat()}
    src = SourceSnapshot(record=record, head="a" * 40, head_branch="main")
    text = render_text(document(StatusSnapshot(daemon=None, index="/i", sources=(src,))))
    assert "5,620 files, 107,842 chunks" in text, text
    stamp = f"({at:%Y-%m-%d %H:%M:%S} UTC)"
    assert re.search(r"updated \d+m ago " + re.escape(stamp), text), text
    unset = SourceSnapshot(record=RECORD, head="a" * 40, head_branch="main")
    text = render_text(document(StatusSnapshot(daemon=None, index="/i", sources=(unset,))))
    assert "updated never" in text, text


def test_a_fill_taken_up_again_names_no_files() -> None:
    """A fill resumed by a sync that wrote no file: its vectors and texts, no `0/0 files`;
    a text-first write's pace with thousands separators."""
    fill = {"files_done": 0, "files_total": 0, "chunks": 9000, "vectors": 3000}
    fill |= {"activity": "filling vectors", "fill_texts": 6000, "fill_embedded": 40}
    assert progress_text(fill) == "vectors 3,000/9,000 chunks, 40/6,000 texts embedded, ETA ?"
    fill |= {"files_done": 3, "files_total": 3, "eta_s": 65}
    assert progress_text(fill).endswith("texts embedded; 3/3 files written, ETA 1m05s")
    write = {"files_done": 56, "files_total": 107, "chunks": 1690, "chunks_per_second": 1029.4}
    write |= {"activity": "writing text", "eta_s": 1}
    assert progress_text(write) == (
        "writing text (vectors fill in after): 56/107 files written, 1,690 chunks, "
        "1,029.4 chunks/s, ETA 1s"
    )


def test_a_pending_mark_nobody_works_on_is_interrupted() -> None:
    """No daemon, a state left pending by a killed run: `[interrupted]`."""
    src = SourceSnapshot(record={**RECORD, "pending": "b" * 40}, head="a" * 40, head_branch="main")
    doc = document(StatusSnapshot(daemon=None, index="/i", sources=(src,)))
    assert doc["daemon"]["state"] == "stopped"
    assert "[interrupted]" in render_text(doc)
    fresh = SourceSnapshot(record=RECORD, head="a" * 40, head_branch="main")
    assert "[fresh]" in render_text(
        document(StatusSnapshot(daemon=None, index="/i", sources=(fresh,)))
    )


def test_a_failing_source_is_degraded_with_its_reason_and_unsaved_edits() -> None:
    """After a failed sync: degraded (exit 11), the reason, and the edits waiting on it."""
    src = SourceSnapshot(
        record=RECORD,
        head="a" * 40,
        head_branch="main",
        live=True,
        synced=True,
        pending_paths=30,
        errors=1,
        consecutive_failures=1,
        last_error="disk full",
        failing="disk full",
    )
    doc = document(StatusSnapshot(daemon=daemon(caught_up=True), index="/i", sources=(src,)))
    assert doc["daemon"]["state"] == "degraded"
    assert exit_code(doc) == EXIT_DEGRADED
    text = render_text(doc)
    assert "failing: disk full" in text and "pending 30 paths" in text


def test_status_does_not_import_the_service() -> None:
    """status.py renders snapshots: it imports no daemon module, not even for typing."""
    path = Path(__file__).parents[2] / "src/codechunkd/daemon/status.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    assert not [n for n in names if n.startswith("codechunkd")], names


def test_a_job_run_by_the_writer_is_counted_once() -> None:
    """The scheduler's run of a writer job is not counted; the writer's record is."""
    upkeep = Upkeep()
    queued = threading.Event()
    plain = threading.Event()
    upkeep.add("compact", 3600, queued.set, recorded=True)
    upkeep.add("reconcile", 3600, plain.set)
    upkeep.start()
    try:
        upkeep.run_soon("compact")
        upkeep.run_soon("reconcile")
        assert queued.wait(10) and plain.wait(10)
        end = threading.Event()
        for _ in range(200):  # the listener runs just after the job returns
            if upkeep.as_dict()["reconcile"]["runs"] == 1:  # type: ignore[index]
                break
            end.wait(0.05)
        upkeep.record("compact", None)
    finally:
        upkeep.shutdown()
    stats = upkeep.as_dict()
    assert stats["reconcile"]["runs"] == 1  # type: ignore[index]
    assert stats["compact"]["runs"] == 1  # type: ignore[index]


def test_the_last_batch_says_what_came_from_the_seed_and_why_a_seed_was_skipped() -> None:
    """A batch that took vectors from a seed index says how many; a skipped seed says why."""
    src = SourceSnapshot(
        record={**RECORD, "pending": None},
        head="a" * 40,
        head_branch="main",
        live=True,
        last_batch={
            "trigger": "reconcile",
            "added": 3,
            "embedded": 2,
            "seeded": 40,
            "seed_skipped": None,
            "seconds": 1.5,
            "ago_s": 2.0,
        },
    )
    text = render_text(document(StatusSnapshot(daemon=daemon(), index="/i", sources=(src,))))
    assert "2 embedded in 1.50s, 40 from the seed" in text
    assert "seed skipped" not in text
    skipped = SourceSnapshot(
        record=RECORD,
        head="a" * 40,
        head_branch="main",
        live=True,
        last_batch={"trigger": "reconcile", "embedded": 5, "seed_skipped": "no index at /x"},
    )
    text = render_text(document(StatusSnapshot(daemon=daemon(), index="/i", sources=(skipped,))))
    assert "seed skipped: no index at /x" in text


def test_a_source_not_opened_shows_what_the_index_holds_of_it() -> None:
    """A listed source the daemon could not open is listed with its own recorded entry
    (found by path, and by ref: ``main`` is ``refs/heads/main``), degraded, and ``HEAD ?``;
    another ref's entry of the same repository is not taken for it."""
    tree = dict(RECORD, source="t", ref=None, files=7)
    main = dict(RECORD, source="m", ref="refs/heads/main", files=3)
    why = "/src/app: the repository is gone (moved or deleted?)"
    for spec, files in (
        (SourceSpec(path="/src/app"), 7),
        (SourceSpec(path="/src/app", ref="main"), 3),
    ):
        s = _unavailable_snapshot(spec, why, [main, tree])
        assert s.record["files"] == files and s.failing == why
    missing = _unavailable_snapshot(SourceSpec(path="/src/app", ref="dev"), why, [main, tree])
    assert missing.record["files"] == 0
    text = render_text(document(StatusSnapshot(daemon=daemon(), index="/i", sources=(s,))))
    assert "/src/app  [stale, degraded]" in text, text
    assert "branch ?, HEAD ?, indexed" in text and f"failing: {why}" in text, text


def test_a_daemon_that_follows_nothing_says_so_not_that_nothing_is_indexed() -> None:
    """A running daemon with no sources (the last one removed: its rows stay) says it
    follows none and how to add one; with no daemon, an empty index is "nothing indexed"."""
    running = render_text(document(StatusSnapshot(daemon=daemon(), index="/i", sources=())))
    assert "no sources followed: `codechunkd add PATH` adds one" in running, running
    assert "nothing indexed yet" not in running
    stopped = render_text(document(StatusSnapshot(daemon=None, index="/i", sources=())))
    assert "nothing indexed yet" in stopped, stopped
