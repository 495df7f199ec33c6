"""Crash points: a test hook that kills this process at an exact write boundary.

A sync must leave an index that the next sync repairs wherever the process
dies.  A kill at a random instant mostly lands between the writes, so
``tests/pipeline/test_crash.py`` instead kills a real ``codechunkd index`` at
each boundary a real sync crosses.  Every write of a sync is bracketed by
``crashpoint("…")`` calls; the environment arms them (read once, at import):

``_CODECHUNKD_CRASH_AT=name:N``
    the Nth ``crashpoint(name)`` of this process sends SIGKILL to the process
    itself: a real kill (no cleanup, no ``finally``), not an exception.
``_CODECHUNKD_CRASH_TRACE=path``
    each crash point reached appends its name and a newline to ``path``.
``_CODECHUNKD_HOLD_AT=name:N``
    the thread that makes the Nth ``crashpoint(name)`` call blocks there for good: a
    batch that never ends (a hung embedder, a stuck disk), for the shutdown's abandon path;
    and the instant a test must signal a run at (mid-index, with work left): the test
    waits for the point in the trace, then signals; a SIGINT interrupts the main thread's
    wait, and the run cannot have finished before the signal came.

The names start with an underscore because ``CODECHUNKD_*`` variables are
settings, and an unknown one is an error (config/loader.py).  Unarmed, a crash
point costs one test of a module global.
"""

from __future__ import annotations

import os
import signal
import threading

from codechunkd.errors import ConfigError

AT_ENV = "_CODECHUNKD_CRASH_AT"
TRACE_ENV = "_CODECHUNKD_CRASH_TRACE"


HOLD_ENV = "_CODECHUNKD_HOLD_AT"


def _parse_at(spec: str, env: str = AT_ENV) -> tuple[str, int] | None:
    if not spec:
        return None
    name, _, nth = spec.rpartition(":")
    if not name or not nth.isdigit() or int(nth) < 1:
        raise ConfigError(f"{env} must be NAME:N with N >= 1, got {spec!r}", key=env)
    return name, int(nth)


_AT = _parse_at(os.environ.get(AT_ENV, ""))
_HOLD = _parse_at(os.environ.get(HOLD_ENV, ""), HOLD_ENV)
_TRACE = os.environ.get(TRACE_ENV) or None
_ARMED = any(x is not None for x in (_AT, _HOLD, _TRACE))
_counts: dict[str, int] = {}
_lock = threading.Lock()


def crashpoint(name: str) -> None:
    """Mark a write boundary; when armed, trace it and die here on the chosen hit."""
    if not _ARMED:
        return
    with _lock:
        n = _counts[name] = _counts.get(name, 0) + 1
        if _TRACE is not None:
            # one unbuffered append per point: nothing is lost to the kill that may follow
            fd = os.open(_TRACE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, f"{name}\n".encode())
            finally:
                os.close(fd)
        if (name, n) == _AT:
            os.kill(os.getpid(), signal.SIGKILL)
    if (name, n) == _HOLD:  # outside the lock: other threads go on past their points
        threading.Event().wait()
