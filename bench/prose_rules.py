"""Rules that would rank code above prose for code questions, scored offline (#17).

    .venv/bin/python bench/search_quality.py --split tune --keep /tmp/sq/tune --only x
    .venv/bin/python bench/prose_rules.py --split tune --keep /tmp/sq/tune

Reads the index that ``search_quality.py --keep`` built, takes each query's vector and
full-text rankings once (``Searcher._vector``/``_text``, the product's own retrievers), then
fuses them as ``Searcher.search`` did in #17 (RRF, glue weight, ``merge_adjacent``) under each
candidate prose rule, for queries that do not ask for docs (``wants_prose``).  Prints R@5
of code-seeking and doc-seeking queries per rule; ``old`` is the ranking before #17 and
``query_verb w=0.7`` the rule ``Searcher.search`` keeps (``asks_for_code``,
``PROSE_WEIGHT``): the only one that lifted code questions and kept doc questions whole;
``verb_or_noun_phrase w=0.7`` adds a candidate signal for noun-phrase questions (an
attribute's docstring, "Content of the response, in bytes.") that did not hold on held-out
(:func:`is_noun_phrase`).  Tune on ``--split tune`` only.

``--fires`` lists, per query-side signal (``asks_for_code``, :func:`is_noun_phrase`), the
queries it fires on, code-seeking and doc-seeking, with the rank of the answer under
``query_verb`` and ``verb_or_noun_phrase`` (99: not in the first 10)::

    .venv/bin/python bench/prose_rules.py --split tune --keep /tmp/sq/tune --fires

``--fusion`` scores the fusion's own settings instead (:data:`FUSION`: RRF k, the text
ranking's weight, the prose weight): code questions with no filter and Python-filtered, doc
questions; with ``--code-search DIR`` (bench/code_search.py's ``--keep``) also hybrid, text
and vector on its Go, TypeScript and JavaScript queries, where hybrid must stay at or above
the better of the two::

    .venv/bin/python bench/code_search.py --keep /tmp/w17cs
    .venv/bin/python bench/prose_rules.py --split tune --keep /tmp/sq/tune --fusion \
        --code-search /tmp/w17cs

At today's settings the offline fusion gives exactly ``Index.search``'s figures (the
queries here name no symbol, so the symbol boosts it leaves out change nothing).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from codechunkd.config import load_settings
from codechunkd.embedding.embedder import make_embedder
from codechunkd.storage.search import (
    PROSE_LANGUAGES,
    PROSE_WEIGHT,
    Filters,
    Hit,
    Searcher,
    _rows_to_hits,
    asks_for_code,
    kind_weight,
    merge_adjacent,
    wants_prose,
)
from codechunkd.storage.store import IndexStore

sys.path.insert(0, str(Path(__file__).parent))
from search_quality import SPLITS, THIRD_PARTY, Query, build_repo

RRF_K = 60
TEXT_WEIGHT = 1.2
"""The rank fusion of #17 that this bench scores (RRF k, the text ranking's weight);
``Searcher.search`` has blended score shares since #29 (``storage/fusion.py``)."""

Rows = list[dict[str, Any]]
Rule = Callable[
    [dict[str, float], dict[str, dict[str, Any]], dict[str, list[int | None]], str], None
]
"""A rule rescales the fused ``scores`` of ``rows`` given their ``ranks`` and the query."""


def prose(row: dict[str, Any]) -> bool:
    return row["language"] in PROSE_LANGUAGES


def fuse(
    vrows: Rows,
    trows: Rows,
    text: str,
    rule: Rule,
    *,
    k: int = RRF_K,
    weights: tuple[float, float] = (1.0, TEXT_WEIGHT),
) -> list[Hit]:
    """``Searcher.search``'s fusion (less symbol boosts), with ``rule`` on the scores; ``k``
    and ``weights`` (vector, text) are the RRF constant and each ranking's weight."""
    scores: dict[str, float] = {}
    rows: dict[str, dict[str, Any]] = {}
    ranks: dict[str, list[int | None]] = {}
    for which, ranking in enumerate((vrows, trows)):
        for r, row in enumerate(ranking):
            scores[row["id"]] = scores.get(row["id"], 0.0) + weights[which] / (k + r + 1)
            rows.setdefault(row["id"], row)
            ranks.setdefault(row["id"], [None, None])[which] = r
    for rid, row in rows.items():
        if not prose(row):
            scores[rid] *= kind_weight(row["kind"])
    if not wants_prose(text, Filters()):
        rule(scores, rows, ranks, text)
    order = sorted(scores, key=lambda r: -scores[r])
    return merge_adjacent(_rows_to_hits([rows[r] for r in order], scores))[:10]


