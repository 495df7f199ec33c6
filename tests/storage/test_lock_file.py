"""The writer lock's file as readers and refused writers see it: a lock file that names no
process is no holder (never an unexpected error), and a refused ``codechunkd index`` names
the writer that holds the index, with the daemon's advice only when it is the daemon."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.conftest import Repo

from codechunkd.cli import main
from codechunkd.config import Settings
from codechunkd.daemon.control import daemon_pid
from codechunkd.errors import IndexLocked
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.lock import WriterLock, live_holder, read_holder

_HOLD = """
import sys
from pathlib import Path
from codechunkd.storage.lock import WriterLock

inner, outer, what = sys.argv[1:]
with WriterLock(Path(inner), what=what, outer=Path(outer) if outer else None):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes it
"""


@contextmanager
def _held_by_another_process(paths: IndexPaths, what: str, *, outer: bool) -> Iterator[int]:
    """A real process holding the index's writer lock (and the runtime one, when ``outer``),
    as ``what``; its pid."""
    argv = [str(paths.lock), str(paths.runtime_lock) if outer else "", what]
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            assert proc.stdout.readline() == "held\n"
            yield proc.pid
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


@pytest.fixture
def source(repo: Repo) -> Repo:
    repo.write("m.py", "X = 1\n")
    repo.commit()
    return repo


@pytest.mark.parametrize("outer", [True, False], ids=["both-locks", "writer.lock-only"])
def test_a_second_index_is_told_of_the_index_that_holds_it(
    source: Repo,
    index_dir: Path,
    settings: Settings,
    capsys: pytest.CaptureFixture[str],
    outer: bool,
) -> None:
    """Another ``codechunkd index`` holds the index: the refusal (exit 5) names it and its
    pid and says to wait, not that a running ``codechunkd run`` should be stopped.  Also
    when only ``writer.lock`` is held (an older codechunkd takes no runtime lock): the pid
    is the holder's, not the refused process's own."""
    paths = IndexPaths.of(settings)
    with _held_by_another_process(paths, "codechunkd index", outer=outer) as pid:
        code, out, err = _main(["index", str(source.path), "--index-dir", str(index_dir)], capsys)
    assert code == 5, (out, err)
    assert f"is being written by process {pid} (`codechunkd index`); wait for it" in err, err
    assert "codechunkd run" not in err and "stop it" not in err


def test_a_second_index_is_told_to_stop_the_daemon_that_holds_it(
    source: Repo, index_dir: Path, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """The daemon holds the index: the refusal says it keeps its sources fresh by itself."""
    paths = IndexPaths.of(settings)
    with _held_by_another_process(paths, "codechunkd run", outer=True) as pid:
        code, out, err = _main(["index", str(source.path), "--index-dir", str(index_dir)], capsys)
    assert code == 5, (out, err)
    assert f"is being written by process {pid}: a running `codechunkd run` keeps" in err, err
    assert "stop it to run `codechunkd index`" in err


@pytest.mark.parametrize(
    "content",
    [
        "99999999999999999999 codechunkd run\n",  # beyond any pid (os.kill overflows)
        "4294967296 codechunkd run\n",  # beyond pid_t
        "0 codechunkd run\n",  # 0 would signal our own process group
        "",
        "\xff\xfe garbage\n",
        "-1 codechunkd run\n",
    ],
)
def test_a_lock_file_that_names_no_process_has_no_holder(tmp_path: Path, content: str) -> None:
    """A pid no process can have (os.kill would overflow, or signal a group), an empty file
    or garbage: no holder, for ``read_holder`` and ``live_holder`` alike."""
    lock = tmp_path / "writer.lock"
    lock.write_text(content, errors="surrogateescape")
    assert read_holder(lock) is None
    assert live_holder(lock) is None


def test_a_folder_in_place_of_the_lock_file_has_no_holder(tmp_path: Path) -> None:
    """A folder at the lock's path opens but cannot be read: no holder, not ``EISDIR``."""
    lock = tmp_path / "writer.lock"
    lock.mkdir()
    assert read_holder(lock) is None
    assert live_holder(lock) is None


@pytest.mark.parametrize("damage", ["folder", "huge pid"])
def test_status_reads_past_a_damaged_writer_lock(
    index_dir: Path, settings: Settings, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """``status`` with a folder, or a pid no process can have, at ``writer.lock``: no daemon
    (exit 13, "stopped"), not "unexpected: [Errno 21]" or "unexpected: OverflowError"."""
    paths = IndexPaths.of(settings)
    paths.lock.parent.mkdir(parents=True)
    if damage == "folder":
        paths.lock.mkdir()
    else:
        paths.lock.write_text("99999999999999999999 codechunkd run\n")
    assert daemon_pid(paths) is None
    code, out, err = _main(["status", "--index-dir", str(index_dir)], capsys)
    assert code == 13, (out, err)
    assert "daemon: stopped" in out and "unexpected" not in err


def test_a_crashed_daemons_lock_naming_a_reused_pid_has_no_holder(
    index_dir: Path, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """A daemon killed by SIGKILL or the OOM killer leaves "<pid> codechunkd run" in its
    lock file; once that pid is another live process's (pid reuse), nobody holds the
    flock: no daemon (`status` exits 13 at once), not "stalled" after 2 s with every
    `search` waiting 60 s for it.  A lock that is held still names its holder."""
    paths = IndexPaths.of(settings)
    paths.lock.parent.mkdir(parents=True)
    with subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    ) as other:
        assert other.stdin is not None
        try:
            paths.lock.write_text(f"{other.pid} codechunkd run\n")
            assert read_holder(paths.lock) == (other.pid, "codechunkd run")
            assert live_holder(paths.lock) is None
            assert daemon_pid(paths) is None
            code, out, err = _main(["status", "--index-dir", str(index_dir)], capsys)
            assert code == 13, (out, err)
            assert "daemon: stopped" in out
        finally:
            other.stdin.close()
    with _held_by_another_process(paths, "codechunkd run", outer=False) as pid:
        assert live_holder(paths.lock) == (pid, "codechunkd run")
        assert daemon_pid(paths) == pid


def test_a_writer_retakes_its_deleted_index_while_no_other_gets_in(tmp_path: Path) -> None:
    """A deleted index directory: the holder sees it (``problem``), takes a new
    ``writer.lock`` in a new directory (``retake_index``) without letting go of the lock
    beside the socket, so a second writer is refused before, during and after."""
    index = tmp_path / "index"
    lock = WriterLock(index / "_codechunkd" / "writer.lock", outer=tmp_path / "run" / "x.lock")
    second = WriterLock(index / "_codechunkd" / "writer.lock", outer=tmp_path / "run" / "x.lock")
    with lock:
        assert lock.problem() is None
        shutil.rmtree(index)
        assert "was removed or replaced under this writer" in (lock.problem() or "")
        with pytest.raises(IndexLocked):
            second.acquire()
        assert not index.exists()  # a refused writer makes nothing
        lock.release_index()
        with pytest.raises(IndexLocked):
            second.acquire()
        lock.retake_index()
        assert lock.problem() is None and (index / "_codechunkd" / "writer.lock").is_file()
        assert read_holder(index / "_codechunkd" / "writer.lock") is not None
        with pytest.raises(IndexLocked):
            second.acquire()
    second.acquire()  # free once the holder lets go
    second.release()
