"""The watcher on real file events from real git repositories, on every backend that runs here.

The same suite runs on each backend (``BACKENDS``): ``inotify`` (the Linux default, its own
counted watches), ``native`` (watchdog's ``Observer`` through the code path macOS, Windows
and the BSDs take; on Linux watchdog's observer is its recursive inotify one, so the
portable mapping of events is what is exercised, not FSEvents itself) and ``polling``
(snapshots every 50 ms here; the last resort on any OS).  Tests about what only one backend
has (inotify's watch budget) say so.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from tests.conftest import Repo, scaled

from codechunkd.daemon.debounce import Level
from codechunkd.daemon.watcher import SYSCTL, Watcher
from codechunkd.daemon.watchers import make_watcher
from codechunkd.git.changes import GitSource


@dataclass(frozen=True)
class Sig:
    source: str
    paths: frozenset[str]
    level: Level
    urgent: bool


@dataclass
class Helper:
    """Owns a real Watcher; collects its signals; joins it on close."""

    backend: str = "inotify"
    signals: queue.Queue[Sig] = field(default_factory=queue.Queue)
    watcher: Watcher | None = None

    def sink(
        self,
        source: str,
        *,
        paths: Iterable[str] = (),
        level: Level = Level.PATHS,
        urgent: bool = False,
    ) -> None:
        self.signals.put(Sig(source, frozenset(paths), level, urgent))

    def start(self, max_watches: int = 0) -> Watcher:
        self.watcher = make_watcher(
            self.sink, backend=self.backend, max_watches=max_watches, poll_interval=POLL_S
        )
        self.watcher.start()
        return self.watcher

    def drain(self) -> None:
        while not self.signals.empty():
            self.signals.get_nowait()

    def expect(self, pred: Callable[[Sig], bool], timeout: float = 3.0) -> Sig:
        end = time.monotonic() + scaled(timeout)
        seen = []
        while time.monotonic() < end:
            try:
                s = self.signals.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                break
            seen.append(s)
            if pred(s):
                return s
        raise AssertionError(f"no matching signal within {timeout}s; saw {seen}")

    def expect_paths(self, *paths: str, timeout: float = 3.0) -> None:
        want = set(paths)
        end = time.monotonic() + scaled(timeout)
        while want and time.monotonic() < end:
            s = self.expect(lambda _s: True, timeout=max(0.01, end - time.monotonic()))
            want -= s.paths
        assert not want, f"never signalled: {want}"

    def quiet(self, seconds: float = 0.3) -> list[Sig]:
        """Signals that arrive within `seconds` (for asserting that none do)."""
        out = []
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return out
            try:
                out.append(self.signals.get(timeout=left))
            except queue.Empty:
                return out

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()

    def expect_each(self, *preds: Callable[[Sig], bool], timeout: float = 5.0) -> None:
        """Every predicate is met by some signal (in any order) within the deadline."""
        left = list(preds)
        end = time.monotonic() + scaled(timeout)
        while left and time.monotonic() < end:
            s = self.expect(lambda _s: True, timeout=max(0.01, end - time.monotonic()))
            left = [p for p in left if not p(s)]
        assert not left, f"{len(left)} condition(s) never met"


BACKENDS = ("inotify", "native", "polling")
POLL_S = 0.05


@pytest.fixture(params=BACKENDS)
def helper(request: pytest.FixtureRequest) -> Iterator[Helper]:
    if request.param == "native":
        # watchdog's recursive inotify observer (Linux only; FSEvents has no such watches)
        # warns when git's short-lived objects/tmp_objdir-* is re-watched; as an error it
        # would kill watchdog's reader thread (pytest's filters end with the test)
        warnings.filterwarnings("ignore", "Callback with id", RuntimeWarning)
    h = Helper(backend=request.param)
    yield h
    h.close()


@pytest.fixture
def inotify_helper() -> Iterator[Helper]:
    h = Helper(backend="inotify")
    yield h
    h.close()


def committed(repo: Repo) -> Repo:
    repo.write(".gitignore", "node_modules/\nbuild/\n*.log\n")
    repo.write("src/app.py", "def main():\n    return 1\n")
    repo.write("src/pkg/util.py", "X = 1\n")
    repo.write("docs/readme.md", "# Docs\n")
    repo.commit("init")
    return repo


def test_edits_new_files_deletes_and_renames_are_signalled(repo: Repo, helper: Helper) -> None:
    """Saves, new files, deletes and renames become path signals, relative to the tree."""
    committed(repo)
    git = GitSource(repo.path)
    helper.start().add(git.source)
    repo.write("src/app.py", "def main():\n    return 2\n")
    helper.expect_paths("src/app.py")
    repo.write("src/new.py", "Y = 2\n")
    helper.expect_paths("src/new.py")
    repo.remove("docs/readme.md")
    helper.expect_paths("docs/readme.md")
    os.rename(repo.path / "src/new.py", repo.path / "src/renamed.py")
    helper.expect_paths("src/new.py", "src/renamed.py")


def test_names_that_are_not_utf8_are_watched_and_signalled(repo: Repo, helper: Helper) -> None:
    """A committed directory and a new file whose names are not UTF-8 neither stop the start
    nor the watching: the later edits are signalled (git's ignore rules raised on such a
    name, which stopped the daemon at start, or ended the watcher's thread in silence)."""
    committed(repo)
    bad_dir = os.fsdecode(b"dir_\xfe")
    repo.write(f"{bad_dir}/x.py", "X = 1\n")
    repo.commit("a directory whose name is not UTF-8")
    helper.start().add(GitSource(repo.path).source)
    bad_file = os.fsdecode(b"bad_\xff.py")
    repo.write(bad_file, "Y = 1\n")
    helper.expect_paths(bad_file)
    repo.write(f"{bad_dir}/y.py", "Z = 1\n")
    repo.write("src/later.py", "Z = 2\n")
    helper.expect_paths(f"{bad_dir}/y.py", "src/later.py")


def test_an_event_whose_handling_raises_is_counted_and_answered_by_a_full_rehash(
    repo: Repo, helper: Helper
) -> None:
    """The backend's thread outlives an event whose handling raises (here the sink, once):
    the event is counted as failed, answered by an urgent full rehash, and later edits are
    signalled as before."""
    committed(repo)
    put = helper.sink
    failures = [RuntimeError("the queue refused it")]

    def sink(source: str, **kw: Any) -> None:
        if failures and kw.get("paths"):
            raise failures.pop()
        put(source, **kw)

    helper.sink = sink  # type: ignore[method-assign]
    sw = helper.start().add(GitSource(repo.path).source)
    with capture_logs() as logs:
        repo.write("src/app.py", "def main():\n    return 2\n")
        helper.expect(lambda s: s.level == Level.FULL and s.urgent)
    assert sw.failed == 1 and sw.health()["failed"] == 1
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["watch_event_failed"]
    repo.write("src/pkg/util.py", "X = 2\n")
    helper.expect_paths("src/pkg/util.py")


def test_editor_atomic_save_is_signalled(repo: Repo, helper: Helper) -> None:
    """Writing a temp file and renaming it over the target signals the target."""
    committed(repo)
    helper.start().add(GitSource(repo.path).source)
    tmp = repo.path / "src/.app.py.swp"
    tmp.write_text("def main():\n    return 3\n")
    os.replace(tmp, repo.path / "src/app.py")
    helper.expect_paths("src/app.py")


def test_ignored_trees_are_not_watched_and_their_events_dropped(repo: Repo, helper: Helper) -> None:
    """node_modules and build/ get no watch; an ignored file in a watched dir is dropped."""
    committed(repo)
    for i in range(20):
        (repo.path / f"node_modules/pkg{i}/lib").mkdir(parents=True)
    (repo.path / "build/out").mkdir(parents=True)
    w = helper.start()
    sw = w.add(GitSource(repo.path).source)
    tree_dirs = {"", "src", "src/pkg", "docs"}
    if helper.backend == "inotify":
        assert sw.watches < len(tree_dirs) + 12  # + the git dirs, never the 40+ ignored ones
    (repo.path / "node_modules/pkg3/lib/x.js").write_text("x")
    (repo.path / "build/out/a.o").write_text("x")
    (repo.path / "src/debug.log").write_text("x")
    assert [s for s in helper.quiet(0.4) if s.paths] == []
    assert sw.dropped >= 1  # src/debug.log: seen by every backend, dropped by the rules
    if helper.backend == "polling":
        assert sw.dropped == 1  # the ignored trees are not even scanned


def test_new_directory_is_watched_and_its_files_signalled(repo: Repo, helper: Helper) -> None:
    """A directory created (or moved in) with files already inside is watched and listed."""
    committed(repo)
    helper.start().add(GitSource(repo.path).source)
    staging = repo.path.parent / "staging"
    (staging / "inner").mkdir(parents=True)
    (staging / "inner/a.py").write_text("A = 1\n")
    (staging / "b.py").write_text("B = 1\n")
    os.rename(staging, repo.path / "src/moved")
    helper.expect_paths("src/moved/b.py", "src/moved/inner/a.py")
    (repo.path / "src/moved/inner/c.py").write_text("C = 1\n")
    helper.expect_paths("src/moved/inner/c.py")


def test_removed_directory_and_gitignore_change_ask_for_a_rescan(
    repo: Repo, helper: Helper
) -> None:
    """Events cannot describe a vanished tree or new ignore rules: a RESCAN is asked for."""
    committed(repo)
    helper.start().add(GitSource(repo.path).source)
    repo.git("rm", "-rq", "src/pkg")
    helper.expect(lambda s: s.level is Level.RESCAN)
    helper.drain()
    repo.write(".gitignore", "node_modules/\n")
    helper.expect(lambda s: s.level is Level.RESCAN)


def test_checkout_commit_and_branch_create_signal_head(repo: Repo, helper: Helper) -> None:
    """git renames HEAD.lock and refs/heads/x.lock into place: each is a HEAD signal."""
    committed(repo)
    helper.start().add(GitSource(repo.path).source)
    repo.git("checkout", "-q", "-b", "feature")
    helper.expect(lambda s: s.level is Level.HEAD)
    helper.drain()
    repo.write("src/app.py", "def main():\n    return 9\n")
    repo.commit("on feature")
    helper.expect(lambda s: s.level is Level.HEAD)
    helper.drain()
    repo.git("checkout", "-q", "main")
    helper.expect(lambda s: s.level is Level.HEAD)
    helper.drain()
    repo.git("pack-refs", "--all")
    helper.expect(lambda s: s.level is Level.HEAD)


def test_linked_worktree_head_is_watched(repo: Repo, helper: Helper, tmp_path: Path) -> None:
    """A linked worktree's HEAD lives in <main>/.git/worktrees/<name>/HEAD."""
    committed(repo)
    wt = tmp_path / "wt"
    repo.git("worktree", "add", "-q", "-b", "side", str(wt))
    git = GitSource(wt)
    helper.start().add(git.source)
    subprocess_git(wt, "checkout", "-q", "-b", "side2")
    sig = helper.expect(lambda s: s.level is Level.HEAD)
    assert git.source.id == sig.source
    (wt / "src/app.py").write_text("def main():\n    return 5\n")
    helper.expect_paths("src/app.py")


def subprocess_git(path: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)


def test_a_file_made_readable_again_is_signalled(repo: Repo, helper: Helper) -> None:
    """A change of mode alone (``chmod``: a file made readable again) is a path signal on
    every backend, so the file is read at once rather than at the next reconcile."""
    committed(repo)
    helper.start().add(GitSource(repo.path).source)
    (repo.path / "src/app.py").chmod(0o000)
    helper.expect_paths("src/app.py")
    helper.drain()
    (repo.path / "src/app.py").chmod(0o644)
    helper.expect_paths("src/app.py")


def test_watch_budget_short_is_degraded_with_a_warning(repo: Repo, inotify_helper: Helper) -> None:
    """inotify: past the budget nothing fails silently; a warning names the sysctl."""
    helper = inotify_helper
    committed(repo)
    for i in range(30):
        (repo.path / f"src/d{i}").mkdir()
    w = helper.start(max_watches=12)
    with capture_logs() as logs:
        sw = w.add(GitSource(repo.path).source)
    assert sw.degraded is not None
    assert SYSCTL in sw.degraded
    warning = next(e for e in logs if e["event"] == "inotify_watch_limit")
    assert (warning["log_level"], warning["sysctl"]) == ("warning", SYSCTL)
    repo.git("checkout", "-q", "-b", "other")  # the git dir is still watched
    helper.expect(lambda s: s.level is Level.HEAD)


def test_queue_overflow_asks_for_an_urgent_full_reconcile(repo: Repo, helper: Helper) -> None:
    """The kernel dropped events: every file must be rehashed, now."""
    committed(repo)
    sw = helper.start().add(GitSource(repo.path).source)
    sw.on_queue_overflow()
    sig = helper.expect(lambda s: s.level is Level.FULL)
    assert sig.urgent
    assert sw.health()["overflows"] == 1


def test_bare_mirror_ref_moves_are_signalled(repo: Repo, helper: Helper, tmp_path: Path) -> None:
    """A ref source (bare mirror, no working tree) is watched through its refs only."""
    committed(repo)
    mirror = tmp_path / "mirror.git"
    subprocess_git(tmp_path, "clone", "-q", "--bare", str(repo.path), str(mirror))
    git = GitSource(mirror, ref="main")
    sw = helper.start().add(git.source)
    assert sw.root is None
    repo.write("src/app.py", "def main():\n    return 7\n")
    repo.commit("pushed")
    repo.git("push", "-q", str(mirror), "main")
    sig = helper.expect(lambda s: s.level is Level.HEAD)
    assert sig.source == git.source.id


def test_checkout_storm_is_a_head_move_and_its_paths(repo: Repo, helper: Helper) -> None:
    """A checkout that removes 300 files: HEAD moved, and the tree change is seen too."""
    committed(repo)
    repo.git("checkout", "-q", "-b", "storm")
    for i in range(300):
        repo.write(f"storm/f{i}.py", f"X = {i}\n")
    repo.commit("storm")
    helper.start().add(GitSource(repo.path).source)
    repo.git("checkout", "-q", "main")
    helper.expect_each(
        lambda s: s.level is Level.HEAD,
        lambda s: s.level is Level.RESCAN or "storm/f299.py" in s.paths,
    )


def test_editor_save_in_a_subdir_drops_the_ignored_swap_file(repo: Repo, helper: Helper) -> None:
    """Renames inside the tree are the target's path, and a temp file's own name is dropped
    when git ignores it (editors' swap files usually are)."""
    committed(repo)
    repo.write(".gitignore", "node_modules/\nbuild/\n*.log\n*.swp\n")
    repo.commit("ignore swap files")
    sw = helper.start().add(GitSource(repo.path).source)
    tmp = repo.path / "src/pkg/.util.py.swp"
    tmp.write_text("X = 2\n")
    os.replace(tmp, repo.path / "src/pkg/util.py")
    helper.expect_paths("src/pkg/util.py")
    assert all(".util.py.swp" not in p for s in helper.quiet(0.3) for p in s.paths)
    assert sw.health()["backend"] == helper.backend


@pytest.mark.parametrize("backend", ["native", "polling"])
def test_observer_that_cannot_watch_is_degraded(repo: Repo, tmp_path: Path, backend: str) -> None:
    """A path the observer cannot schedule (a linked worktree whose directory went away)
    makes the source degraded, with why, instead of a crash or silence."""
    committed(repo)
    wt = tmp_path / "wt"
    repo.git("worktree", "add", "-q", "-b", "gone", str(wt))
    source = GitSource(wt).source
    shutil.rmtree(wt)
    h = Helper(backend=backend)
    try:
        with capture_logs() as logs:
            sw = h.start().add(source)
        assert sw.degraded is not None
        assert "could not watch" in sw.degraded
        assert str(wt) in sw.degraded
        assert any(e["event"] == "watch_failed" for e in logs)
    finally:
        h.close()