def _scale_prose(scores: dict[str, float], rows: dict[str, dict[str, Any]], w: float) -> None:
    for rid, row in rows.items():
        if prose(row):
            scores[rid] *= w


def old(scores: dict[str, float], rows: dict[str, Any], ranks: dict[str, Any], text: str) -> None:
    """The ranking before #17: no prose rule."""


def fixed(w: float) -> Rule:
    """Every prose hit scaled by ``w``."""
    return lambda scores, rows, ranks, text: _scale_prose(scores, rows, w)


def agreed(ranks: dict[str, list[int | None]], rid: str, top: int) -> bool:
    return all(r is not None and r < top for r in ranks[rid])


def agree_exempt(w: float, top: int) -> Rule:
    """Prose scaled by ``w`` unless both retrievers rank it in their first ``top``."""

    def rule(
        scores: dict[str, float], rows: dict[str, Any], ranks: dict[str, Any], text: str
    ) -> None:
        for rid, row in rows.items():
            if prose(row) and not agreed(ranks, rid, top):
                scores[rid] *= w

    return rule


def code_agree(w: float, top: int) -> Rule:
    """Prose that one retriever likes scaled by ``w``, only when both agree on some code."""

    def rule(
        scores: dict[str, float], rows: dict[str, Any], ranks: dict[str, Any], text: str
    ) -> None:
        if any(agreed(ranks, r, top) for r, row in rows.items() if not prose(row)):
            for rid, row in rows.items():
                if prose(row) and not agreed(ranks, rid, top):
                    scores[rid] *= w

    return rule


def comparable(w: float, c: float) -> Rule:
    """Prose scaled by ``w`` only when the best code hit's fused score is >= ``c`` x prose's."""

    def rule(
        scores: dict[str, float], rows: dict[str, Any], ranks: dict[str, Any], text: str
    ) -> None:
        code = max((s for r, s in scores.items() if not prose(rows[r])), default=0.0)
        best = max((s for r, s in scores.items() if prose(rows[r])), default=0.0)
        if code >= c * best:
            _scale_prose(scores, rows, w)

    return rule


def share(w: float, n: int, th: float) -> Rule:
    """Prose scaled by ``w`` when at most ``th`` of the first ``n`` fused hits are prose."""

    def rule(
        scores: dict[str, float], rows: dict[str, Any], ranks: dict[str, Any], text: str
    ) -> None:
        top = sorted(rows, key=lambda r: -scores[r])[:n]
        if sum(prose(rows[r]) for r in top) <= th * max(1, len(top)):
            _scale_prose(scores, rows, w)

    return rule


def query_verb(w: float) -> Rule:
    """Prose scaled by ``w`` when the query starts as code questions do (``asks_for_code``):
    the rule ``Searcher.search`` keeps (``PROSE_WEIGHT``)."""

    def rule(
        scores: dict[str, float], rows: dict[str, Any], ranks: dict[str, Any], text: str
    ) -> None:
        if asks_for_code(text):
            _scale_prose(scores, rows, w)

    return rule


def query_words(text: str) -> list[str]:
    """The lower-case words ``asks_for_code`` reads."""
    return re.findall(r"[a-z]+", text.lower())


_CLAUSE_WORD_LIST = """
am is are was were been has have had do does did can could will would shall should may might
must isn aren wasn weren doesn don didn won i we you they he she
"""
_CLAUSE_WORDS = frozenset(_CLAUSE_WORD_LIST.split())
"""Words that make a query a statement: a finite auxiliary or modal, a subject pronoun."""
_BEFORE_NOUN_WORDS = """
a an the this that these those its their all any each every no some of in on at to for from
by with into over upon than and or but
"""
_BEFORE_NOUN = frozenset(_BEFORE_NOUN_WORDS.split())
"""Words after which a word in -s is a plural noun ("in bytes"), not a verb ("algorithm
operates")."""
NOUN_PHRASE_WORDS = 10


