"""WorkerPool on real spawn processes and real signals: results in order with a bounded
number in flight, a task's error raised in its turn, and a worker killed halfway through
writing a result an error at once, never a hang (the ProcessPoolExecutor failure of #20)."""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from codechunkd.procs import WorkerDied, WorkerPool
from tests.conftest import wait_for

#: A result far larger than a pipe's buffer (64 KiB on Linux): its write blocks halfway.
BIG: int = 16 * 1024 * 1024


def _square(task: int, offset: int) -> tuple[int, int]:
    """The task function: the square plus ``offset``, and which process computed it."""
    if task == 7:
        raise ValueError("seven is not welcome")
    return task * task + offset, os.getpid()


def _big_after_marking(task: str, marks: str) -> bytes:
    """Small for ``small``; for ``big``, records this worker's pid in ``marks``, then a
    result whose write to the pipe blocks until the parent reads it."""
    if task == "small":
        return b"ok"
    Path(marks, "pid").write_text(str(os.getpid()))
    return b"x" * BIG


def _children() -> set[int]:
    return {p.pid for p in multiprocessing.active_children() if p.pid is not None}


def drain_within(results: Iterator[Any], seconds: float) -> BaseException | list[Any]:
    """What is left of ``results``, or what it raised; fails the test if it takes longer."""
    outcome: queue.Queue[BaseException | list[Any]] = queue.Queue()

    def drain() -> None:
        try:
            outcome.put(list(results))
        except BaseException as exc:  # handed to the test thread
            outcome.put(exc)

    threading.Thread(target=drain, daemon=True).start()
    try:
        return outcome.get(timeout=seconds)
    except queue.Empty:
        pytest.fail(f"the pool hung for {seconds} s")


def test_results_in_input_order_with_at_most_ahead_in_flight() -> None:
    """Two workers square 30 numbers: the results come in input order, both workers take
    part, and the pool never takes more than ``ahead`` tasks past what it has given back;
    a second map reuses the same workers."""
    before = _children()
    taken = 0
    given = 0
    most = 0

    def tasks() -> Iterator[int]:
        nonlocal taken
        for t in range(30):
            if t == 7:
                continue  # the one task the function refuses
            taken += 1
            yield t

    with WorkerPool(2, _square, (1,), name="test-worker") as pool:
        got = []
        for value, pid in pool.map(tasks(), ahead=3):
            given += 1
            most = max(most, taken - given)
            got.append((value, pid))
        assert [v for v, _ in got] == [t * t + 1 for t in range(30) if t != 7]
        assert len({pid for _, pid in got}) == 2
        assert most <= 3
        again = list(pool.map([2, 3], ahead=2))
        assert {pid for _, pid in again} <= {pid for _, pid in got}
        assert pool.started == 2 and pool.tasks_done == 31
    wait_for(lambda: not _children() - before, "the workers ended with the pool", timeout=10)


def test_a_task_error_is_raised_in_its_turn_and_ends_the_workers() -> None:
    """A ValueError in the task function reaches the caller after the results before it,
    with the worker's traceback as a note; the workers are ended, and the next map starts
    new ones."""
    before = _children()
    pool: WorkerPool[tuple[int, int]] = WorkerPool(2, _square, (0,), name="test-worker")
    got = []
    with pytest.raises(ValueError, match="seven is not welcome") as info:
        for value, _ in pool.map(range(20), ahead=4):
            got.append(value)
    assert got == [t * t for t in range(7)]
    assert any("in a worker process" in note for note in info.value.__notes__)
    assert not _children() - before
    assert [v for v, _ in pool.map([3], ahead=1)] == [9]
    assert pool.started == 4
    pool.close()
    assert not _children() - before


def test_closing_the_iteration_early_ends_the_workers() -> None:
    """A caller that stops after the first result and closes the generator leaves no
    worker behind."""
    before = _children()
    pool: WorkerPool[tuple[int, int]] = WorkerPool(2, _square, (0,), name="test-worker")
    results = pool.map(range(100), ahead=4)
    assert isinstance(results, Generator)
    assert next(results)[0] == 0
    assert len(_children() - before) == 2
    results.close()
    assert not _children() - before


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="sees a blocked write in /proc")
def test_a_worker_killed_halfway_through_a_result_is_an_error_not_a_hang(
    tmp_path: Path,
) -> None:
    """A worker SIGKILLed while its write of a 16 MiB result is blocked halfway (the parent
    not reading): the parent finds a result cut short, raises WorkerDied naming SIGKILL
    within seconds, and ends the pool.  A pipe shared by several workers would wait for
    the missing bytes for ever."""
    before = _children()
    pool: WorkerPool[bytes] = WorkerPool(
        1, _big_after_marking, (str(tmp_path),), name="test-worker"
    )
    results = pool.map(["small", "big", "small"], ahead=2)
    assert next(results) == b"ok"  # "big" is given out before this returns
    marked = tmp_path / "pid"
    wait_for(
        lambda: marked.exists() and marked.read_text() != "",
        "the worker marked its pid",
        timeout=10,
    )
    pid = int(marked.read_text())
    stat = Path(f"/proc/{pid}/stat")
    # past the mark it only ever sleeps in the write that the parent does not read
    wait_for(
        lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "S",
        "the worker asleep in its write",
        timeout=10,
    )
    os.kill(pid, signal.SIGKILL)

    got = drain_within(results, 30)
    assert isinstance(got, WorkerDied), got
    assert got.pid == pid and got.exitcode == -signal.SIGKILL
    assert "killed by SIGKILL" in str(got)
    # the read that found the result cut short, not the sentinel, saw it first
    assert "end of file during message" in str(got.__cause__)
    assert not _children() - before
