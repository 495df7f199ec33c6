"""Reading the index: hybrid search (vectors + full text, fused), filters, context.

Readers never take the writer lock; their handles use strong read consistency
(``read_consistency_interval=0``) so each query sees the latest commit, and a
commit replaces a file's rows atomically, so no query sees a file half-updated.

Fusion (``storage/fusion.py``) blends the two retrievers' score shares into one score; then
a boost for chunks whose symbol the query names exactly (or by prefix): a query that names a
function finds it first.
Definitions come first: the fused score of code that is not a definition (module code, the
glue of a class body, later pieces of a split definition) is scaled by
:data:`GLUE_WEIGHT`, so such a chunk outranks a definition only when it is
clearly the better match (see :func:`kind_weight`).  Code comes before prose for a
code question: when a query starts as code questions do (:func:`asks_for_code`: "Parse …",
"Returns …", "Helper to …"), or is a question about it (:func:`asks_about_code`: "where is …",
"how does …", the ``questions`` rule), and does not ask for docs (:func:`wants_prose`), a docs
section's fused score is scaled by :data:`PROSE_WEIGHT`; other queries leave prose as it is
(docs/operations.md, "Ranking: code before the prose that describes it", and Measured).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from codechunkd.storage import ranking
from codechunkd.storage.file_vectors import FileVectors, file_terms
from codechunkd.storage.fulltext import code_words
from codechunkd.storage.fusion import (
    TEXT_WEIGHT,
    VECTOR_WEIGHT,
    Ranking,
    fuse,
    shares,
    spread,
    vectorless_stand_in,
)
from codechunkd.storage.globs import path_filter
from codechunkd.storage.rows import in_list, quote
from codechunkd.storage.symbols import (
    SYMBOL_IN_SENTENCE_BOOST,
    named_in_sentence,
    symbol_boosts,
)

if TYPE_CHECKING:
    from codechunkd.llm.rerank import Reranker
    from codechunkd.storage.lance_reader import ChunkReader

CANDIDATES = 100
"""Rows each retriever hands the fusion (at least 4 k).  A docs section that ranks in a
retriever's list pushes code down it, and a code chunk past the list's end loses that
retriever's share of its fused score; 100 rather than 50 kept code questions on the tune
split (0.799 R@5) and lifted doc ones 0.584 -> 0.589 (200: code 0.792); on the held-out
splits code 0.640 -> 0.647 and 0.561 -> 0.589, doc 0.692 -> 0.705 and 0.634 -> 0.661, for
~10% more search time (docs/operations.md, Measured)."""
GLUE_KINDS = frozenset({"module", "block"})
"""Chunk kinds that hold code around definitions rather than a definition."""
GLUE_WEIGHT = 0.8
"""Scale of a glue chunk's fused score.  Chosen on bench/retrieval.py's default corpus
(seed 0) and checked on two held-out corpora of other files (seeds 1, 2): it raised
codechunkd's dense, BM25 and hybrid Recall@5 and MRR on all three."""


