"""scripts/run_tests.py, the test step of ``make test``: green only when every test ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def run_suite(tmp_path: Path, two: str) -> subprocess.CompletedProcess[str]:
    """The runner on a scratch suite of four tests whose second one does ``two``."""
    (tmp_path / "test_scratch.py").write_text(SUITE.format(two=two))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, str(RUNNER), "-q", "-p", "no:cacheprovider", "test_scratch.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_test_that_ends_the_process_fails_the_run_and_says_how_many_ran(
    tmp_path: Path,
) -> None:
    """pytest itself exits 0 here: the runner must not."""
    result = run_suite(tmp_path, "os._exit(0)")
    assert result.returncode != 0, result.stdout
    assert "INCOMPLETE: pytest stopped early (exit 0): 1 of 4 collected tests ran" in (
        result.stdout
    ), result.stdout


def test_a_complete_green_run_passes_and_says_so(tmp_path: Path) -> None:
    """Four tests that pass: exit 0, pytest's summary, and every collected test counted."""
    result = run_suite(tmp_path, "assert True")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout
    assert "tests: complete: 4 of 4 collected tests ran" in result.stdout


def test_a_failing_test_fails_the_run(tmp_path: Path) -> None:
    """pytest's own failure status comes through, with the counts."""
    result = run_suite(tmp_path, "assert False")
    assert result.returncode == 1, result.stdout
    assert "tests: FAILED (pytest exit 1): 4 of 4 collected tests ran" in result.stdout


def test_a_run_killed_by_a_signal_fails(tmp_path: Path) -> None:
    """A test process killed by SIGKILL fails the run as incomplete."""
    result = run_suite(tmp_path, "os.kill(os.getpid(), 9)")
    assert result.returncode != 0
    assert "1 of 4 collected tests ran" in result.stdout