def is_noun_phrase(words: Sequence[str]) -> bool:
    """The candidate noun-phrase signal: ``words`` are a short phrase with no finite verb, as
    an attribute's docstring is ("Content of the response, in bytes."): at most
    :data:`NOUN_PHRASE_WORDS` words, none of :data:`_CLAUSE_WORDS`, no word in -s (not -ss,
    -us, -is, longer than 3) right after a word not in :data:`_BEFORE_NOUN` ("The core
    algorithm operates …").  Not in ``asks_for_code``: on tune it lifted code questions
    0.796 -> 0.807 and kept doc ones at 0.584; on held-out it left code at 0.638 and cost doc
    questions one query (0.692 -> 0.686; search_quality.py --split held-out, run once)."""
    if not words or len(words) > NOUN_PHRASE_WORDS:
        return False
    for before, word in itertools.pairwise(words):
        plural_or_verb = (
            len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is"))
        )
        if plural_or_verb and before not in _BEFORE_NOUN:
            return False
    return not any(word in _CLAUSE_WORDS for word in words)


def verb_or_noun_phrase(w: float) -> Rule:
    """Prose scaled by ``w`` when ``asks_for_code`` or :func:`is_noun_phrase` fires."""

    def rule(
        scores: dict[str, float], rows: dict[str, Any], ranks: dict[str, Any], text: str
    ) -> None:
        if asks_for_code(text) or is_noun_phrase(query_words(text)):
            _scale_prose(scores, rows, w)

    return rule


_MARKED = re.compile(r"``([^`\n]+)``|`([^`\n]+)`|\b([A-Za-z_][\w.]*)\(")


def named_symbols(content: str) -> set[str]:
    """Identifiers a prose chunk marks as code: ``x``, `x`, :func:`a.x`, ``x(``; last part."""
    out = set()
    for m in _MARKED.finditer(content):
        span = next(g for g in m.groups() if g).strip().lstrip("~")
        for part in re.split(r"[\s(),=]+", span):
            last = re.split(r"[.:]+", part)[-1]
            if re.fullmatch(r"[A-Za-z_]\w*", last):
                out.add(last)
    return out


def link(top: int, per_prose: int) -> Rule:
    """Link-aware: a prose hit in the first ``top`` that names a symbol defined by a code
    candidate lifts that code (at most ``per_prose`` of it) to just above itself."""

    def rule(
        scores: dict[str, float], rows: dict[str, Any], ranks: dict[str, Any], text: str
    ) -> None:
        order = sorted(rows, key=lambda r: -scores[r])
        by_name: dict[str, list[str]] = {}
        for rid in order:
            if not prose(rows[rid]) and rows[rid]["symbol"]:
                by_name.setdefault(rows[rid]["symbol"].split(".")[-1], []).append(rid)
        lifted: set[str] = set()
        for p in (r for r in order[:top] if prose(rows[r])):
            code = [
                c for n in sorted(named_symbols(rows[p]["content"])) for c in by_name.get(n, [])
            ]
            for c in [c for c in code if c not in lifted and scores[c] < scores[p]][:per_prose]:
                scores[c] = scores[p] + 1e-6
                lifted.add(c)

    return rule


def rules() -> dict[str, Rule]:
    out: dict[str, Rule] = {"old": old}
    for w in (0.5, 0.7, 0.8, 0.9):
        out[f"fixed w={w}"] = fixed(w)
    for w in (0.5, 0.7, 0.8):
        for top in (1, 3, 5, 10):
            out[f"agree_exempt w={w} top={top}"] = agree_exempt(w, top)
            out[f"code_agree w={w} top={top}"] = code_agree(w, top)
        for c in (0.8, 0.9, 1.0):
            out[f"comparable w={w} c={c}"] = comparable(w, c)
        for n in (5, 10):
            for th in (0.2, 0.4):
                out[f"share w={w} n={n} th={th}"] = share(w, n, th)
    for top in (1, 3, 5):
        for per in (1, 2):
            out[f"link top={top} per={per}"] = link(top, per)
    for w in (0.5, 0.6, 0.7, 0.8, 0.9):
        out[f"query_verb w={w}"] = query_verb(w)
        out[f"verb_or_noun_phrase w={w}"] = verb_or_noun_phrase(w)
    return out


SIGNALS: dict[str, Callable[[str], bool]] = {
    "asks_for_code": asks_for_code,
    "is_noun_phrase": lambda text: is_noun_phrase(query_words(text)),
}
"""The query-side signals, by name (``--fires``): ``Searcher.search``'s and the candidate."""


def answer_rank(q: Query, v: Rows, t: Rows, rule: Rule) -> int:
    """The rank of ``q``'s answer in the fused first 10 under ``rule``; 99 when absent."""
    hits = fuse(v, t, q.text, rule)
    return next((i for i, h in enumerate(hits) if q.answered_by(h)), 99)


