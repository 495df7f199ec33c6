"""Worker processes that never leave their parent waiting: a pipe each, watched with the process.

``concurrent.futures.ProcessPoolExecutor`` shares one result pipe among its workers: a
worker killed (SIGKILL, out of memory) halfway through writing a result leaves the reader
of that pipe waiting for bytes that never come, and it hung there once in four runs
(issue #20).  Here each worker has a pipe of its own, whose other end only that worker
holds, and the parent waits on those pipes together with each process's sentinel
(:func:`multiprocessing.connection.wait`).  A death at any instant is then an end of file
on the dead worker's pipe or its sentinel becoming ready, never a read that waits for ever:
it raises :class:`WorkerDied`, which says which worker and how it ended.

- Workers are ``spawn`` processes (``fork`` is unsafe in a threaded program), started at
  the first :meth:`WorkerPool.map` and kept for the next, so a caller with many rounds
  pays the start (~1 s) once.
- A worker has at most one task at a time: a second one written to a busy worker's pipe
  could fill it while the worker fills the parent's with a result, each waiting on the
  other.
- Results come back in input order; at most ``ahead`` tasks are given out or held back
  for order at once, so memory stays bounded on any number of tasks.  A result is kept
  as the bytes read until its turn: a worker waits for its next task only while the
  parent reads them, not while it unpickles.
- An exception of the task function comes back to the parent and is raised there, when
  its result's turn comes, with the worker's traceback as a note.
- Workers ignore SIGINT: a terminal's Ctrl-C reaches the whole process group, and the
  parent ends them.  Any other way out of ``map`` than its end (an exception, a death,
  the caller closing the generator) kills the workers at once: their tasks are
  abandoned, and the next ``map`` starts new ones.
"""

from __future__ import annotations

import contextlib
import signal
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from typing import Any, Generic, TypeVar

__all__ = ["WorkerDied", "WorkerPool"]

R = TypeVar("R")
_END: Any = object()


class WorkerDied(Exception):
    """A worker process ended while the parent still counted on it."""

    def __init__(self, name: str, pid: int | None, exitcode: int | None) -> None:
        self.name = name
        self.pid = pid
        self.exitcode = exitcode
        """Negative: the signal that killed it; None: it closed its pipe and did not exit."""
        super().__init__(f"worker process {name} (pid {pid}) {self.how}")

    @property
    def how(self) -> str:
        """How it ended, in words: ``killed by SIGKILL``, ``exited with code 1``."""
        code = self.exitcode
        if code is None:
            return "closed its pipe"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"


@dataclass(slots=True)
class _Worker:
    process: BaseProcess
    conn: Connection
    task: int | None = None
    """The index of the task it is working on."""