PROSE_LANGUAGES = frozenset({"markdown", "rst", "text"})
"""Languages of documentation rather than code."""
PROSE_WEIGHT = 0.6
"""Scale of a prose chunk's fused score for a query that asks for code (:func:`asks_for_code`
and not :func:`wants_prose`); other queries leave prose as it is.  A fixed weight on every
query cost doc-seeking questions a third of their Recall@5 (0.7: doc 0.595 -> 0.395 on the
tune split), and rules that weigh only the hits (agreement of the retrievers, comparable
code strength, the share of prose at the top, a prose hit lifting the code it names) cost
them too; deciding from the query's first word lifted code questions 0.766 -> 0.788 and
left doc questions at 0.595 (bench/prose_rules.py, tune split; docs/operations.md,
Measured).  With the code tokenizer and rank fusion (text weight 1.2), 0.7 kept doc
questions at 0.584 (0.589 at 0.8, 0.584 at 0.75) and ranks the most code questions in the top
5 (0.796; 0.792 at 0.75, 0.785 at 0.8); with the text weight at 1.0 it cost doc questions
one (0.579).  On held-out it showed no gain (module docstring).  With score shares in place
of rank fusion (#29) a weight moves a hit further than a rank or two, and 0.6 ranks more
code questions in the top 5 than 0.7 (tune: 0.715 against 0.704; 0.5: 0.715) with doc
questions the same (0.563; 0.5: 0.558)."""
_CODE_VERB_WORDS = """
add allocate append apply assemble attach attempt bind build cache calculate call check
clear clone close collect combine compare compute connect construct consume convert copy
count create decode decrement decrypt define delete deny deregister describe deserialize
destroy detach detect determine disable disconnect display dispose drop dump emit
emulate enable encode encrypt ensure escape execute extract feed fetch fill filter find
format free gather generate get guess handle hash identify ignore implement increment
indicate infer init initialize insert iterate join list load lock log look lookup make
map mark match measure merge mock mount normalize open override pad parse patch peek
perform pop populate post prepare print process produce pull push put quote raise read
rebuild receive refresh register reject release remove render replace report represent
request reset resolve retry return rewrite run save schedule search select send
serialize set show sign simulate skip sort split start stop store strip stub take tell
test toggle transform translate trim truncate try unescape unlock unquote unregister
unwrap update validate verify wait wrap write yield
acquire adjust ask cancel change clean compile decide delegate divide expand fail flush
forward instruct invoke move retrieve round subtract swap turn unbind wake walk
"""
_CODE_VERBS = frozenset(_CODE_VERB_WORDS.split())
"""Verbs a code question (and a docstring's first sentence) starts with: "Parse …",
"Returns …".  Setup words (install, configure, migrate) are doc intent instead.  The last
two lines are the verbs that start at least 5 of the standard library's function docstrings
and none of the READMEs' section sentences (bench/query_kinds.py)."""
_CODE_OPENER_WORDS = """
called constructor convenience decorator deprecated dummy equivalent function helper
hook internal method private recursively same special true used whether
"""
_CODE_OPENERS = frozenset(_CODE_OPENER_WORDS.split())
"""Other first words of a docstring's first sentence ("Helper to …", "Called when …",
"Same as …", "True if …", "Internal …"): each starts at least 5 of the standard library's
function docstrings and none of the READMEs' section sentences (bench/query_kinds.py).
Exact forms only: "Methods that once were …" is a statement about methods."""
_DOCSTRING_FIELD = re.compile(
    r"(?:^|\s):(?:param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|yields?)"
    r"\b[^:\n]*:"
)
"""A docstring's field list (``:param name:``, ``:returns:``), which documentation does not
use: a query quoting one was copied from a docstring."""
_SUBJECT_NEXT_WORDS = """
is are was were be has have had can could will would may might must should does do did
also uses allows provides supports offers needs makes comes
"""
_SUBJECT_NEXT = frozenset(_SUBJECT_NEXT_WORDS.split())
"""Words that, right after the first word, make it a subject ("Requests uses …"), not a
verb."""
_DOC_INTENT = re.compile(
    r"\b(install\w*|configur\w*|set ?up|settings?|getting started|quick ?start|tutorials?|guides?"
    r"|docs?|documentation|readme|faq|changelog|release notes|migrat\w*|upgrad\w*|overview"
    r"|introduction|licen[cs]e|contribut\w*|how (do|can|should|to) )",
    re.IGNORECASE,
)


def kind_weight(kind: str) -> float:
    """The factor applied to the fused score of a chunk of ``kind``."""
    return GLUE_WEIGHT if kind in GLUE_KINDS else 1.0


def wants_prose(text: str, filters: Filters) -> bool:
    """Whether a query asks for documentation: it filters on docs (``--kind section``, a
    prose language) or speaks of installing, configuring, guides, "how do I…"."""
    if filters.kind == "section" or filters.language in PROSE_LANGUAGES:
        return True
    return bool(_DOC_INTENT.search(text))


def _verb_forms(word: str) -> set[str]:
    """The forms of ``word`` a verb in :data:`_CODE_VERBS` could have: base, -s, -es, -ies."""
    forms = {word}
    if word.endswith("ies"):
        forms.add(word[:-3] + "y")
    if word.endswith("es"):
        forms.add(word[:-2])
    if word.endswith("s"):
        forms.add(word[:-1])
    return forms


def _is_code_verb(word: str) -> bool:
    return bool(_verb_forms(word) & _CODE_VERBS)


