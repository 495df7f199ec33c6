"""Docstring → function retrieval: codechunkd's chunks side by side with peers.

    .venv/bin/python bench/retrieval.py                 # ~300 queries from the Python stdlib
    .venv/bin/python bench/retrieval.py --queries 150   # quicker

For each function of the corpus whose docstring has a usable first sentence and
which fits the budget, the query is that first sentence.  Every function
docstring is removed from the indexed copy of the file (replaced by ``pass``
when it was the whole body).  Each chunker chunks the copies at the same
budget; a hit is a chunk that contains the whole function.  Three rankings:
dense (cosine of all-MiniLM-L6-v2 vectors, the project's embedder, 256-token
window), BM25, and hybrid (plain reciprocal-rank fusion, k=60).  Recall@1/5/10
and MRR are printed for all queries and for two random halves (seeded), so one
can see whether the ranking of the chunkers is stable.

codechunkd's dense side embeds ``embed_text`` (context header + content) and its
BM25 side indexes what its full-text index holds (``fts_text``: definition names,
context header, extractive summary, content); its rankings apply the search's
definitions-first weight (``kind_weight``: glue chunks' scores x0.8) in all three
modes.  The peers embed and index their chunk text, as they ship, ranked as is.
The ``codechunkd, head + tail vectors`` row measures a second vector for chunks
longer than the model's window (header + the text the first vector did not
read; a chunk scores the better of its two): the index keeps head-only vectors
unless this row wins.
``--seed`` picks another corpus (other files, other queries): seed 0 is where
the weight was chosen, seeds 1 and 2 are held out.  The ``codechunkd`` row ranks the leaf
chunks; ``codechunkd + class headers`` also ranks the synthetic class headers
(never a hit: they do not contain a whole method).  Embeddings are cached on disk
(``--cache``), so a second run only embeds what changed.

Peers (optional) as for bench/chunking.py: ``--peers /tmp/bench-peers``.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import re
import sqlite3
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tree_sitter import Node, Query, QueryCursor

from codechunkd.chunking.chunker import chunk
from codechunkd.chunking.languages import get_language, get_parser
from codechunkd.config.settings import ChunkingSettings, EmbeddingSettings
from codechunkd.embedding.embedder import make_embedder
from codechunkd.llm.summaries import extractive_summary
from codechunkd.storage.fulltext import fts_text
from codechunkd.storage.search import kind_weight

sys.path.insert(0, str(Path(__file__).parent))
from chunking import astchunk_chunker, line_chunker, llama_chunker

SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "tkinter", "turtledemo", "site-packages"}


@dataclass
class Doc:
    """One retrievable chunk of one chunker."""

    path: str
    start: int
    end: int
    dense_text: str
    sparse_text: str
    weight: float = 1.0
    """Factor on the chunk's fused score (codechunkd's definitions-first weight)."""
    tail_text: str = ""
    """A second text to embed (what the model's window cut off); the doc scores the max."""


@dataclass
class Target:
    query: str
    path: str
    start: int
    end: int


def nws(text: str) -> int:
    return sum(1 for ch in text if ch not in " \t\r\n\f\v")


def first_sentence(doc: str) -> str:
    text = " ".join(doc.strip().split())
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    sentence = m.group(1) if m else text
    return sentence if len(sentence.split()) >= 4 else ""


def docstring_node(fn: Node) -> Node | None:
    body = fn.child_by_field_name("body")
    if body is None or body.named_child_count == 0:
        return None
    first = body.named_children[0]
    if first.type == "expression_statement" and first.named_child_count:
        first = first.named_children[0]
    return first if first.type == "string" else None


def strip_docstrings(src: bytes) -> tuple[bytes, list[tuple[int, str]]]:
    """The file without function docstrings, and (function ordinal, first sentence)."""
    lang = get_language("python")
    tree = get_parser("python").parse(src)
    fns = QueryCursor(Query(lang, "(function_definition) @f")).captures(tree.root_node).get("f", [])
    fns.sort(key=lambda n: n.start_byte)
    edits: list[tuple[int, int, bytes]] = []
    found: list[tuple[int, str]] = []
    for i, fn in enumerate(fns):
        ds = docstring_node(fn)
        if ds is None:
            continue
        raw = (ds.text or b"").decode("utf-8", "replace").strip("rRbBuUfF")
        body = raw.strip("\"'")
        sentence = first_sentence(body)
        if sentence:
            found.append((i, sentence))
        stmt = ds if ds.parent is None or ds.parent.type != "expression_statement" else ds.parent
        fn_body = fn.child_by_field_name("body")
        only = fn_body is not None and fn_body.named_child_count == 1
        start, end = stmt.start_byte, stmt.end_byte
        if only:
            edits.append((start, end, b"pass"))
            continue
        line_start = src.rfind(b"\n", 0, start) + 1
        line_end = src.find(b"\n", end)
        line_end = len(src) if line_end < 0 else line_end + 1
        if not src[line_start:start].strip() and not src[end:line_end].strip():
            start, end = line_start, line_end  # the docstring's own lines go entirely
        edits.append((start, end, b""))
    out = bytearray(src)
    for a, b, rep in sorted(edits, reverse=True):
        out[a:b] = rep
    return bytes(out), found


def build_corpus(
    root: Path, n_queries: int, budget: int, seed: int
) -> tuple[list[tuple[str, bytes]], list[Target]]:
    files = [
        p
        for p in sorted(root.rglob("*.py"))
        if not (set(p.relative_to(root).parts) & SKIP_DIRS) and p.stat().st_size < 120_000
    ]
    random.Random(seed).shuffle(files)
    lang = get_language("python")
    corpus: list[tuple[str, bytes]] = []
    targets: list[Target] = []
    for p in files:
        if len(targets) >= n_queries:
            break
        src = p.read_bytes().decode("utf-8", "replace").encode()
        stripped, found = strip_docstrings(src)
        if not found:
            continue
        rel = str(p.relative_to(root))
        tree = get_parser("python").parse(stripped)
        fns = QueryCursor(Query(lang, "(function_definition) @f")).captures(tree.root_node)
        nodes = sorted(fns.get("f", []), key=lambda n: n.start_byte)
        for ordinal, sentence in found:
            if ordinal >= len(nodes):
                continue
            fn = nodes[ordinal]
            if nws((fn.text or b"").decode("utf-8", "replace")) > budget:
                continue
            targets.append(Target(sentence, rel, fn.start_byte, fn.end_byte))
        corpus.append((rel, stripped))
    return corpus, targets


# -- chunkers -> docs ----------------------------------------------------------------------


def codechunkd_docs(
    corpus: list[tuple[str, bytes]], budget: int, *, synthetic: bool = False, tails: bool = False
) -> list[Doc]:
    """Leaf chunks (what a search returns by default); ``synthetic`` adds the class headers,
    ``tails`` a second text for chunks longer than the window."""
    settings = ChunkingSettings(budget=budget)
    window = EmbeddingSettings().max_seq_length
    tok = None
    if tails:
        from tokenizers import Tokenizer

        from codechunkd.embedding.models import bundled_model_path

        tok = Tokenizer.from_file(str(bundled_model_path() / "tokenizer.json"))
        tok.no_truncation()
    docs = []
    for path, src in corpus:
        for c in chunk(path, src, settings, language="python"):
            if c.synthetic and not synthetic:
                continue
            start, end = (c.start_byte, c.end_byte) if not c.synthetic else (-1, -1)
            sparse = fts_text(c, extractive_summary(c))
            tail = ""
            if tok is not None and c.token_count > window:
                offsets = tok.encode(c.embed_text).offsets
                cut = offsets[window - 2][1]  # the window holds [CLS] + window-2 tokens + [SEP]
                tail = c.header + " (continued)\n" + c.embed_text[cut:].lstrip()
            docs.append(Doc(path, start, end, c.embed_text, sparse, kind_weight(c.kind), tail))
    return docs


def peer_docs(
    fn: Callable[[str, bytes, str], Sequence[object]], corpus: list[tuple[str, bytes]]
) -> list[Doc]:
    docs = []
    line_starts: dict[str, list[int]] = {}
    for path, src in corpus:
        try:
            spans = fn(path, src, "python")
        except Exception as exc:  # a peer that fails on a file returns nothing for it
            print(f"    {path}: {exc}")
            continue
        for s in spans:
            start, end, text = s.start, s.end, s.text  # type: ignore[attr-defined]
            lines = getattr(s, "lines", None)
            if start < 0 and lines is not None:
                ls = line_starts.setdefault(
                    path, [0] + [i + 1 for i, b in enumerate(src) if b == 10] + [len(src)]
                )
                start = ls[min(lines[0] - 1, len(ls) - 1)]
                end = ls[min(lines[1], len(ls) - 1)]
            docs.append(Doc(path, start, end, text, text))
    return docs


# -- ranking -------------------------------------------------------------------------------

_TOKEN = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


class BM25:
    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(tokens(t)) for t in texts]
        self.lens = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avg = float(self.lens.mean()) if len(self.docs) else 1.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.post: dict[str, list[tuple[int, int]]] = {}
        for i, d in enumerate(self.docs):
            for t, f in d.items():
                self.post.setdefault(t, []).append((i, f))
        self.k1, self.b = k1, b

    def scores(self, query: str) -> np.ndarray:
        s = np.zeros(len(self.docs))
        for t in set(tokens(query)):
            idf = self.idf.get(t)
            if idf is None:
                continue
            for i, f in self.post[t]:
                norm = f + self.k1 * (1 - self.b + self.b * self.lens[i] / self.avg)
                s[i] += idf * f * (self.k1 + 1) / norm
        return s


