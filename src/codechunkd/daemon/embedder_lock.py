"""One embedding model shared by the writer and the searches: ``LockedEmbedder``.

It owns the model's turns (a ticket lock: one call at a time, in arrival order), the
writer's slicing of large calls, the measured speed, the last use (for the idle unload)
and the loading flag that status and search read.  It must not know the service, the
queue or the store: it wraps an ``Embedder`` and nothing else.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from codechunkd import heap, logs
from codechunkd.daemon.answer import ModelBusy
from codechunkd.embedding.base import texts_per_call
from codechunkd.embedding.embedder import Embedder, Vectors

log = logs.get_logger("codechunkd.daemon")

Clock = Callable[[], float]


class LockedEmbedder:
    """One embedding call at a time, in slices, remembering when it was last used.

    The writer and the control socket's searches share one model (a fast
    tokenizer must not be used from two threads at once); slicing the writer's
    large calls lets a search in between wait for at most one slice: turns are
    taken in arrival order (a ticket lock; a plain lock lets the writer take it
    back before a waiting search wakes).

    A slice keeps every worker of the model busy: at least ``slice_size`` texts and
    two per worker (``parallelism``: onnx sessions, requests in flight), growing
    with the measured speed to what takes about ``slice_seconds``, up to one full
    batch per worker.  So a search waits about that long, and a model with many
    sessions is not starved by slices smaller than its batches.
    """

    def __init__(
        self,
        inner: Embedder,
        *,
        slice_size: int = 16,
        slice_seconds: float = 0.25,
        clock: Clock = time.monotonic,
        timer: Clock = time.perf_counter,
    ):
        self.inner = inner
        self.slice_size = slice_size
        self.slice_seconds = slice_seconds
        self.clock = clock
        self.timer = timer
        self.last_used = clock()
        self.loading = False
        """The writer is loading the model (a first run: export, calibration)."""
        self.loading_since: float | None = None
        """When the load began (``clock``), while ``loading``."""
        self.slices = 0
        """Slices (calls to the model) done so far."""
        self.texts_per_s = 0.0
        """Measured speed of the model in slices (a moving average; 0 before the first)."""
        self._cond = threading.Condition()
        self._next_ticket = 0
        self._serving = 0
        self._abandoned: set[int] = set()
        self._local = threading.local()

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def loaded(self) -> bool:
        return bool(getattr(self.inner, "loaded", True))

    @property
    def parallelism(self) -> int:
        return max(1, int(getattr(self.inner, "parallelism", 1)))

    @property
    def batch_size(self) -> int:
        return max(1, int(getattr(self.inner, "batch_size", self.slice_size)))

    @property
    def waited_slices(self) -> int:
        """Turns of other calls that this thread's last call waited for before it ran."""
        return int(getattr(self._local, "waited", 0))

    @contextlib.contextmanager
    def _turn(self, wait_s: float | None = None) -> Iterator[None]:
        """Hold the model; turns are served in the order they were asked for.  ``wait_s``:
        give the turn up after that long (``ModelBusy``): the model is loading, or the
        writer's slice is held (a remote server that does not answer)."""
        with self._cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            first = self._serving
            deadline = None if wait_s is None else self.timer() + wait_s
            try:
                while self._serving != ticket:
                    left = None if deadline is None else deadline - self.timer()
                    if left is not None and left <= 0:
                        raise ModelBusy(wait_s or 0.0)
                    self._cond.wait(left)
            except BaseException:
                self._abandoned.add(ticket)  # never served: the next in line must not wait
                raise
        self._local.waited = ticket - first
        try:
            yield
        finally:
            with self._cond:
                self._serving += 1
                while self._serving in self._abandoned:
                    self._abandoned.discard(self._serving)
                    self._serving += 1
                self._cond.notify_all()

    def slice_texts(self) -> int:
        """Texts in the next slice: every worker busy, about ``slice_seconds`` of work."""
        workers = self.parallelism
        least = max(self.slice_size, 2 * workers)
        most = texts_per_call(self, least)
        wanted = int(self.texts_per_s * self.slice_seconds)
        return min(most, max(least, wanted))

    def load(self) -> None:
        """Load the model now (the writer does, before its first embedding, to say so)."""
        load = getattr(self.inner, "load", None)
        if load is not None:
            self.loading, self.loading_since = True, self.clock()
            try:
                with self._turn():
                    load()
                    self.last_used = self.clock()
            finally:
                self.loading, self.loading_since = False, None
            heap.release_freed_memory()  # the model file's parse buffers, freed by now

    def embed_within(self, texts: Sequence[str], wait_s: float) -> Vectors:
        """A few texts (a query) in one turn, if the model is free within ``wait_s``; else
        ``ModelBusy`` (the search then answers from the full text)."""
        with self._turn(wait_s):
            out = self.inner.embed(texts)
            self.last_used = self.clock()
            return out

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return self.inner.embed(texts)
        parts = []
        done = 0
        cold = not self.loaded
        while done < len(texts):
            with self._turn():
                size = self.slice_texts()
                started = self.timer()
                parts.append(self.inner.embed(texts[done : done + size]))
                self._measured(min(size, len(texts) - done), self.timer() - started)
                self.last_used = self.clock()
                self.slices += 1
            done += size
        if cold and self.loaded:  # loaded by this call: give back what loading freed
            heap.release_freed_memory()
        return np.concatenate(parts).astype(np.float32, copy=False)

    def _measured(self, count: int, seconds: float) -> None:
        """Fold one slice's speed into ``texts_per_s`` (short slices, e.g. queries, skipped)."""
        if count < self.slice_size or seconds <= 0:
            return
        rate = count / seconds
        self.texts_per_s = rate if not self.texts_per_s else 0.7 * self.texts_per_s + 0.3 * rate

    def unload_if_idle(self, idle: float) -> bool:
        unload = getattr(self.inner, "unload", None)
        with self._turn():
            if unload is None or not self.loaded or self.clock() - self.last_used < idle:
                return False
            unload()
        gc.collect()  # the model's objects may sit in reference cycles: free them now
        heap.release_freed_memory()
        log.info("model_unloaded", idle_s=idle)
        return True
