"""Fusion: the vector and full-text rankings blended into one score per chunk.

Scores are blended, not ranks: a candidate's fused score is :data:`VECTOR_WEIGHT` times
where its cosine sits between the vector ranking's worst and best (:func:`spread`) plus
:data:`TEXT_WEIGHT` times its BM25 score over the full-text ranking's best (:func:`shares`),
so how far ahead a hit is counts, not only its place.  ``storage/search.py`` then applies
the ranking rules to the fused scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

VECTOR_WEIGHT = 0.5
TEXT_WEIGHT = 0.5
"""Weights of the vector and the full-text score shares in the fused score (which is so at
most 1).  Blending scores replaced reciprocal rank fusion (k 60, text weight 1.2) in #29,
chosen on tune splits: bench/questions.py NDCG@10 0.814 -> 0.830, bench/search_quality.py
code R@5 0.682 -> 0.734 and doc 0.521 -> 0.584, bench/code_search.py hybrid R@5 Go 0.539 ->
0.657.  Shares over the best on both lists scored 0.834 on questions but put Go hybrid
(0.600) below text alone (0.630); min-max on both 0.829, z-scores 0.820, the raw cosine
0.812, a missing row given the list's lowest share 0.819; vector weight 0.4 or 0.6 scored
lower (docs/operations.md, Ranking).  Held out, once: questions 0.747 -> 0.766, code R@5 up
on all three search_quality splits."""


def vectorless_stand_in(text_rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ranking that holds each text hit without a vector (written text first, filled in
    later: ``storage/coverage.py``) at its place in ``text_rows``, and nothing else (the
    places of vectored hits are holes).

    Fused with the full text's shares, it gives such a chunk the vector share its text
    earned: fair to it (it is not pushed below every chunk with a vector), and the answer
    of an index with no vectors at all is the full-text answer."""
    return [row if row.get("embedding_model", "") is None else {"id": _HOLE} for row in text_rows]


_HOLE = "\0"
"""The id of a place held in ``vectorless_stand_in`` (no row has it: it is dropped)."""


Ranking = tuple[list[dict[str, Any]], list[float], float]
"""A retriever's rows in rank order, each row's score share (:func:`shares`), the weight."""


def shares(scores: Sequence[float]) -> list[float]:
    """Each score over the best of the list (the first row's share is 1): how close a row
    comes to the retriever's best answer, on one scale for both retrievers. A score at or
    below 0 (a cosine past 90 degrees) has no share."""
    best = max(scores, default=0.0)
    return [max(x, 0.0) / best if best > 0 else 0.0 for x in scores]


def spread(scores: Sequence[float]) -> list[float]:
    """Each score's place between the list's worst (0) and its best (1); all 1 when they
    are equal. The vector ranking's shares: this model's cosines crowd together (a weak
    match is not far below the best), so over the best alone a weak vector match would weigh
    nearly as much as a strong one, and a row missing from the list would lose more than the
    weakest row in it (Go code search: hybrid R@5 0.600 that way, 0.657 so)."""
    lo, hi = min(scores, default=0.0), max(scores, default=0.0)
    return [(x - lo) / (hi - lo) if hi > lo else 1.0 for x in scores]


def fuse(ranked: Sequence[Ranking]) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """Each row's weighted sum of its shares over ``ranked`` (a row missing from a ranking
    has no share of it; a place held in ``vectorless_stand_in`` is skipped), and the first
    row seen of each id."""
    scores: dict[str, float] = {}
    rows: dict[str, dict[str, Any]] = {}
    for retrieved, share, weight in ranked:
        for row, x in zip(retrieved, share, strict=True):
            if row["id"] == _HOLE:
                continue
            scores[row["id"]] = scores.get(row["id"], 0.0) + weight * x
            rows.setdefault(row["id"], row)
    return scores, rows