def _serve(
    conn: Connection,
    fn: Callable[..., object],
    args: tuple[Any, ...],
    initializer: Callable[..., object] | None,
    initargs: tuple[Any, ...],
) -> None:
    """A worker: ``fn(task, *args)`` for each task its pipe brings, until told to stop
    (``None``) or the pipe closes (the parent is gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        try:
            reply = (True, fn(message[0], *args))
        except Exception as exc:  # noqa: BLE001 - raised in the parent instead
            reply = (False, _noted(exc))
        try:
            conn.send(reply)  # pickled whole before any byte is written
        except OSError:
            return  # the parent is gone
        except Exception as exc:  # noqa: BLE001 - a result that does not pickle
            with contextlib.suppress(OSError):  # the next recv sees the parent gone
                conn.send((False, _noted(exc)))


def _noted(exc: Exception) -> Exception:
    """``exc`` with the worker's traceback as a note, or a RuntimeError saying what it was
    when it does not survive pickling."""
    import pickle

    exc.add_note("in a worker process:\n" + "".join(traceback.format_exception(exc)))
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301 - the bytes just made here
    except Exception:  # noqa: BLE001 - any failure to round-trip
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


class WorkerPool(Generic[R]):
    """``count`` ``spawn`` processes computing ``fn(task, *args)``; ``fn``, ``args`` and the
    tasks must pickle (``fn`` a module-level function)."""

    def __init__(
        self,
        count: int,
        fn: Callable[..., R],
        args: tuple[Any, ...] = (),
        *,
        name: str,
        initializer: Callable[..., object] | None = None,
        initargs: tuple[Any, ...] = (),
    ) -> None:
        if count < 1:
            raise ValueError(f"a pool needs at least one worker, not {count}")
        self.count = count
        self._target = (fn, args, initializer, initargs)
        self.name = name
        """The workers' process name (``ps``, ``top``)."""
        self._workers: list[_Worker] = []
        self.started = 0
        """Worker processes started so far (each ``map`` after a failed one starts more)."""
        self.tasks_done = 0
        """Results the workers have sent back."""

    @property
    def running(self) -> bool:
        """Whether the workers are started (until ``close``)."""
        return bool(self._workers)

    def __enter__(self) -> WorkerPool[R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close(now=exc_info[0] is not None)

    def map(self, tasks: Iterable[Any], *, ahead: int) -> Iterator[R]:
        """``fn(task, *args)`` of each task, in order, with at most ``ahead`` (at least 1)
        tasks given out or held back for order at once; raises :class:`WorkerDied` when a
        worker dies, and the task function's exception when its turn comes."""
        source = iter(tasks)
        done: dict[int, bytes] = {}  # unpickled in turn: a worker waits only for the bytes
        sent = given = 0  # tasks given out; results given to the caller
        more = True
        try:
            workers = self._start()
            while True:
                for w in workers:
                    if more and w.task is None and sent - given < max(1, ahead):
                        task = next(source, _END)
                        if task is _END:
                            more = False
                            break
                        self._send(w, sent, task)
                        sent += 1
                if given in done:
                    ok, value = ForkingPickler.loads(done.pop(given))
                    given += 1
                    if not ok:
                        raise value
                    yield value
                    continue
                if not more and given == sent:
                    return
                self._receive(workers, done)
        except BaseException:  # a death, an error, or the caller closing the generator
            self.close(now=True)
            raise

    def _send(self, w: _Worker, index: int, task: Any) -> None:
        try:
            w.conn.send((task,))  # a tuple: a task may be None, the word to stop
        except OSError as exc:  # its end of the pipe is closed: it died
            raise self._died(w) from exc
        w.task = index

    def _receive(self, workers: list[_Worker], done: dict[int, bytes]) -> None:
        """Wait for a result or a death; keep the results, raise on the death."""
        busy = [w for w in workers if w.task is not None]
        ready = wait([*(w.conn for w in busy), *(w.process.sentinel for w in workers)])
        for w in busy:
            if w.conn not in ready or w.task is None:
                continue
            try:
                done[w.task] = w.conn.recv_bytes()
            except (EOFError, OSError) as exc:  # the pipe closed, maybe halfway in a result
                raise self._died(w) from exc
            w.task = None
            self.tasks_done += 1
        for w in workers:
            if not w.process.is_alive():
                raise self._died(w)

    @staticmethod
    def _died(w: _Worker) -> WorkerDied:
        w.process.join(1)  # its pipe closes as it exits: the exit code follows at once
        return WorkerDied(w.process.name or "?", w.process.pid, w.process.exitcode)

    def _start(self) -> list[_Worker]:
        if not self._workers:
            import multiprocessing

            ctx = multiprocessing.get_context("spawn")
            for _ in range(self.count):
                mine, theirs = ctx.Pipe()
                proc = ctx.Process(
                    target=_serve, args=(theirs, *self._target), name=self.name, daemon=True
                )
                try:
                    proc.start()
                finally:
                    theirs.close()  # the worker's end lives in the worker only: its death is EOF
                self._workers.append(_Worker(proc, mine))
                self.started += 1
        return self._workers

    def close(self, *, now: bool = False) -> None:
        """End the workers: asked to stop, then killed if they do not within 5 s (at once
        with ``now``: whatever they are doing is abandoned)."""
        workers, self._workers = self._workers, []
        if not now:
            for w in workers:
                with contextlib.suppress(OSError):  # already gone
                    w.conn.send(None)
        for w in workers:
            w.process.join(0 if now else 5)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
            w.conn.close()
            w.process.close()
