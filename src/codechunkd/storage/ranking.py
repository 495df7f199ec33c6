"""The ranking stage after fusion: small named rules, each a factor on a hit's fused score.

``Searcher.search`` fuses the two retrievers' rankings, then asks :func:`adjust` for the
final scores of the candidates. Each rule has a name in :data:`RULES`; a search request
can switch rules off by name (``disable``) and opt-in ones on (``enable``), so a bench
measures each rule's worth alone (``bench/questions.py --ablate``). The rules here look at
a hit's path and at the other hits; the older rules that look at a chunk's kind and
language (glue code, prose) and at its symbol live in ``storage/search.py`` and are
switched by the same names.

- ``test_prior``: a chunk of a test file (``tests/``, ``test_*.py``, ``*_test.go``,
  ``*.spec.ts``, …) weighs :data:`TEST_WEIGHT` unless the query speaks of tests: a
  question about what the code does is answered by the code, not by the test that calls
  it.
- ``path_prior`` (opt-in): a chunk of code kept aside (examples, vendored, generated,
  compat, benchmarks) weighs :data:`ASIDE_WEIGHT` unless the query asks for it.
- ``file_coherence``: the best chunk of each file among the :data:`STRONG` best candidates
  gains :data:`COHERENCE` times the share of those candidates' scores that the file's
  other chunks hold, so a file that answers in several places comes before one that
  matches once, a little better.
- ``file_saturation``: in score order, each further chunk of a file already ranked weighs
  :data:`SATURATION` times the one before, so one file's many similar chunks give way to
  other files' best ones (the top 10 covers more files).
- ``stub`` (opt-in): a declaration that does not implement (:func:`is_stub`: an
  ``@overload``, an abstract method's ``raise NotImplementedError``, a signature with no
  body) weighs :data:`STUB_WEIGHT` when a candidate of the same name implements it, so
  "where is ``create_server`` implemented" finds the implementation before the interface
  whose docstring describes it.

With a reranking server configured (``rerank.*``), :func:`rerank` scores a hybrid search's
best candidates by its answer, and the rules above apply again on top of those scores.

Each rule but ``file_coherence`` (which adds at most :data:`COHERENCE`) multiplies scores by
factors of at most 1, and ties are broken by id: the same
query on the same index gives the same order.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codechunkd.llm.rerank import Reranker

RULES = (
    "glue",
    "prose",
    "file_vector",
    "symbol",
    "symbol_in_query",
    "test_prior",
    "path_prior",
    "file_coherence",
    "file_saturation",
    "stub",
    "questions",
)
"""The rules by name: ``glue``, ``prose``, ``questions``, ``symbol`` and ``symbol_in_query``
are the fusion's rules in ``storage/search.py``, ``file_vector`` its ranking of whole files
(``storage/file_vectors.py``); the others are this module's."""
OPT_IN = frozenset({"symbol_in_query", "path_prior", "file_vector", "stub"})
"""Rules a search runs only when asked (``enable``): each gained on the tune split but has
not yet shown a gain on held-out sets in more than one language without a loss on another
bench (``symbol_in_query`` moved held-out NDCG@10 by +0.003, within noise; ``path_prior``
has no held-out corpus with examples or vendored code; ``file_vector`` costs
bench/search_quality.py's code questions; ``stub`` gained +0.004 on tune, Python and
TypeScript, and +0.000 held-out). A rule earns its place by default with such a
gain: ``test_prior`` did on the held-out corpora that keep their tests (Go +0.045, Python
+0.032 NDCG@10, 21 wins and no loss), ``questions`` on the held-out corpora that keep their
docs (Flask, Python, +0.057; the npm CLI as published, JavaScript, +0.014; docs/operations.md,
Measured)."""
DEFAULT_RULES = frozenset(RULES) - OPT_IN


def active(disable: Collection[str] = (), enable: Collection[str] = ()) -> frozenset[str]:
    """The rules a search runs: the default ones but ``disable``, and ``enable``."""
    return (DEFAULT_RULES - frozenset(disable)) | frozenset(enable)


TEST_WEIGHT = 0.5
"""Factor on a test file's chunk when the query does not ask about tests."""
SATURATION = 0.5
"""Factor on each further chunk of a file, compounded: the second chunk of a file in the
ranking weighs 0.5, the third 0.25, …"""