def asks_for_code(text: str) -> bool:
    """Whether a query asks for code: it starts as a docstring's first sentence does, with a
    verb of what code does ("parse the header", "Returns the key …") that is not the subject
    of a statement ("Requests uses …", "Requests verifies …", how documentation speaks) or
    with another docstring opener ("Helper to …", "Called when …"), or it quotes a
    docstring's field list (``:param name:``).  Measured by bench/query_kinds.py: 72% of the
    standard library's function docstrings and 3% of the READMEs' section sentences; on the
    tune split 78% of code-seeking queries and 2% of doc-seeking ones."""
    words = re.findall(r"[a-z]+", text.lower())
    if not words:
        return False
    if words[0] in _CODE_OPENERS or _DOCSTRING_FIELD.search(text):
        return True
    if not _is_code_verb(words[0]):
        return False
    if len(words) > 1:
        second = words[1]
        if second in _SUBJECT_NEXT or (
            second.endswith("s") and words[0].endswith("s") and _is_code_verb(second)
        ):
            return False
    return True


_QUESTION = re.compile(r"\s*(?:where|which|what|how|when|why)\b", re.IGNORECASE)


def asks_about_code(text: str) -> bool:
    """Whether a query is a question about what the code does: it starts ``where``,
    ``which``, ``what``, ``how``, ``when`` or ``why`` (the ``questions`` rule; a question
    that asks for docs, "how do I …", is left to :func:`wants_prose`). Such questions came
    to docs sections before the code they describe: on a held-out Flask with its docs,
    NDCG@10 0.790 -> 0.846 with it (docs/operations.md, Measured)."""
    return bool(_QUESTION.match(text))


def hit_weight(row: dict[str, Any], prose_weight: float) -> float:
    """The factor on a chunk's fused score: glue code below definitions, prose by the query."""
    return prose_weight if row["language"] in PROSE_LANGUAGES else kind_weight(row["kind"])


class Mode(StrEnum):
    HYBRID = "hybrid"
    VECTOR = "vector"
    TEXT = "text"


@dataclass(frozen=True, slots=True, kw_only=True)
class Filters:
    repo: str | tuple[str, ...] | None = None
    """Repository root (exact), as shown by ``codechunkd status``, or several."""
    branch: str | None = None
    commit: str | None = None
    path: str | None = None
    """Glob on the path (``*``, ``?``, ``[…]``, ``[!…]``; ``*`` also matches ``/``)."""
    language: str | None = None
    kind: str | None = None
    source: str | None = None

    def where(self) -> str | None:
        parts = [in_list("repo", self.repo)] if isinstance(self.repo, tuple) else []
        for column, value in (
            ("repo", self.repo if isinstance(self.repo, str) else None),
            ("branch", self.branch),
            ("commit", self.commit),
            ("language", self.language),
            ("kind", self.kind),
            ("source", self.source),
        ):
            if value:
                parts.append(f"{column} = {quote(value)}")
        if self.path:
            parts.append(path_filter(self.path))
        return " AND ".join(parts) or None


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    """One search result."""

    id: str
    source: str
    repo: str
    branch: str
    commit: str | None
    blob: str
    path: str
    language: str
    kind: str
    symbol: str
    parent_id: str | None
    start_line: int
    end_line: int
    content: str
    summary: str
    signature: str
    dirty: bool
    score: float
    """Fused score (higher is better); comparable within one query only."""
    ids: tuple[str, ...] = ()
    """Row ids merged into this hit (adjacent chunks of the same definition)."""
    context: tuple[str, ...] = field(default_factory=tuple)
    """Signatures of the enclosing chunks, outermost first (``--context``)."""
    callers: tuple[dict[str, Any], ...] = ()
    """With ``--context``: the chunks that call what this hit defines (at most
    ``refquery.HIT_CALLERS``; ``symbol``, ``path``, ``line``, ``how``, ``id``), from the
    references table: resolved ones first, a ``by-name`` guess only when the name can mean
    nothing else."""
    stale: bool | None = None
    """True when the file on disk no longer matches the indexed blob (``--stale``)."""

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ids"] = list(self.ids)
        d["context"] = list(self.context)
        d["callers"] = [dict(c) for c in self.callers]
        return d


RESULT_COLUMNS = [
    f.name for f in fields(Hit) if f.name not in {"score", "ids", "context", "callers", "stale"}
]
"""The ``chunks`` columns a ``Hit`` carries (the rest is computed by the search)."""


def _rows_to_hits(rows: Sequence[dict[str, Any]], scores: dict[str, float]) -> list[Hit]:
    return [
        Hit(**{c: r[c] for c in RESULT_COLUMNS}, score=round(scores[r["id"]], 5), ids=(r["id"],))
        for r in rows
    ]


