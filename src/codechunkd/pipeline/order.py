"""The order of a first index (and any large change): what people search for first.

Source before tests, documentation and examples, and vendored or generated code
(``order_rank``); within each group, the files of the most recent commits first.
Every change is ordered, whatever its size: a repository of 40 files is written in
this order too, and its vectors are filled in the same order (``pipeline/fill.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from codechunkd.git.changes import FileVersion, GitSource
from codechunkd.git.recency import recent_paths

RECENT_COMMITS = 100
"""Commits walked to order a first index by recency (one tree diff each)."""

_VENDORED = {"vendor", "vendored", "third_party", "third-party", "node_modules", "external"}
_DOCS = {"doc", "docs", "documentation", "examples", "example"}
_TESTS = {"test", "tests", "testing", "__tests__", "spec", "specs"}
_TEST_SUFFIXES = ("_test.py", "_test.go", ".test.js", ".test.ts", ".spec.js", ".spec.ts")
_DOC_SUFFIXES = (".md", ".rst", ".txt", ".adoc")


def order_rank(path: str) -> int:
    """0 source, 1 tests, 2 docs and examples, 3 vendored or generated."""
    parts = path.lower().split("/")
    name = parts[-1]
    dirs = set(parts[:-1])
    if dirs & _VENDORED or name.endswith((".min.js", ".min.css", ".lock")):
        return 3
    if dirs & _DOCS or name.endswith(_DOC_SUFFIXES) or any(d.startswith(".") for d in dirs):
        return 2  # dot folders (.github, .devcontainer) hold no code people search for
    if dirs & _TESTS or name.startswith("test_") or name.endswith(_TEST_SUFFIXES):
        return 1
    return 0


Rank = Callable[[str], tuple[int, int, str]]


def ranker(
    git: GitSource, commit: str | None, *, walk: bool = True, dirty: Collection[str] = ()
) -> Rank:
    """The sort key of a path: (group, commits since it last changed, path); uncommitted
    edits (``dirty``) are the most recent of all.

    ``walk=False`` skips the history walk (recency unknown: group, then path)."""
    age = recent_paths(git, commit, limit=RECENT_COMMITS) if walk and commit else {}
    age.update(dict.fromkeys(dirty, -1))
    never = RECENT_COMMITS + 1

    def rank(path: str) -> tuple[int, int, str]:
        return order_rank(path), age.get(path, never), path

    return rank


def ordered(versions: Sequence[FileVersion], rank: Rank) -> list[FileVersion]:
    """``versions`` in ``rank`` order."""
    return sorted(versions, key=lambda v: rank(v.path))