def fires(data: Sequence[tuple[Query, Rows, Rows]]) -> None:
    """Each of :data:`SIGNALS`: how many code- and doc-seeking queries it fires on, and each
    query (doc intent, ``wants_prose``, marked ``P``) with its answer's rank under
    ``query_verb`` and ``verb_or_noun_phrase`` at ``PROSE_WEIGHT``."""
    before, now = query_verb(PROSE_WEIGHT), verb_or_noun_phrase(PROSE_WEIGHT)
    total = {kind: sum(q.kind == kind for q, _, _ in data) for kind in ("code", "doc")}
    for name, signal in SIGNALS.items():
        hit = [(q, v, t) for q, v, t in data if signal(q.text)]
        counts = {kind: sum(q.kind == kind for q, _, _ in hit) for kind in total}
        print(
            f"\n{name}: code {counts['code']}/{total['code']}, doc {counts['doc']}/{total['doc']}"
        )
        for q, v, t in sorted(hit, key=lambda x: x[0].kind):
            mark = "P" if wants_prose(q.text, Filters()) else " "
            ranks = f"{answer_rank(q, v, t, before):2} -> {answer_rank(q, v, t, now):2}"
            print(f"  {q.kind:4} {mark} {ranks}  {q.text[:100]}")
    either = {
        kind: sum(q.kind == kind and any(f(q.text) for f in SIGNALS.values()) for q, _, _ in data)
        for kind in total
    }
    print(f"\neither: code {either['code']}/{total['code']}, doc {either['doc']}/{total['doc']}")


Ranked = tuple[Callable[[Hit], bool], str, Rows, Rows]
"""One query: whether a hit answers it, its text, its vector and full-text rankings."""


def rankings(
    searcher: Searcher,
    embedder: Any,
    asks: Sequence[tuple[Callable[[Hit], bool], str]],
    where: str = "synthetic = false",
) -> list[Ranked]:
    """Each query's two rankings, as ``Searcher.search`` takes them (50 rows each)."""
    vectors = embedder.embed([text for _, text in asks])
    return [
        (answered, text, searcher._vector(v, 50, where), searcher._text(text, 50, where))
        for (answered, text), v in zip(asks, vectors, strict=True)
    ]


def quality_queries(split: str, keep: Path, files: int, seed: int) -> list[Query]:
    """search_quality.py's queries of ``split``, pointed at the repositories kept in ``keep``."""
    queries: list[Query] = []
    with tempfile.TemporaryDirectory(prefix="prose-rules-") as tmp:
        for name in SPLITS[split]:
            for q in build_repo(THIRD_PARTY / name, Path(tmp) / name, files, seed):
                queries.append(dataclasses.replace(q, repo=str(keep / name)))
    return queries


def scored(
    data: Sequence[Ranked],
    rule: Rule,
    k: int,
    weights: tuple[float, float],
    mode: str = "hybrid",
) -> tuple[float, float, float]:
    """R@5, MRR@10 and R@1 of ``data`` fused with ``rule``, ``k``, ``weights``; ``mode``
    drops a ranking (``text``: no vector ranking; ``vector``: no text ranking)."""
    ranks = []
    for answered, text, v, t in data:
        hits = fuse(
            v if mode != "text" else [],
            t if mode != "vector" else [],
            text,
            rule,
            k=k,
            weights=weights,
        )
        ranks.append(next((i for i, h in enumerate(hits) if answered(h)), None))
    r5 = float(np.mean([r is not None and r < 5 for r in ranks]))
    mrr = float(np.mean([1 / (r + 1) if r is not None else 0.0 for r in ranks]))
    return r5, mrr, float(np.mean([r == 0 for r in ranks]))


FUSION = [
    (k, tw, pw)
    for k in (60, 30, 20, 10)
    for tw in (1.0, 1.1, 1.2, 1.3, 1.5)
    for pw in (0.8, 0.75, 0.7)
]
"""The fusion settings ``--fusion`` scores: (RRF k, text weight, prose weight)."""


def fusion_quality(data: dict[str, list[Ranked]]) -> None:
    """Every :data:`FUSION` setting on search_quality's queries: code (hybrid, no filter and
    language-filtered) and doc."""
    print(
        f"  {'k':>3} {'text':>4} {'prose':>5} | code R@5  MRR  | filtered R@5  MRR | doc R@5  MRR"
    )
    for k, tw, pw in FUSION:
        rule = query_verb(pw)
        c = scored(data["code"], rule, k, (1.0, tw))
        f = scored(data["filtered"], rule, k, (1.0, tw))
        d = scored(data["doc"], rule, k, (1.0, tw))
        print(
            f"  {k:3} {tw:4} {pw:5} |   {c[0]:.3f} {c[1]:.3f} |    {f[0]:.3f} {f[1]:.3f} |"
            f"  {d[0]:.3f} {d[1]:.3f}"
        )


