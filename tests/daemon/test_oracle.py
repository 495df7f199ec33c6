"""The oracle: after any sequence of git operations and edits, the incremental index
equals a from-scratch index of the same state (same (path, span, content hash) rows)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import Indexer, Repo

from codechunkd.config import load_settings
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.verify import verify

BODIES = [
    'def area(r):\n    """Area of a circle."""\n    return 3.14159 * r * r\n',
    "def greet(name):\n    return f'hello {name}'\n",
    "class Stack:\n    def push(self, x):\n        self.items.append(x)\n\n"
    "    def pop(self):\n        return self.items.pop()\n",
    "import os\n\nROOT = os.getcwd()\n",
    "# Notes\n\nSome words.\n\n## More\n\nOther words.\n",
    "func Add(a int, b int) int {\n\treturn a + b\n}\n",
    "",
]
NAMES = ["a.py", "b.py", "pkg/c.py", "pkg/d.md", "e.go", "f.txt"]

op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.sampled_from(BODIES)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("commit")),
    st.tuples(st.just("amend")),
    st.tuples(st.just("branch"), st.sampled_from(["main", "x", "y"])),
    st.tuples(st.just("reset_hard")),
    st.tuples(st.just("stash")),
    st.tuples(st.just("stash_pop")),
    st.tuples(st.just("ignore"), st.sampled_from(NAMES)),
    st.tuples(st.just("unignore")),
    st.tuples(st.just("chmod"), st.sampled_from(NAMES)),
    st.tuples(st.just("symlink"), st.sampled_from(NAMES)),
    st.tuples(st.just("detach")),
    st.tuples(st.just("orphan")),
)


def _try(repo: Repo, *args: str) -> None:
    """Git operations that may legitimately refuse (nothing to commit, conflicts...)."""
    with contextlib.suppress(subprocess.CalledProcessError):
        repo.git(*args)


def apply(repo: Repo, step: tuple[str, ...]) -> None:
    kind, *args = step
    p = repo.path
    if kind == "write":
        target = p / args[0]
        if target.is_symlink() or target.is_dir():
            return
        repo.write(args[0], args[1])
    elif kind == "delete":
        if (p / args[0]).is_file() or (p / args[0]).is_symlink():
            (p / args[0]).unlink()
    elif kind == "rename":
        src, dst = p / args[0], p / args[1]
        if src.is_file() and not dst.exists() and src != dst:
            dst.parent.mkdir(parents=True, exist_ok=True)
            src.rename(dst)
    elif kind == "commit":
        _try(repo, "add", "-A")
        _try(repo, "commit", "-q", "-m", "c")
    elif kind == "amend":
        _try(repo, "add", "-A")
        _try(repo, "commit", "-q", "--amend", "-m", "amended")
    elif kind == "branch":
        _try(repo, "add", "-A")
        _try(repo, "commit", "-q", "-m", "before switch")
        if args[0] == "main":
            _try(repo, "checkout", "-q", "main")
        else:
            _try(repo, "checkout", "-q", "-B", args[0])
    elif kind == "reset_hard":
        _try(repo, "reset", "-q", "--hard", "HEAD~1")
    elif kind == "stash":
        _try(repo, "stash", "-q", "-u")
    elif kind == "stash_pop":
        _try(repo, "stash", "pop", "-q")
    elif kind == "ignore":
        (p / ".gitignore").write_text(args[0] + "\n")
    elif kind == "unignore":
        (p / ".gitignore").write_text("")
    elif kind == "chmod":
        if (p / args[0]).is_file() and not (p / args[0]).is_symlink():
            (p / args[0]).chmod(0o755)
    elif kind == "symlink":
        target = p / args[0]
        if not target.exists() and not target.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink("a.py", target)
    elif kind == "detach":
        _try(repo, "checkout", "-q", "--detach")
    elif kind == "orphan":
        _try(repo, "checkout", "-q", "--orphan", "lonely")


def check(ix: Indexer, repo: Repo) -> None:
    ix.sync(repo.path)
    report = verify(ix.syncer.settings, ix.store, GitSource(repo.path))
    assert report.ok, report.as_dict()


@pytest.mark.slow
@settings(
    max_examples=int(os.environ.get("ORACLE_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(op, min_size=1, max_size=12))
def test_incremental_equals_from_scratch(embedder, steps: list[tuple[str, ...]]) -> None:  # type: ignore[no-untyped-def]
    """After any sequence of edits, commits, checkouts and file moves, the incremental
    index verifies clean against the repository (the property-based oracle)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = Repo(root / "repo")
        repo.write("a.py", BODIES[0])
        repo.commit("first")
        settings_ = load_settings(env={}, overrides={"index.dir": str(root / "index")})
        ix = Indexer(settings_, embedder)
        try:
            check(ix, repo)
            for step in steps:
                apply(repo, step)
                check(ix, repo)
        finally:
            ix.close()


def test_force_updated_history_and_gc(repo: Repo, indexer: Indexer) -> None:
    """The indexed commit vanishes (rewritten and garbage-collected): a full reconcile fixes it."""
    repo.write("a.py", BODIES[0])
    repo.commit("one")
    repo.write("b.py", BODIES[1])
    repo.commit("two")
    check(indexer, repo)
    repo.git("reset", "-q", "--hard", "HEAD~1")
    repo.write("c.py", BODIES[2])
    repo.commit("rewritten")
    repo.git("reflog", "expire", "--expire=now", "--all")
    repo.git("gc", "-q", "--prune=now")
    check(indexer, repo)
    assert "b.py" not in {r["path"] for r in indexer.rows()}


def test_merge_rebase_cherry_pick(repo: Repo, indexer: Indexer) -> None:
    """The index verifies clean after a cherry-pick, a merge and a rebase."""
    repo.write("a.py", BODIES[0])
    repo.commit("base")
    repo.git("checkout", "-q", "-b", "topic")
    repo.write("b.py", BODIES[1])
    repo.commit("topic 1")
    repo.write("c.py", BODIES[2])
    topic2 = repo.commit("topic 2")
    repo.git("checkout", "-q", "main")
    repo.write("d.md", BODIES[4])
    repo.commit("main 1")
    check(indexer, repo)
    repo.git("cherry-pick", topic2)
    check(indexer, repo)
    repo.git("merge", "-q", "--no-edit", "topic")
    check(indexer, repo)
    repo.git("checkout", "-q", "topic")
    repo.git("rebase", "-q", "main")
    check(indexer, repo)


def test_file_to_directory_and_back(repo: Repo, indexer: Indexer) -> None:
    """A file replaced by a directory of the same name, then committed, verifies clean."""
    repo.write("x", "plain file\n")
    repo.commit()
    check(indexer, repo)
    repo.remove("x")
    repo.write("x/inner.py", BODIES[1])
    check(indexer, repo)
    repo.commit()
    check(indexer, repo)


def test_shallow_clone(repo: Repo, indexer: Indexer, tmp_path: Path) -> None:
    """A shallow clone (history cut at depth 1) indexes every file of its HEAD."""
    for i in range(3):
        repo.write(f"f{i}.py", BODIES[i])
        repo.commit(f"c{i}")
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{repo.path}", str(shallow)], check=True
    )
    clone = Repo.__new__(Repo)  # an existing repository: no `git init`
    clone.path = shallow
    check(indexer, clone)
    assert {r["path"] for r in indexer.rows()} == {"f0.py", "f1.py", "f2.py"}
