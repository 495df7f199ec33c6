"""Run pytest and fail unless every collected test ran: the test step of ``make test``.

    .venv/bin/python scripts/run_tests.py [PYTEST ARGS...]

pytest runs in a child process with ``scripts/pytest_ledger.py`` loaded, which writes each
test's outcome to a ledger as it goes. A green exit status alone proves little: code under
test that calls ``os._exit(0)`` ends pytest with status 0 and most of the suite unrun. So
this exits non-zero when pytest failed, when the ledger has no ``finished`` line (the
session never ended normally), or when fewer tests ran than were collected, and it says
how many ran of how many collected.

The tests run on every core (up to 4; ``TEST_WORKERS=N`` chooses, ``1`` runs them in one
process): ``-n N --dist loadfile --no-loadscope-reorder`` of pytest-xdist, each test file
on one worker so that its module fixtures are made once, the files handed out in their
collection order, unless the arguments choose (``-n``, ``--dist``, ``-p no:xdist``). The
ledger counts across the workers, and a worker that dies mid-test fails the run too.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass
class Ledger:
    collected: int | None = None
    ran: dict[str, str] = field(default_factory=dict)
    crashed: list[str] = field(default_factory=list)
    died: list[str] = field(default_factory=list)
    finished: int | None = None
    cpu: dict[str, float] = field(default_factory=dict)
    wall: dict[str, float] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> Ledger:
        ledger = cls()
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        for line in text.splitlines():
            word, _, rest = line.partition(" ")
            if word == "collected":
                ledger.collected = int(rest)
            elif word == "ran":
                nodeid, _, outcome = rest.rpartition(" ")
                ledger.ran[nodeid] = outcome
            elif word == "crashed":
                ledger.crashed.append(rest)
            elif word == "died":
                ledger.died.append(rest)
            elif word == "finished":
                ledger.finished = int(rest)
            elif word in ("cpu", "wall"):
                nodeid, _, seconds = rest.rpartition(" ")
                getattr(ledger, word)[nodeid] = float(seconds)
        return ledger


def verdict(ledger: Ledger, returncode: int) -> tuple[int, str]:
    """The exit status for this run and the line that explains it."""
    ran = len(ledger.ran)
    if ledger.collected is None:
        return returncode or 1, f"tests: pytest exited {returncode} before it finished collecting"
    counts = f"{ran} of {ledger.collected} collected tests ran"
    if ledger.finished is None:
        return (
            returncode or 1,
            f"tests: INCOMPLETE: pytest stopped early (exit {returncode}): {counts}",
        )
    if ledger.crashed or ledger.died:
        where = f"running {', '.join(ledger.crashed)}" if ledger.crashed else "between tests"
        return (
            returncode or 1,
            f"tests: INCOMPLETE: a test worker died {where} (exit {returncode}): {counts}",
        )
    if returncode != 0:
        return returncode, f"tests: FAILED (pytest exit {returncode}): {counts}"
    if ran < ledger.collected:
        return 1, f"tests: INCOMPLETE: {counts}"
    return 0, f"tests: complete: {counts}"


def _by_file(seconds: dict[str, float]) -> dict[str, float]:
    by_file: dict[str, float] = {}
    for nodeid, sec in seconds.items():
        path = nodeid.split("::", 1)[0]
        by_file[path] = by_file.get(path, 0.0) + sec
    return by_file


def cpu_summary(ledger: Ledger, count: int = 10) -> list[str]:
    """The suite's CPU-seconds (children included) and its ``count`` costliest test files;
    then the ``count`` files that held a worker longest without using a core (wall-clock
    minus CPU-seconds, where the ledger has both: on a quiet machine, time spent waiting)."""
    cpu = _by_file(ledger.cpu)
    total = sum(cpu.values())
    ranked = sorted(cpu.items(), key=lambda kv: -kv[1])[:count]
    lines = [
        f"tests: {total:.0f} CPU-s in all (children included); the costliest files:",
        *(f"{sec:8.1f} CPU-s {sec / (total or 1):6.1%}  {path}" for path, sec in ranked),
    ]
    wall = _by_file({n: s for n, s in ledger.wall.items() if n in ledger.cpu})
    waits = {path: wall[path] - cpu[path] for path in wall}
    if waits:
        lines.append(
            f"tests: {sum(wall.values()):.0f} s held by tests, {sum(waits.values()):.0f} s of "
            "it not on a core (waiting, or on a busy machine queued); the longest:"
        )
        ranked = sorted(waits.items(), key=lambda kv: -kv[1])[:count]
        lines += [f"{sec:8.1f} s {wall[path]:8.1f} s held  {path}" for path, sec in ranked]
    return lines


MAX_WORKERS = 4
"""Past this many workers the suite's few long test files decide its wall time anyway."""


