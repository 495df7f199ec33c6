"""What a new user reads from the CLI is right: a missing path, a path that is not a source,
a mistyped language, the daemon's lock, and truncated chunks each get a true, specific line
and a fitting exit code (#32)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codechunkd.cli import main
from codechunkd.config import Settings
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.lock import WriterLock
from tests.conftest import Repo

EXE = str(Path(sys.executable).parent / "codechunkd")


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


@pytest.mark.parametrize("command", ["index", "add", "run"])
def test_a_missing_path_is_said_not_to_exist(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``index``, ``add`` and ``run`` of a path that does not exist say so (exit 3), not
    "not inside a git repository", and create no index."""
    missing = tmp_path / "no" / "such-dir"
    index = tmp_path / "index"
    code, _, err = _main([command, str(missing), "--index-dir", str(index)], capsys)
    assert code == 3, err
    assert f"codechunkd: error: {missing} does not exist" in err
    assert "git repository" not in err
    assert not index.exists()


def test_run_on_a_folder_that_is_not_a_repository_fails_first_and_creates_nothing(
    tmp_path: Path,
) -> None:
    """``codechunkd run PATH`` on a folder outside any repository fails before it lowers its
    priority, opens the index or makes a directory: no index directory, no daemon start."""
    plain = tmp_path / "plain"
    plain.mkdir()
    index = tmp_path / "index"
    done = subprocess.run(
        [EXE, "run", str(plain), "--index-dir", str(index)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert f"not inside a git repository: {plain}" in done.stderr
    assert "daemon_started" not in done.stderr
    assert not index.exists()


@pytest.fixture
def indexed(repo: Repo, indexer: Any) -> Repo:
    """A repository with one function, indexed (the index at the ``index_dir`` fixture)."""
    repo.write("app.py", "def serve_requests():\n    return 'ok'\n")
    repo.commit("init")
    indexer.sync(repo.path)
    return repo


def test_status_of_a_path_in_no_source_says_so_and_lists_the_sources(
    indexed: Repo, index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``status PATH`` for a folder in none of the sources is an error (exit 2) naming the
    index's sources, not "nothing indexed yet"; a folder inside a source still works."""
    other = tmp_path / "elsewhere"
    other.mkdir()
    code, out, err = _main(["status", str(other), "--index-dir", str(index_dir)], capsys)
    assert code == 2, (out, err)
    assert f"{other} is in none of the sources of {index_dir}" in err
    assert f"\n  {indexed.path}" in err
    assert "nothing indexed" not in out + err
    code, out, _ = _main(["status", str(indexed.path), "--index-dir", str(index_dir)], capsys)
    assert code == 13  # stopped: no daemon, the source still printed
    assert str(indexed.path) in out


def test_status_without_a_daemon_says_which_files_are_not_indexed_and_why(
    repo: Repo, index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a one-off `codechunkd index`, `status` with no daemon counts the files recorded
    without chunks by reason (from state.json); a later index updates the count."""
    repo.write("app.py", "def serve_forever():\n    return 'first'\n")
    repo.write("package-lock.json", '{"name": "app", "lockfileVersion": 3, "packages": {}}\n')
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00binary")
    repo.commit("init")
    common = ["--index-dir", str(index_dir)]
    assert _main(["index", str(repo.path), *common], capsys)[0] == 0
    code, out, _ = _main(["status", *common], capsys)
    assert code == 13, out  # stopped: no daemon
    assert "not indexed: binary 1, lockfile 1" in out, out
    (repo.path / "package-lock.json").unlink()
    repo.commit("no lock file")
    assert _main(["index", str(repo.path), *common], capsys)[0] == 0
    _, out, _ = _main(["status", "--json", *common], capsys)
    (source,) = json.loads(out)["sources"]
    assert source["skipped"] == {"binary": 1} and source["files"] == 1, source


def test_index_says_which_files_are_not_indexed_though_this_run_read_none_of_them(
    repo: Repo, index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A later `codechunkd index` (a no-op, or one that reads only a changed file) still says
    which files of the index have no chunks and why: its own `skipped` counts only the files
    it read, so it used to print `skipped: none` with a lock file and a binary not indexed."""
    repo.write("app.py", "def serve_forever():\n    return 'first'\n")
    repo.write("package-lock.json", '{"name": "app", "lockfileVersion": 3, "packages": {}}\n')
    repo.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00binary")
    repo.commit("init")
    common = ["--index-dir", str(index_dir)]
    code, out, _ = _main(["index", str(repo.path), *common], capsys)
    assert code == 0 and "skipped: binary 1, lockfile 1" in out, out
    assert "all files of the index" not in out, out  # the run's own count says it all
    code, out, _ = _main(["index", str(repo.path), *common], capsys)  # the no-op fast path
    assert code == 0 and "skipped: none" in out, out
    assert "not indexed: binary 1, lockfile 1 (all files of the index)" in out, out
    repo.write("app.py", "def serve_forever():\n    return 'second'\n")
    repo.commit("change app.py")
    code, out, _ = _main(["index", str(repo.path), "--json", *common], capsys)
    report = json.loads(out)
    assert code == 0 and report["changed"] == 1 and report["skipped"] == {}, report
    assert report["not_indexed"] == {"binary": 1, "lockfile": 1}, report


def test_index_while_the_daemon_holds_the_index_exits_5_even_when_fresh(
    indexed: Repo, index_dir: Path, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``codechunkd index`` of an up-to-date source while ``codechunkd run`` holds the
    writer lock exits 5 naming the holder, as docs/operations.md says (it used to report
    "unchanged", exit 0, and exit 5 only when there was something to do)."""
    lock = WriterLock(IndexPaths.of(settings).lock, what="codechunkd run")
    lock.acquire()
    try:
        code, out, err = _main(["index", str(indexed.path), "--index-dir", str(index_dir)], capsys)
    finally:
        lock.release()
    assert code == 5, (out, err)
    assert "codechunkd run" in err and "unchanged" not in out
    code, out, _ = _main(["index", str(indexed.path), "--index-dir", str(index_dir)], capsys)
    assert code == 0 and "1 unchanged" in out  # with the lock free: the fast path


def test_an_unknown_language_is_an_error_with_a_guess(
    indexed: Repo, index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``search --lang pyhton`` is an error (exit 2) that guesses ``python`` and lists the
    known languages, instead of a silent "no results"."""
    argv = ["search", "serve requests", "--index-dir", str(index_dir), "--mode", "text"]
    code, out, err = _main([*argv, "--lang", "pyhton"], capsys)
    assert code == 2, (out, err)
    assert "unknown language 'pyhton' for --lang; did you mean 'python'?" in err
    assert "known: " in err and "markdown" in err and "typescript" in err
    code, out, err = _main([*argv, "--lang", "python"], capsys)
    assert code == 0 and "app.py" in out, (out, err)


def test_the_index_summary_counts_truncated_chunks(
    repo: Repo,
    index_dir: Path,
    embedder: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Chunks longer than the model's window are counted in the ``index`` summary."""
    body = "".join(f"    value_{i} = compute_{i}(alpha, beta, gamma)\n" for i in range(30))
    repo.write("long.py", f"def long_function(alpha, beta, gamma):\n{body}    return alpha\n")
    repo.write("short.py", "def short_function():\n    return 1\n")
    repo.commit("init")
    code, out, err = _main(["index", str(repo.path), "--index-dir", str(index_dir)], capsys)
    assert code == 0, err
    assert "truncated: 1 chunk longer than the model's window" in out, out


@pytest.mark.parametrize("value", ["99999", "-1", "http"])
def test_an_mcp_port_out_of_range_is_a_usage_error(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``codechunkd mcp --http --port 99999`` is refused by the parser (exit 2, one line that
    names the option) before a reader starts, not an ``OverflowError`` from ``bind``."""
    code, out, err = _main(
        ["mcp", "--http", "--port", value, "--index-dir", str(tmp_path / "index")], capsys
    )
    assert code == 2, err
    assert "argument --port:" in err
    assert value in err
    assert "OverflowError" not in err and not out


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "{loop}"],
        ["status", "--index-dir", "{loop}"],
        ["run", "{loop}"],
        ["remove", "{loop}"],
        ["search", "hello", "--index-dir", "{loop}"],
    ],
    ids=["status-path", "status-index-dir", "run", "remove", "search-index-dir"],
)
def test_a_symbolic_link_loop_is_one_line(
    tmp_path: Path, index_dir: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A path, or --index-dir, that is a link to itself: `cannot resolve …` (exit 2), not
    `unexpected: RuntimeError: Symlink loop`."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    args = [a.replace("{loop}", str(loop)) for a in argv]
    if "--index-dir" not in args:
        args += ["--index-dir", str(index_dir)]
    code, out, err = _main(args, capsys)
    assert code == 2, (out, err)
    assert f"cannot resolve {loop}" in err and "unexpected" not in err, err


def test_a_folder_at_the_control_sockets_path_is_one_line(
    repo: Repo, settings: Settings, index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory where the daemon's socket goes: `run` says so and what to do (exit 2),
    not `unexpected: [Errno 21] Is a directory`."""
    repo.write("a.py", "A = 1\n")
    repo.commit()
    sock = IndexPaths.of(settings).socket
    sock.mkdir(parents=True)
    code, out, err = _main(["run", str(repo.path), "--index-dir", str(index_dir)], capsys)
    assert code == 2, (out, err)
    assert f"cannot use {sock} for the control socket" in err and "unexpected" not in err, err