def _weigh(
    scores: dict[str, float], rows: dict[str, dict[str, Any]], prose: float, *, glue: bool
) -> None:
    """Scale each fused score by :func:`hit_weight` (``glue``: the glue rule is on; prose
    is scaled by ``prose`` either way)."""
    for rid, row in rows.items():
        scores[rid] *= hit_weight(row, prose) if glue or row["language"] in PROSE_LANGUAGES else 1.0


class Searcher:
    """Queries over one index; ``embed_query`` turns a query into a vector."""

    def __init__(self, store: ChunkReader) -> None:
        self.store = store
        self.files = FileVectors(store)

    def _vector(
        self, vector: npt.NDArray[np.float32], n: int, where: str | None
    ) -> list[dict[str, Any]]:
        return self.store.vector_search(vector, n, where, RESULT_COLUMNS)

    def _text(self, text: str, n: int, where: str | None) -> list[dict[str, Any]]:
        if not self.store.has_fts() or not text.strip():
            return []
        query = f"{text} {code_words(text)}"  # the words the index holds for identifiers
        return self.store.text_search(query, n, where, [*RESULT_COLUMNS, "embedding_model"])

    def search(
        self,
        text: str,
        vector: npt.NDArray[np.float32] | None,
        *,
        k: int = 10,
        filters: Filters | None = None,
        mode: Mode = Mode.HYBRID,
        merge: bool = True,
        headers: bool = False,
        disable: frozenset[str] = frozenset(),
        enable: frozenset[str] = frozenset(),
        reranker: Reranker | None = None,
        notes: list[str] | None = None,
        prefer: str | None = None,
    ) -> list[Hit]:
        """The best ``k`` hits; ``disable`` names ranking rules to switch off and ``enable``
        opt-in ones to switch on (``ranking.RULES``: a bench measures each one's worth so);
        ``prefer`` is the checkout the asker works in, whose copy of a chunk to give.
        A ``reranker`` orders a hybrid search's best candidates (``ranking.rerank``); when it fails,
        the search keeps its own order and says why in ``notes``."""
        rules = ranking.active(disable, enable)
        if not self.store.has_chunks():
            return []
        named = (filters or Filters()).where()
        where = named
        if not headers:  # synthetic class headers rank leaf chunks down (measured -0.02..0.04 R@5)
            where = "synthetic = false" + (f" AND {named}" if named else "")
        ranked = self._retrieve(text, vector, max(4 * k, CANDIDATES), where, mode)
        scores, rows = fuse(ranked)
        code_question = (
            asks_for_code(text) or ("questions" in rules and asks_about_code(text))
        ) and not wants_prose(text, filters or Filters())
        prose = PROSE_WEIGHT if code_question and "prose" in rules else 1.0
        _weigh(scores, rows, prose, glue="glue" in rules)
        self._boost(scores, rows, text, named, rules)
        missing = [rid for rid in scores if rid not in rows]
        for row in self.store.rows_by_id(missing, RESULT_COLUMNS):
            rows[row["id"]] = row
        candidates = {rid: rows[rid] for rid in scores if rid in rows}
        if "file_vector" in rules and vector is not None and mode is not Mode.TEXT:
            for rid, term in file_terms(candidates, scores, vector, self.files).items():
                scores[rid] += term
        final = ranking.adjust(candidates, scores, text, rules)
        if reranker is not None and mode is Mode.HYBRID:
            final = ranking.rerank(reranker, text, candidates, final, rules, notes)
        hits = _one_copy(_rows_to_hits([rows[r] for r in ranking.ordered(final)], final), prefer)
        if merge:
            hits = merge_adjacent(hits)
        return hits[:k]

    def _retrieve(
        self,
        text: str,
        vector: npt.NDArray[np.float32] | None,
        n: int,
        where: str | None,
        mode: Mode,
    ) -> list[Ranking]:
        """The rankings to fuse: the vector one, the full-text one and, in hybrid mode, the
        full text's stand-in for chunks without a vector yet."""
        ranked: list[Ranking] = []
        text_rows: list[list[dict[str, Any]]] = []
        failed: list[BaseException] = []

        def run_text() -> None:
            try:
                text_rows.append(self._text(text, n, where))
            except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread
                failed.append(exc)

        # the two queries run in parallel (LanceDB releases the GIL): hybrid costs max, not sum
        worker = (
            threading.Thread(target=run_text, name="fts-query") if mode is not Mode.VECTOR else None
        )
        if worker:
            worker.start()
        hybrid = mode is Mode.HYBRID and vector is not None
        if mode is not Mode.TEXT and vector is not None:
            found = self._vector(vector, n, where)
            cosines = [1.0 - r["_distance"] for r in found]
            ranked.append((found, spread(cosines), VECTOR_WEIGHT))
        if worker:
            worker.join()
            if failed:
                raise failed[0]
            for found in text_rows:
                share = shares([r["_score"] for r in found])
                ranked.append((found, share, TEXT_WEIGHT))
                if hybrid:  # a chunk without its vector yet takes its text share as its vector's
                    ranked.append((vectorless_stand_in(found), share, VECTOR_WEIGHT))
        return ranked

    def _boost(
        self,
        scores: dict[str, float],
        rows: dict[str, dict[str, Any]],
        text: str,
        named: str | None,
        rules: frozenset[str],
    ) -> None:
        """Add the symbol boosts to ``scores``: a chunk whose symbol the query names, and the
        definitions of the code names a sentence mentions (even ones neither ranking found)."""
        boosts = symbol_boosts(self.store, text, named) if "symbol" in rules else {}
        if "symbol_in_query" in rules:
            for rid, boost in named_in_sentence(self.store, text, named).items():
                boosts.setdefault(rid, boost)
        for rid, boost in boosts.items():  # a named class: its header
            if rid in rows or boost >= SYMBOL_IN_SENTENCE_BOOST:  # a definition neither found
                scores[rid] = scores.get(rid, 0.0) + boost

    # -- enrichments -----------------------------------------------------------

    def with_context(self, hits: Sequence[Hit]) -> list[Hit]:
        """Add the enclosing class/module signatures (from ``parent_id``) to each hit."""
        out = []
        for h in hits:
            chain: list[str] = []
            parent = h.parent_id
            seen: set[str] = set()
            while parent and parent not in seen and len(chain) < 5:
                seen.add(parent)
                rows = self.store.rows_by_id(
                    [parent], ["id", "parent_id", "signature", "symbol", "kind", "summary"]
                )
                if not rows:
                    break
                p = rows[0]
                label = _enclosing(p["kind"], p["symbol"], p["signature"], p["summary"])
                if label:
                    chain.append(label)
                parent = p["parent_id"]
            out.append(replace(h, context=tuple(reversed(chain))))
        return out