class CachedEmbedder:
    """The project's embedder with an on-disk cache keyed by (model, text hash)."""

    def __init__(self, cache: Path) -> None:
        self.inner = make_embedder(EmbeddingSettings())
        self.db = sqlite3.connect(cache)
        self.db.execute("create table if not exists v (k text primary key, v blob)")
        self.seconds = 0.0
        self.computed = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(f"{self.inner.model_id}\0{t}".encode()).hexdigest() for t in texts]
        have: dict[str, np.ndarray] = {}
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            marks = ",".join("?" * len(part))
            q = f"select k, v from v where k in ({marks})"  # noqa: S608 - placeholders only
            for k, v in self.db.execute(q, part):
                have[k] = np.frombuffer(v, dtype=np.float32)
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in have}.items())
        for i in range(0, len(missing), 256):
            batch = missing[i : i + 256]
            t0 = time.perf_counter()
            vecs = self.inner.embed([t for _, t in batch])
            self.seconds += time.perf_counter() - t0
            self.computed += len(batch)
            for (k, _), v in zip(batch, vecs, strict=True):
                have[k] = np.asarray(v, dtype=np.float32)
                self.db.execute("insert or replace into v values (?, ?)", (k, have[k].tobytes()))
            self.db.commit()
            print(f"    embedded {min(i + 256, len(missing))}/{len(missing)}", flush=True)
        return np.stack([have[k] for k in keys]) if keys else np.zeros((0, 384), np.float32)