def parallel_args(argv: list[str], environ: dict[str, str]) -> list[str]:
    """The pytest-xdist arguments this run adds to ``argv``: none when it chooses itself."""
    chosen = ("-n", "--numprocesses", "--dist", "-d", "no:xdist")
    if any(a.startswith(chosen) or a == "xdist" for a in argv):
        return []
    workers = environ.get("TEST_WORKERS", "")
    count = int(workers) if workers else min(len(os.sched_getaffinity(0)), MAX_WORKERS)
    if count < 2 or importlib.util.find_spec("xdist") is None:
        return []  # pytest-xdist is in the dev extra: without it the run is serial
    # in collection order, which tests/conftest.py makes longest files first (xdist's own
    # order, most tests first, hands out the few-but-long files last: a long tail)
    return ["-n", str(count), "--dist", "loadfile", "--no-loadscope-reorder"]


def temp_entries() -> set[str]:
    """The names in the temp folder, but pytest's own (``pytest-of-<user>``, which it prunes
    to its last three runs)."""
    try:
        names = os.listdir(tempfile.gettempdir())
    except OSError:
        return set()
    return {n for n in names if not n.startswith("pytest-of-")}


def left_behind(before: set[str], after: set[str], shown: int = 10) -> str | None:
    """A line naming what appeared in the temp folder during the run, or None: what the tests
    (or the servers they start) left there, or what another process on the machine wrote
    meanwhile, so a line to read, not a failure."""
    new = sorted(after - before)
    if not new:
        return None
    more = f" and {len(new) - shown} more" if len(new) > shown else ""
    names = ", ".join(new[:shown])
    return f"tests: new in {tempfile.gettempdir()} since the run began: {names}{more}"


def main(argv: list[str]) -> int:
    before = temp_entries()
    with tempfile.TemporaryDirectory(prefix="pytest-ledger-") as tmp:
        path = Path(tmp) / "ledger"
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_LEDGER_OWNER"}
        env["PYTEST_LEDGER"] = str(path)
        # the suite starts hundreds of Python processes: without a bytecode cache each one
        # compiles codechunkd again, and each xdist worker re-rewrites every test module
        # (__pycache__ is ignored by git)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        parallel = parallel_args(argv, env)
        if parallel:
            print(f"tests: on {parallel[1]} pytest-xdist workers, a file each", flush=True)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "pytest_ledger",
                *parallel,
                # the slowest tests, for whoever keeps the suite within its minutes
                *([] if any(a.startswith("--durations") for a in argv) else ["--durations=15"]),
                *argv,
            ],
            env=env,
        )
        ledger = Ledger.read(path)
        code, line = verdict(ledger, proc.returncode)
    if ledger.cpu:
        # CPU-seconds hold on a busy machine, where wall times do not: what the suite costs
        print("\n".join(cpu_summary(ledger)))
    if left := left_behind(before, temp_entries()):
        print(left)
    print(line, flush=True)
    return code if code >= 0 else 1  # killed by a signal


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