def _enclosing(kind: str, symbol: str, signature: str, summary: str | None) -> str:
    """How an enclosing chunk is named in a hit's context: its signature (``class Foo:``),
    else its kind and name; a module (no name: its path is the hit's) by its summary (the
    docstring's first line), or not at all."""
    if signature:
        return signature
    if symbol:
        return f"{kind} {symbol}"
    first = (summary or "").strip().split("\n", 1)[0]
    return f"{kind}: {first}" if kind == "module" and first else ""


def _one_copy(hits: Sequence[Hit], prefer: str | None = None) -> list[Hit]:
    """Each chunk once: the same lines of a file with the same content in several sources
    (a repository and its worktree, two clones, two branches of a mirror) are one answer,
    not two slots of the top ``k``: at the best-ranked copy's place, the copy in the
    checkout ``prefer`` (the one the asker works in, whose file to open) when there is one,
    else the best-ranked copy (on a tie, the first by id)."""
    chosen: dict[tuple[str, int, int, str], Hit] = {}
    for h in hits:
        key = (h.path, h.start_line, h.end_line, h.content)
        kept = chosen.get(key)
        if kept is None or (h.repo == prefer and kept.repo != prefer):
            chosen[key] = h
    return list(chosen.values())


def merge_adjacent(hits: Sequence[Hit]) -> list[Hit]:
    """Fold hits that are adjacent pieces of one definition into the best-ranked one."""
    out: list[Hit] = []
    for h in hits:
        for i, kept in enumerate(out):
            same = (
                kept.source == h.source
                and kept.path == h.path
                and kept.symbol
                and kept.symbol == h.symbol
                and kept.kind == h.kind
            )
            touching = h.start_line <= kept.end_line + 1 and kept.start_line <= h.end_line + 1
            if same and touching:
                first, second = (kept, h) if kept.start_line <= h.start_line else (h, kept)
                out[i] = replace(
                    kept,
                    start_line=first.start_line,
                    end_line=max(first.end_line, second.end_line),
                    content=first.content + "\n" + second.content,
                    ids=kept.ids + h.ids,
                )
                break
        else:
            out.append(h)
    return out


__all__ = ["Filters", "Hit", "Mode", "Searcher", "merge_adjacent"]
