"""Debounce and coalesce on an injected clock: no threads, no sleeping."""

from __future__ import annotations

import threading
import time

from codechunkd.daemon.debounce import ChangeQueue, Debouncer, Level, Task


def make(**kw: float) -> Debouncer:
    args = {"quiet": 0.15, "max_delay": 1.0, "max_paths": 100}
    args.update(kw)
    return Debouncer(
        quiet=args["quiet"], max_delay=args["max_delay"], max_paths=int(args["max_paths"])
    )


def test_burst_is_due_after_quiet_period() -> None:
    """A burst waits for `quiet` seconds after its last event, and becomes one change set."""
    d = make()
    d.add("s", paths=["a.py"], now=10.0)
    d.add("s", paths=["b.py"], now=10.1)
    d.add("s", paths=["a.py"], now=10.2)
    assert d.take(now=10.3) == {}
    assert d.deadline() == 10.35
    due = d.take(now=10.35)
    assert {"a.py", "b.py"} == due["s"].paths
    assert due["s"].level == Level.PATHS
    assert len(d) == 0


def test_max_delay_caps_a_burst_that_never_goes_quiet() -> None:
    """Events every 100 ms never leave a quiet gap; the cap hands the batch over anyway."""
    d = make(quiet=0.15, max_delay=1.0)
    t = 0.0
    handed_over_at = None
    while t < 3.0:
        d.add("s", paths=[f"f{int(t * 10)}.py"], now=t)
        if d.take(now=t):
            handed_over_at = t
            break
        t = round(t + 0.1, 3)
    assert handed_over_at == 1.0


def test_head_move_keeps_paths_and_stronger_levels_absorb_them() -> None:
    """HEAD keeps the paths seen so far; RECONCILE and above drop them (git status covers)."""
    d = make()
    d.add("s", paths=["a.py"], now=0)
    d.add("s", level=Level.HEAD, now=0.01)
    p = d.peek("s")
    assert p is not None
    assert (Level.HEAD, {"a.py"}) == (p.level, p.paths)
    d.add("s", level=Level.RESCAN, now=0.02)
    d.add("s", paths=["b.py"], now=0.03)
    assert (Level.RESCAN, set()) == (p.level, p.paths)


def test_checkout_storm_becomes_one_reconcile() -> None:
    """10,000 paths in one burst are not 10,000 jobs: past max_paths it is one reconcile."""
    d = make(max_paths=1000)
    for i in range(10_000):
        d.add("s", paths=[f"src/f{i}.py"], now=i * 1e-5)
    due = d.take(now=5.0)
    assert len(due) == 1
    assert due["s"].level == Level.RECONCILE
    assert not due["s"].paths


def test_sources_have_their_own_windows_and_urgent_is_immediate() -> None:
    """Each source is debounced on its own; a reconcile request is due at once."""
    d = make()
    d.add("a", paths=["x"], now=0.0)
    d.add("b", level=Level.RECONCILE, urgent=True, now=0.1)
    assert list(d.take(now=0.1)) == ["b"]
    assert list(d.take(now=0.2)) == ["a"]


def test_queue_get_returns_due_work_and_tasks_and_close_wakes() -> None:
    """The writer blocks in get(); a task wakes it at once; close() returns None."""
    q = ChangeQueue(make(quiet=0.05, max_delay=0.2))
    q.put("s", paths=["a.py"])
    t0 = time.monotonic()
    work = q.get(timeout=5)
    assert work is not None
    assert {"a.py"} == work.changes["s"].paths
    assert time.monotonic() - t0 >= 0.04
    q.submit("compact")
    q.submit("compact")
    work = q.get(timeout=5)
    assert work is not None
    assert work.tasks == ("compact",)
    assert q.get(timeout=0.05) is None

    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(q.get()))
    waiter.start()
    q.close()
    waiter.join(timeout=5)
    assert not waiter.is_alive()
    assert got == [None]
    q.put("s", paths=["late.py"])  # intake is closed: ignored, never blocks
    assert not q.busy()


def test_the_queue_says_when_the_writer_is_wanted_elsewhere() -> None:
    """`wanted`: a burst due (not one still settling), a reload waiting, or intake closed;
    a compaction waiting is not worth stopping a fill for."""
    clock = [100.0]
    q = ChangeQueue(Debouncer(quiet=0.15, max_delay=1.0, max_paths=100, clock=lambda: clock[0]))
    assert not q.wanted()
    q.submit(Task.COMPACT)
    assert not q.wanted()
    q.put("s", paths=["a.py"])
    assert not q.wanted()  # settling: more events may come
    clock[0] += 0.15
    assert q.wanted()
    assert q.get(timeout=0) is not None and not q.wanted()
    q.submit(Task.RELOAD)
    assert q.wanted()
    q.get(timeout=0)
    q.close()
    assert q.wanted()
