"""The repository map's PageRank (storage/repomap.py), computed over arrays, against the
textbook power iteration written out with dicts."""

from __future__ import annotations

import random

import pytest

from codechunkd.storage.repomap import pagerank


def _textbook(edges: dict[str, dict[str, float]], nodes: set[str]) -> dict[str, float]:
    n = len(nodes)
    rank = dict.fromkeys(nodes, 1.0 / n)
    out = {u: sum(vs.values()) for u, vs in edges.items()}
    for _ in range(40):
        dangling = sum(rank[u] for u in nodes if not out.get(u))
        nxt = dict.fromkeys(nodes, 0.15 / n + 0.85 * dangling / n)
        for u, vs in edges.items():
            for v, w in vs.items():
                nxt[v] += 0.85 * rank[u] * w / out[u]
        rank = nxt
    return rank


def test_pagerank_of_a_weighted_graph_with_dangling_files_is_the_textbook_one() -> None:
    """60 files, some that refer to nothing (dangling), weighted edges as ``by-name``
    answers make them: the same ranks to 1e-12, summing to 1."""
    rng = random.Random(7)
    nodes = {f"f{i}.py" for i in range(60)}
    edges: dict[str, dict[str, float]] = {}
    for u in sorted(nodes)[:45]:
        targets = rng.sample(sorted(nodes - {u}), rng.randint(1, 8))
        edges[u] = {v: rng.choice([1.0, 0.5, 0.5 / 3]) for v in targets}
    got = pagerank(edges, nodes)
    want = _textbook(edges, nodes)
    assert got.keys() == want.keys()
    assert all(got[u] == pytest.approx(want[u], rel=1e-12) for u in nodes)
    assert sum(got.values()) == pytest.approx(1.0)
    assert max(got, key=got.__getitem__) == max(want, key=want.__getitem__)
    assert pagerank({}, set()) == {}