def _peer_maker(
    fn: Callable[[str, bytes, str], Sequence[object]], corpus: list[tuple[str, bytes]]
) -> Callable[[], list[Doc]]:
    return lambda: peer_docs(fn, corpus)


def rrf(*rankings: np.ndarray, k: int = 60, weights: np.ndarray | None = None) -> np.ndarray:
    """Reciprocal rank fusion; ``weights`` scale each doc's fused score (as the search does)."""
    score = np.zeros(len(rankings[0]))
    for order in rankings:
        ranks = np.empty(len(order))
        ranks[order] = np.arange(1, len(order) + 1)
        score += 1.0 / (k + ranks)
    if weights is not None:
        score *= weights
    return np.argsort(-score, kind="stable")


def evaluate(
    docs: list[Doc], targets: list[Target], emb: CachedEmbedder, qvecs: np.ndarray
) -> dict[str, list[int]]:
    """Rank of the first relevant chunk per query (0 = none in the top 100), per method."""
    dvecs = emb.embed([d.dense_text for d in docs])
    tailed = [i for i, d in enumerate(docs) if d.tail_text]
    tvecs = emb.embed([docs[i].tail_text for i in tailed]) if tailed else None
    bm25 = BM25([d.sparse_text for d in docs])
    weights = np.array([d.weight for d in docs])
    by_path: dict[str, list[int]] = {}
    for i, d in enumerate(docs):
        by_path.setdefault(d.path, []).append(i)
    out: dict[str, list[int]] = {"dense": [], "bm25": [], "hybrid": []}
    for qi, t in enumerate(targets):
        relevant = {
            i for i in by_path.get(t.path, []) if docs[i].start <= t.start and t.end <= docs[i].end
        }
        sims = dvecs @ qvecs[qi]
        if tvecs is not None:
            sims[tailed] = np.maximum(sims[tailed], tvecs @ qvecs[qi])
        dense = np.argsort(-sims, kind="stable")
        sparse = np.argsort(-bm25.scores(t.query), kind="stable")
        both = rrf(dense, sparse, weights=weights)
        # one ranking through weighted RRF: the search's score in that mode (all-1 weights,
        # the peers', keep the order)
        dense, sparse = rrf(dense, weights=weights), rrf(sparse, weights=weights)
        for name, order in (("dense", dense), ("bm25", sparse), ("hybrid", both)):
            rank = 0
            for r, i in enumerate(order[:100], start=1):
                if int(i) in relevant:
                    rank = r
                    break
            out[name].append(rank)
    return out


