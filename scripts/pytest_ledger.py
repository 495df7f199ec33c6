"""A pytest plugin that keeps a ledger of the run, line by line, for ``scripts/run_tests.py``.

Loaded with ``-p pytest_ledger`` (``scripts/`` on ``PYTHONPATH``) when ``PYTEST_LEDGER``
names a file. It writes, and flushes at once, so that a process ended by ``os._exit`` or a
signal leaves what it had done:

    collected N          after collection and deselection: the tests that should run
    ran NODEID OUTCOME   once per test, when its teardown has been reported
    crashed NODEID       a test whose process died while running it (pytest-xdist)
    died WORKER          a pytest-xdist worker that ended abnormally, mid-test or not
    finished STATUS      at the end of a session that ended normally
    cpu NODEID SECONDS   the CPU-seconds of a test, setup to teardown, of the process that
                         ran it and of the child processes it waited for (whatever the
                         machine's load, the cost of a test: ``run_tests.py`` prints the
                         costliest files)
    wall NODEID SECONDS  its wall-clock seconds, setup to teardown (beside its CPU: how long
                         it held a worker without using a core, e.g. waiting on a timer)

A ledger without its ``finished`` line is a run that stopped early, whatever status the
process ended with; one with fewer ``ran`` lines than ``collected`` is a short run.

Under pytest-xdist (``-n``) only the controller keeps the ledger: the workers it starts
inherit ``PYTEST_LEDGER_OWNER`` and write nothing. The controller collects nothing
itself: ``collected`` is the count the first worker reports (every worker collects the
same tests, or xdist stops the run), ``ran`` lines come from the reports the workers
send, and a worker that dies (``os._exit``, a signal) gives a ``died`` line, and a
``crashed`` line and no ``ran`` line for the test it was running; xdist starts a new
worker for the rest, and the run still fails.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from typing import IO, Any

import pytest

_ledger: IO[str] | None = None
_outcomes: dict[str, str] = {}
_collected_written = False


def _write(line: str) -> None:
    if _ledger is not None:
        _ledger.write(line + "\n")
        _ledger.flush()


def pytest_configure(config: pytest.Config) -> None:
    global _ledger
    path = os.environ.get("PYTEST_LEDGER")
    # only the main process keeps it (a test that runs pytest in a child starts no ledger)
    if path and _ledger is None and not os.environ.get("PYTEST_LEDGER_OWNER"):
        os.environ["PYTEST_LEDGER_OWNER"] = str(os.getpid())
        _ledger = open(path, "w", encoding="utf-8")  # noqa: SIM115 - open for the whole session


def pytest_collection_finish(session: pytest.Session) -> None:
    _write(f"collected {len(session.items)}")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    global _collected_written
    if not _collected_written:  # a worker started again after a crash collects again
        _collected_written = True
        _write(f"collected {len(ids)}")


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: object) -> None:
    _write(f"crashed {crashitem.replace(' ', '_')}")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object | None) -> None:
    if error is not None:
        _write(f"died {getattr(node.gateway, 'id', node)}")


_STARTED = pytest.StashKey[tuple[float, float]]()
"""The CPU-seconds (``_cpu_seconds``) and the monotonic clock when a test's setup began."""


def _cpu_seconds() -> float:
    """User and system CPU of this process and of its children that have been waited for."""
    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    # in the process that runs it (an xdist worker)
    item.stash[_STARTED] = (_cpu_seconds(), time.monotonic())
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    started = item.stash.get(_STARTED, None)
    if call.when == "teardown" and started is not None:
        # a report property travels to the xdist controller with the report
        cpu, clock = started
        outcome.get_result().user_properties.extend(
            [("cpu_s", _cpu_seconds() - cpu), ("wall_s", time.monotonic() - clock)]
        )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # a test's outcome is its worst phase: a pass whose teardown errors is an error
    if report.failed:
        _outcomes[report.nodeid] = "failed" if report.when == "call" else "error"
    elif report.skipped and report.nodeid not in _outcomes:
        _outcomes[report.nodeid] = "skipped"
    elif report.when == "call":
        _outcomes.setdefault(report.nodeid, "passed")
    if report.when == "teardown":
        nodeid = report.nodeid.replace(" ", "_")
        _write(f"ran {nodeid} {_outcomes.get(report.nodeid, 'passed')}")
        for key, value in report.user_properties:
            if key in ("cpu_s", "wall_s"):
                _write(f"{key[:-2]} {nodeid} {float(value):.2f}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _ledger
    _write(f"finished {int(exitstatus)}")
    if _ledger is not None:
        _ledger.close()
        _ledger = None