_TEST_PATH = re.compile(
    r"(?:^|/)(?:tests?|testing|__tests__|spec|specs|testdata)/"
    r"|(?:^|/)test_[^/]*$|_tests?\.[^/]+$|\.(?:test|spec)\.[^/]+$|(?:^|/)conftest\.py$"
    r"|Tests?\.(?:java|kt|cs|scala)$",
)
_ASKS_FOR_TESTS = re.compile(
    r"\b(?:tests?|testing|tested|unittests?|spec|specs|fixtures?|mock\w*)\b", re.I
)


_ASIDE = re.compile(
    r"(?:^|/)(?:examples?|samples?|demos?|vendor|vendored|third_party|_vendor|node_modules"
    r"|compat|legacy|deprecated|generated|gen|benchmarks?)/"
    r"|(?:^|/)example_[^/]*$|_example\.[^/]+$|\.(?:pb|generated|gen)\.[^/]+$|\.min\.js$",
)
_ASIDE_WORDS = re.compile(
    r"\b(?:examples?|samples?|demos?|vendor\w*|compat\w*|legacy|deprecated|generated|benchmarks?)\b"
)
ASIDE_WEIGHT = 0.7
"""Factor on a chunk of code kept aside (examples, vendored, generated, compat, benchmarks)
when the query does not ask for it (``path_prior``, opt-in)."""


COHERENCE = 0.2
"""Weight of a file's other strong chunks' share, added to its best chunk's score
(``file_coherence``): a file several of whose chunks answer is likelier the answer."""
STRONG = 20
"""The candidates that count as strong for ``file_coherence``: the best this many."""


def path_weight(path: str, query: str) -> float:
    """The path prior of a chunk: re-export files (``__init__.py``, ``index.ts``, ``mod.rs``,
    ``.d.ts`` stubs) and code kept aside (examples, vendored, generated, compat, benchmarks)
    weigh less unless the (lower-cased) query asks for them."""
    if _ASIDE.search(path) and not _ASIDE_WORDS.search(query):
        return ASIDE_WEIGHT
    return 1.0


@functools.lru_cache(maxsize=1 << 16)
def is_test_path(path: str) -> bool:
    """Whether ``path`` is a test file: under a test folder or named as tests are (cached: a
    search asks it of every candidate, and paths repeat from search to search)."""
    return bool(_TEST_PATH.search(path))


def asks_for_tests(query: str) -> bool:
    """Whether a query speaks of tests, fixtures or mocks."""
    return bool(_ASKS_FOR_TESTS.search(query))


STUB_WEIGHT = 0.5
"""Factor on a declaration stub (``stub``) when a candidate of the same name implements it."""
_FUNCTION_KINDS = frozenset({"function", "method"})
_OVERLOAD = re.compile(r"^[ \t]*@(?:\w+\.)?overload\b", re.M)  # typing.overload, t.overload
_PY_DOCSTRING = re.compile(
    r"""\A\s*[rRbBuUfF]*(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"[^"\n]*"|'[^'\n]*')"""
)
_PY_COMMENT = re.compile(r"#[^\n]*")
_PY_STUB_BODY = re.compile(
    r"(?:pass|\.\.\.|raise\s+NotImplementedError\b[^\n]*|return\s+NotImplemented)?"
)
_C_COMMENT = re.compile(r"/\*[\s\S]*?(?:\*/|\Z)|//[^\n]*")  # unclosed: to the end, in one pass
_GENERICS = re.compile(r"<[^()<>]*>")
_BRACE_LANGUAGES = frozenset(
    {"typescript", "tsx", "javascript", "java", "c_sharp", "kotlin", "rust", "scala", "swift"}
)


def is_stub(row: Mapping[str, Any]) -> bool:
    """Whether a function or method chunk (a row with ``kind``, ``language``, ``signature``
    and ``content``) declares without implementing.  In Python: an ``@overload``, or a body
    of only a docstring and ``pass``, ``...``, ``raise NotImplementedError`` or ``return
    NotImplemented``.  In a language with braces: a signature with no body (an overload, an
    abstract or interface method, a trait's declaration), but not an arrow function or a
    function assigned to a name."""
    if row.get("kind") not in _FUNCTION_KINDS:
        return False
    content = str(row.get("content", ""))
    language = row.get("language")
    if language == "python":
        if _OVERLOAD.search(content):
            return True
        signature = str(row.get("signature", ""))
        at = content.find(signature) if signature else -1
        if at < 0:
            return False
        _, colon, body = content[at + len(signature) :].partition(":")
        body = _PY_COMMENT.sub("", _PY_DOCSTRING.sub("", body, count=1)).strip()
        return bool(colon) and bool(_PY_STUB_BODY.fullmatch(body))
    if language in _BRACE_LANGUAGES:
        code = _C_COMMENT.sub("", content)
        head = _GENERICS.sub("", code.split("(", 1)[0])  # `<K, V = any>` is no assignment
        return "{" not in code and "=>" not in code and "=" not in head
    return False