def metrics(ranks: Sequence[int]) -> tuple[float, float, float, float]:
    n = max(1, len(ranks))
    r1 = sum(1 for r in ranks if 0 < r <= 1) / n
    r5 = sum(1 for r in ranks if 0 < r <= 5) / n
    r10 = sum(1 for r in ranks if 0 < r <= 10) / n
    mrr = sum(1 / r for r in ranks if r > 0) / n
    return r1, r5, r10, mrr


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--budget", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peers", default="/tmp/bench-peers")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/codechunkd-bench-vectors.sqlite"))
    ap.add_argument("--only", action="append")
    args = ap.parse_args(argv)
    if args.peers and Path(args.peers).is_dir():
        sys.path.append(args.peers)
    corpus, targets = build_corpus(args.root, args.queries, args.budget, args.seed)
    size = sum(len(s) for _, s in corpus)
    print(f"corpus: {len(corpus)} files ({size / 1e6:.2f} MB), {len(targets)} queries")
    emb = CachedEmbedder(args.cache)
    qvecs = emb.embed([t.query for t in targets])
    chunkers: list[tuple[str, Callable[[], list[Doc]] | None]] = [
        ("codechunkd", lambda: codechunkd_docs(corpus, args.budget)),
        (
            "codechunkd + class headers",
            lambda: codechunkd_docs(corpus, args.budget, synthetic=True),
        ),
        (
            "codechunkd, head + tail vectors",
            lambda: codechunkd_docs(corpus, args.budget, tails=True),
        ),
    ]
    for name, make in (
        ("astchunk", astchunk_chunker),
        ("llama-index CodeSplitter", llama_chunker),
        ("fixed lines", line_chunker),
    ):
        fn = make(args.budget)
        chunkers.append((name, _peer_maker(fn, corpus) if fn else None))
    half = list(range(len(targets)))
    random.Random(args.seed + 1).shuffle(half)
    halves = (set(half[: len(half) // 2]), set(half[len(half) // 2 :]))
    rows = []
    for name, make_docs in chunkers:
        if args.only and name not in args.only:
            continue
        if make_docs is None:
            print(f"{name}: not installed, skipped")
            continue
        docs = make_docs()
        tails = sum(1 for d in docs if d.tail_text)
        print(f"{name}: {len(docs)} chunks" + (f", {tails} with a tail vector" if tails else ""))
        ranks = evaluate(docs, targets, emb, qvecs)
        rows.append((name, len(docs), ranks))
    print(f"\n(embedded {emb.computed} new texts in {emb.seconds:.0f} s)\n")
    for method in ("dense", "bm25", "hybrid"):
        print(f"== {method}")
        print(
            f"{'chunker':31} {'chunks':>7} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6}"
            f"   {'half A R@5/MRR':>15} {'half B R@5/MRR':>15}"
        )
        for name, n, ranks in rows:
            r = ranks[method]
            r1, r5, r10, mrr = metrics(r)
            a = metrics([r[i] for i in sorted(halves[0])])
            b = metrics([r[i] for i in sorted(halves[1])])
            print(
                f"{name:31} {n:7d} {r1:6.3f} {r5:6.3f} {r10:6.3f} {mrr:6.3f}"
                f"   {a[1]:7.3f}/{a[3]:.3f} {b[1]:7.3f}/{b[3]:.3f}"
            )
        print()


if __name__ == "__main__":
    main()
