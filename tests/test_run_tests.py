"""scripts/run_tests.py, the test step of ``make test``: green only when every test ran.

The cases run in one process (``-p no:xdist``), and on two pytest-xdist workers (``-n 2``,
what ``make test`` does on a machine with two cores or more) where xdist changes the path:
there the controller keeps the ledger from the workers' reports, and a worker that dies
mid-test fails the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "scripts" / "run_tests.py"

SUITE = """
import os

def test_one():
    assert True

def test_two():
    {two}

def test_three():
    assert True

def test_four():
    assert True
"""

MODES = {"serial": ["-p", "no:xdist"], "xdist": ["-n", "2"], "default": []}


@pytest.fixture(params=["serial", "xdist"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run_suite(
    tmp_path: Path, two: str, mode: str, **environ: str
) -> subprocess.CompletedProcess[str]:
    """The runner on a scratch suite of four tests whose second one does ``two``."""
    (tmp_path / "test_suite.py").write_text(SUITE.format(two=two))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TEST_WORKERS"))}
    env.update(environ)
    return subprocess.run(
        [
            sys.executable,
            str(RUNNER),
            "-q",
            "-p",
            "no:cacheprovider",
            *MODES[mode],
            "test_suite.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_test_that_ends_the_process_fails_the_run_and_says_how_many_ran(
    tmp_path: Path, mode: str
) -> None:
    """pytest itself exits 0 here (in one process): the runner must not. On xdist the
    worker dies, a new one runs the rest, and the run still fails, naming the test."""
    result = run_suite(tmp_path, "os._exit(0)", mode)
    assert result.returncode != 0, result.stdout
    if mode == "serial":
        expected = "INCOMPLETE: pytest stopped early (exit 0): 1 of 4 collected tests ran"
    else:
        expected = (
            "INCOMPLETE: a test worker died running test_suite.py::test_two (exit 1): "
            "3 of 4 collected tests ran"
        )
    assert expected in result.stdout, result.stdout


def test_a_failing_test_fails_the_run(tmp_path: Path) -> None:
    """pytest's own failure status comes through, with the counts."""
    result = run_suite(tmp_path, "assert False", "serial")
    assert result.returncode == 1, result.stdout
    assert "tests: FAILED (pytest exit 1): 4 of 4 collected tests ran" in result.stdout


def test_a_run_killed_by_a_signal_fails(tmp_path: Path) -> None:
    """A test process killed by SIGKILL fails the run as incomplete (on xdist a killed
    worker is the crash above)."""
    result = run_suite(tmp_path, "os.kill(os.getpid(), 9)", "serial")
    assert result.returncode != 0
    assert "1 of 4 collected tests ran" in result.stdout


def test_a_complete_green_run_passes_and_says_so_on_every_core_or_on_one(
    tmp_path: Path,
) -> None:
    """Four tests that pass: exit 0, pytest's summary, and every collected test counted;
    with no arguments about it the runner uses every core (at most 4), and with
    ``TEST_WORKERS=1`` (or on one core) one process."""
    cores = len(os.sched_getaffinity(0))
    workers = min(cores, 4)
    for environ in ({}, {"TEST_WORKERS": "1"}):
        result = run_suite(tmp_path, "assert True", "default", **environ)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "4 passed" in result.stdout, result.stdout
        assert "tests: complete: 4 of 4 collected tests ran" in result.stdout, result.stdout
        parallel = cores >= 2 and not environ
        assert (f"tests: on {workers} pytest-xdist workers" in result.stdout) == parallel, (
            result.stdout
        )


def test_each_test_files_cpu_is_counted_with_its_children(tmp_path: Path, mode: str) -> None:
    """A test that burns CPU in a child process it waits for: the runner's summary counts
    at least that child's CPU-seconds for its file, in one process or on xdist (where the
    figure comes to the controller with the test's report)."""
    burn = (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', "
        "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.5: pass'], "
        "check=True)"
    )
    result = run_suite(tmp_path, burn, mode)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "the costliest files" in line)
    seconds, _, _, path = lines[start + 1].split()
    assert path == "test_suite.py" and float(seconds) >= 0.5, lines[start:]


def test_a_test_that_waits_is_counted_as_holding_a_worker_off_the_cores(
    tmp_path: Path, mode: str
) -> None:
    """A test that waits 0.5 s on an event nobody sets (what a test waiting on a timer of
    the code under test does): the summary counts at least that half second for its file
    as held but not on a core, in one process or on xdist."""
    result = run_suite(tmp_path, "import threading; threading.Event().wait(0.5)", mode)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "not on a core" in line)
    waited, _, held, _, _, path = lines[start + 1].split()
    assert path == "test_suite.py", lines[start:]
    assert float(held) >= float(waited) >= 0.5, lines[start:]


def test_what_the_tests_leave_in_the_temp_folder_is_named(tmp_path: Path) -> None:
    """A test that leaves a file in the temp folder: the run still passes, and its report
    names the file (servers the tests start can leave logs and sockets there)."""
    left = Path(tempfile.gettempdir()) / f"left-by-a-test-{uuid.uuid4().hex}"
    try:
        result = run_suite(tmp_path, f"open({str(left)!r}, 'w').close()", "serial")
        assert result.returncode == 0, result.stdout
        assert f"tests: new in {tempfile.gettempdir()} since the run began: " in result.stdout
        assert left.name in result.stdout, result.stdout
    finally:
        left.unlink(missing_ok=True)
