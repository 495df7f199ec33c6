"""Which paths changed recently: the order a first index takes them in.

A first index of a large repository takes minutes; search is useful sooner
when the files people work on now are indexed first.  Git history says which
those are: the paths touched by the last few commits.  Walking a bounded
number of commits keeps this cheap (one tree diff per commit) however long
the history is.
"""

from __future__ import annotations

import pygit2

from codechunkd.git.changes import GitSource


def recent_paths(git: GitSource, commit: str | None, *, limit: int = 100) -> dict[str, int]:
    """Path → how recently it changed (0: in ``commit`` itself), over ``limit`` commits.

    Paths the walk did not reach are absent.  Merge commits are diffed against
    their first parent.  Any git error ends the walk with what it found so far:
    the order is a preference, never a reason to fail a sync.
    """
    out: dict[str, int] = {}
    if commit is None:
        return out
    try:
        walker = git.repo.walk(
            pygit2.Oid(hex=commit), pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME
        )
        walker.simplify_first_parent()
        for age, c in enumerate(walker):
            if age >= limit:
                break
            parent = c.parents[0].tree if c.parents else None
            diff = (
                c.tree.diff_to_tree(parent, swap=True) if parent else c.tree.diff_to_tree(swap=True)
            )
            for delta in diff.deltas:
                out.setdefault(delta.new_file.path, age)
    except (pygit2.GitError, KeyError, ValueError):
        return out
    return out
