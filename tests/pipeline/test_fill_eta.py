"""The fill's ETA and how status words coverage and a model load (pure values)."""

from __future__ import annotations

from codechunkd.daemon.status import coverage_text, progress_text
from codechunkd.pipeline.fill import FillReport


def test_the_eta_waits_for_a_stable_rate_then_counts_the_work_left() -> None:
    """No ETA before 5% of the work (of a fill of minutes) and two slices; then work left
    at the measured rate."""
    r = FillReport(texts=100, work_total=10_000, work_done=400, embedded=4, embed_seconds=4.0)
    assert r.eta_s is None  # 4% of the work
    r.work_done, r.embedded, r.embed_seconds = 1_000, 10, 10.0
    assert r.eta_s == 90.0  # 9,000 tokens left at 100 tokens/s
    r.work_done, r.embedded = 10_000, 100
    assert r.eta_s == 0.0
    assert FillReport().eta_s == 0.0  # nothing to embed


def test_a_fill_too_large_for_5_percent_soon_gets_its_eta_after_two_minutes() -> None:
    """A million-chunk fill: 1% of its work done in two minutes of embedding already gives
    an ETA at that rate (5% would take ten)."""
    r = FillReport(texts=10**6, work_total=10**8, work_done=10**6, embedded=10**4)
    r.embed_seconds = 119.0
    assert r.eta_s is None
    r.embed_seconds = 120.0
    assert r.eta_s == 99 * 10**6 / (10**6 / 120.0)  # the work left at 8,333 tokens/s


def test_status_words_coverage_a_fill_and_a_model_load() -> None:
    """``text N/M chunks · vectors K/M``; a fill's progress in vectors and texts with its
    ETA; a model load with its elapsed time."""
    assert coverage_text({"text_chunks": 2303, "vector_chunks": 412}) == (
        "text 2,303/2,303 chunks · vectors 412/2,303"
    )
    fill = {
        "activity": "filling vectors",
        "files_done": 166,
        "files_total": 166,
        "chunks": 2303,
        "vectors": 412,
        "fill_embedded": 400,
        "fill_texts": 1900,
        "eta_s": 250,
    }
    assert progress_text(fill) == (
        "vectors 412/2,303 chunks, 400/1,900 texts embedded; 166/166 files written, ETA 4m10s"
    )
    load = {
        "activity": "loading the model",
        "activity_s": 65,
        "files_done": 166,
        "files_total": 166,
    }
    assert progress_text(load) == "loading the model (1m05s); 166/166 files written"