def last_name(symbol: str) -> str:
    """A qualified name's last part: ``create_server`` of ``BaseEventLoop.create_server``,
    ``load`` of ``Store::load``."""
    return re.split(r"[.:]+", symbol)[-1]


def adjust(
    rows: Mapping[str, Mapping[str, Any]],
    scores: Mapping[str, float],
    query: str,
    rules: Collection[str] = DEFAULT_RULES,
) -> dict[str, float]:
    """The final scores of the candidates ``rows`` (id -> row with ``path``, ``source``),
    from their fused ``scores``, with this module's rules among ``rules``."""
    out = {rid: scores[rid] for rid in rows}
    if "test_prior" in rules and not asks_for_tests(query):
        for rid, row in rows.items():
            if is_test_path(row["path"]):
                out[rid] *= TEST_WEIGHT
    if "path_prior" in rules:
        asks = query.lower()
        for rid, row in rows.items():
            factor = path_weight(row["path"], asks)
            if factor != 1.0:
                out[rid] *= factor
    if "stub" in rules:
        stubs = {rid for rid, row in rows.items() if is_stub(row)}
        implemented = {
            last_name(str(row.get("symbol", "")))
            for rid, row in rows.items()
            if rid not in stubs and row.get("kind") in _FUNCTION_KINDS
        }
        for rid in stubs:
            if last_name(str(rows[rid].get("symbol", ""))) in implemented:
                out[rid] *= STUB_WEIGHT
    if "file_coherence" in rules:
        strong = ordered(out)[:STRONG]
        total = sum(out[rid] for rid in strong) or 1.0
        best: dict[tuple[str, str], str] = {}
        mass: dict[tuple[str, str], float] = {}
        for rid in strong:
            key = (rows[rid].get("source", ""), rows[rid]["path"])
            best.setdefault(key, rid)
            mass[key] = mass.get(key, 0.0) + out[rid]
        for key, rid in best.items():
            out[rid] += COHERENCE * (mass[key] - out[rid]) / total
    if "file_saturation" in rules:
        seen: dict[tuple[str, str], int] = {}
        for rid in ordered(out):
            row = rows[rid]
            key = (row.get("source", ""), row["path"])
            n = seen.get(key, 0)
            seen[key] = n + 1
            out[rid] *= SATURATION**n
    return out


def ordered(scores: Mapping[str, float]) -> list[str]:
    """Ids by score, best first, ties by id (a stable, repeatable order)."""
    return sorted(scores, key=lambda rid: (-scores[rid], rid))


RERANK_CHARS = 4000
"""Characters of each candidate sent to a reranker (its path, then its content): about the
512 tokens a cross-encoder reads; the rest would be cut by the server anyway."""


def rerank(
    reranker: Reranker,
    text: str,
    rows: Mapping[str, Mapping[str, Any]],
    final: dict[str, float],
    rules: Collection[str],
    notes: list[str] | None,
) -> dict[str, float]:
    """``final`` with the best ``reranker.depth`` candidates scored by the reranker instead:
    its relevance spread over [0.5, 1] (the least relevant sent still outranks what was not
    sent), the ranking rules applied again on top (:func:`adjust`: a test file and a
    file's further chunks lower), above every candidate not sent. When the reranker fails,
    ``final`` as it was, and why in ``notes``."""
    from codechunkd.llm.rerank import RerankError

    order = ordered(final)
    top = order[: reranker.depth]
    if not top:
        return final
    documents = [f"{rows[r]['path']}\n{rows[r]['content']}"[:RERANK_CHARS] for r in top]
    try:
        relevance = reranker.scores(text, documents)
    except RerankError as exc:
        if notes is not None:
            notes.append(f"ranked without the reranker: {exc}")
        return final
    lo, hi = min(relevance), max(relevance)
    base = {
        r: 0.5 + 0.5 * ((x - lo) / (hi - lo) if hi > lo else 1.0)
        for r, x in zip(top, relevance, strict=True)
    }
    adjusted = adjust({r: rows[r] for r in top}, base, text, rules)
    floor = max((final[r] for r in order[len(top) :]), default=0.0)
    return {**final, **{r: floor + x for r, x in adjusted.items()}}