def fusion_code(data: list[Ranked]) -> None:
    """Every (k, text weight) of :data:`FUSION` on code_search's queries (no prose there),
    hybrid against text and vector alone."""
    print(f"  {'k':>3} {'text':>4} | hybrid R@5  MRR   R@1 | text R@5  MRR   R@1 | vector R@5  MRR")
    for k, tw in sorted({(k, tw) for k, tw, _ in FUSION}, key=lambda x: (-x[0], x[1])):
        h, t, v = (scored(data, old, k, (1.0, tw), m) for m in ("hybrid", "text", "vector"))
        print(
            f"  {k:3} {tw:4} |   {h[0]:.3f} {h[1]:.3f} {h[2]:.3f} | {t[0]:.3f} {t[1]:.3f} "
            f"{t[2]:.3f} |   {v[0]:.3f} {v[1]:.3f}"
        )


def code_search_data(keep: Path, language: str, seed: int) -> list[Ranked]:
    """code_search.py's queries of ``language`` (its defaults), on the index it kept."""
    import random

    from code_search import CORPORA
    from code_search import build_repo as build_code_repo

    corpus = CORPORA[language]
    with tempfile.TemporaryDirectory(prefix="prose-rules-cs-") as tmp:
        queries = build_code_repo(corpus, Path(tmp) / "repo", corpus.files, seed)
    queries = random.Random(seed).sample(queries, min(300, len(queries)))
    index = keep / language / "index"
    settings = load_settings(env={}, overrides={"index.dir": str(index)})
    store = IndexStore(str(index))
    if not store.fts_current():
        raise SystemExit(f"{index}: full-text index not as FTS_CONFIG says; rerun code_search.py")
    asks = [(q.answered_by, q.text) for q in queries]
    return rankings(Searcher(store), make_embedder(settings.embedding), asks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--split", choices=sorted(SPLITS), default="tune")
    ap.add_argument("--keep", type=Path, required=True, help="search_quality.py's --keep dir")
    ap.add_argument("--files", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fusion", action="store_true", help="score the FUSION settings instead")
    ap.add_argument("--code-search", type=Path, help="code_search.py's --keep dir (--fusion)")
    ap.add_argument("--fires", action="store_true", help="list the queries each signal fires on")
    args = ap.parse_args()
    queries = quality_queries(args.split, args.keep, args.files, args.seed)
    settings = load_settings(env={}, overrides={"index.dir": str(args.keep / "index")})
    store = IndexStore(str(args.keep / "index"))
    if not store.fts_current():
        raise SystemExit("full-text index not as FTS_CONFIG says: rerun search_quality.py")
    searcher = Searcher(store)
    embedder = make_embedder(settings.embedding)
    print(
        f"split {args.split}: {sum(q.kind == 'code' for q in queries)} code-seeking, "
        f"{sum(q.kind == 'doc' for q in queries)} doc-seeking queries; R@5"
    )
    if args.fusion:
        by_kind = {
            kind: rankings(
                searcher, embedder, [(q.answered_by, q.text) for q in queries if q.kind == kind]
            )
            for kind in ("code", "doc")
        }
        by_kind["filtered"] = rankings(
            searcher,
            embedder,
            [(q.answered_by, q.text) for q in queries if q.kind == "code"],
            "synthetic = false AND language = 'python'",
        )
        fusion_quality(by_kind)
        for language in ("go", "typescript", "javascript") if args.code_search else ():
            print(f"\ncode_search {language}:")
            fusion_code(code_search_data(args.code_search, language, args.seed))
        return
    where = "synthetic = false"
    vectors = embedder.embed([q.text for q in queries])
    data = [
        (q, searcher._vector(v, 50, where), searcher._text(q.text, 50, where))
        for q, v in zip(queries, vectors, strict=True)
    ]
    if args.fires:
        fires(data)
        return
    for name, rule in rules().items():
        r5 = {}
        for kind in ("code", "doc"):
            hits_at = [
                next((i for i, h in enumerate(fuse(v, t, q.text, rule)) if q.answered_by(h)), 99)
                for q, v, t in data
                if q.kind == kind
            ]
            r5[kind] = float(np.mean([r < 5 for r in hits_at]))
        print(f"  {name:30} code {r5['code']:.3f}  doc {r5['doc']:.3f}")


if __name__ == "__main__":
    main()
