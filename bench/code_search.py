"""Code search beyond Python: the product's text, vector and hybrid modes against a plain BM25.

    .venv/bin/python bench/code_search.py                       # go, typescript, javascript
    .venv/bin/python bench/code_search.py --language go --files 40
    .venv/bin/python bench/code_search.py --keep /tmp/cs        # reuse the indexes across runs

For each language, real code nobody on the team wrote is copied into a fresh git
repository with the doc comment of every documented function removed (its lines left
blank, so line numbers hold), indexed through the real pipeline (``Syncer``, default
settings; vectors cached in ``--cache``), and searched with ``Index.search(q, k=10,
mode=...)`` in text, vector and hybrid modes.  A query is the doc comment's first sentence
(Go's "Name does ..." without the name: the convention would hand the answer over); a hit
is a chunk of the answer's file holding its first line.

The baseline is a plain code-aware BM25 (k1=1.2, b=0.75) over the same chunks, read back
from the index (``content`` of the rows a search ranks): identifiers split at camelCase and
``_`` and kept whole, lowercased, no stemming, no stop words.  R@1, R@5 and MRR@10 with 95%
bootstrap intervals (1000 resamples of queries), every mode in one run.

Corpora (offline once fetched; the bench never downloads, it prints what to run):

- go: the Go 1.19 standard library (Debian's ``golang-1.19-src``), ``--go``
- typescript: RxJS 7.8.2's ``src/`` (npm), ``--typescript``
- javascript: the npm CLI as installed (``/usr/lib/node_modules/npm``), ``--javascript``
"""

from __future__ import annotations

import argparse
import math
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tree_sitter import Node

from codechunkd.chunking.languages import get_parser
from codechunkd.config import load_settings
from codechunkd.embedding.embedder import make_embedder
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.sync import Syncer
from codechunkd.storage.cache import EmbeddingCache
from codechunkd.storage.reader import Index
from codechunkd.storage.search import Hit, Mode
from codechunkd.storage.store import IndexStore

sys.path.insert(0, str(Path(__file__).parent))
from retrieval import first_sentence
from search_quality import ci, commit_corpus

CACHE = Path.home() / ".cache" / "codechunkd-bench" / "code"


@dataclass(frozen=True)
class Corpus:
    language: str
    """The chunker's language name (also the grammar's)."""
    root: Path
    suffixes: tuple[str, ...]
    skip: re.Pattern[str]
    """Relative paths left out (tests, fixtures, vendored and generated code)."""
    setup: tuple[str, ...]
    """The commands that fetch the corpus into ``root``."""
    files: int
    """Documented files taken (a seeded sample)."""


CORPORA = {
    "go": Corpus(
        "go",
        CACHE / "go" / "usr" / "share" / "go-1.19" / "src",
        (".go",),
        re.compile(r"(_test\.go$|(^|/)(testdata|vendor|cmd)/|^internal/|z\w+\.go$)"),
        (
            f"mkdir -p {CACHE} && cd {CACHE}",
            "apt-get download golang-1.19-src",
            "dpkg -x golang-1.19-src_*_all.deb go",
        ),
        40,
    ),
    "typescript": Corpus(
        "typescript",
        CACHE / "rxjs-7.8.2" / "package" / "src",
        (".ts",),
        re.compile(r"\.d\.ts$"),
        (
            f"mkdir -p {CACHE} && cd {CACHE}",
            "npm pack rxjs@7.8.2",
            "mkdir -p rxjs-7.8.2 && tar xzf rxjs-7.8.2.tgz -C rxjs-7.8.2",
        ),
        200,  # all of them
    ),
    "javascript": Corpus(
        "javascript",
        Path("/usr/lib/node_modules/npm"),
        (".js",),
        re.compile(r"(^|/)(tests?|docs?|bin|dist|umd|esm)/|\.min\.js$"),
        ("apt-get install -y npm   # the npm CLI, installed under /usr/lib/node_modules/npm",),
        40,
    ),
}


@dataclass(frozen=True)
class Query:
    text: str
    path: str
    line: int
    """The answer's first line (1-based)."""
    symbol: str

    def answered_by(self, hit: Hit | dict[str, Any]) -> bool:
        if isinstance(hit, Hit):
            path, start, end = hit.path, hit.start_line, hit.end_line
        else:
            path, start, end = hit["path"], int(hit["start_line"]), int(hit["end_line"])
        return bool(path == self.path and start <= self.line <= end)


# -- the answers: documented functions, their doc comments removed ---------------------------

GO_DEFS = {"function_declaration", "method_declaration"}
JS_DEFS = {"function_declaration", "generator_function_declaration", "method_definition"}
JS_DECLS = {"lexical_declaration", "variable_declaration"}
JS_FUNCTIONS = {"arrow_function", "function_expression", "function", "generator_function"}


def _name(node: Node) -> str | None:
    """The name of a function definition (or of a declaration binding a function)."""
    if node.type == "export_statement":
        inner = node.child_by_field_name("declaration")
        return _name(inner) if inner is not None else None
    if node.type in JS_DECLS:
        decl = next((c for c in node.named_children if c.type == "variable_declarator"), None)
        value = decl.child_by_field_name("value") if decl is not None else None
        if value is None or value.type not in JS_FUNCTIONS:
            return None
        node = decl  # type: ignore[assignment]
    elif node.type not in GO_DEFS | JS_DEFS:
        return None
    name = node.child_by_field_name("name")
    return (name.text or b"").decode() if name is not None else None


def _comments(node: Node) -> list[Node]:
    """The comment block right above ``node`` (no blank line between), top first."""
    out: list[Node] = []
    line = node.start_point.row
    prev = node.prev_sibling
    while prev is not None and prev.type == "comment" and prev.end_point.row == line - 1:
        out.insert(0, prev)
        line = prev.start_point.row
        prev = prev.prev_sibling
    return out


_TAG = re.compile(r"<[^>]+>|!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\{@link(?:code|plain)?\s+([^}|\s]+)[^}]*\}")


def doc_text(comments: Sequence[bytes]) -> str:
    """The description of a doc comment (``//`` lines or ``/** */``): its first paragraph."""
    lines: list[str] = []
    for raw in comments:
        text = raw.decode("utf-8", "replace")
        if text.startswith("//"):
            if re.match(r"//(go:|line |\s*\+build|nolint)", text):
                continue
            lines.append(text[2:].strip())
            continue
        body = text.removeprefix("/**").removeprefix("/*").removesuffix("*/")
        lines.extend(re.sub(r"^\s*\*?", "", x).strip() for x in body.split("\n"))
    para: list[str] = []
    for line in lines:
        if line.startswith("@") or (not line and para):
            break
        if line:
            para.append(line)
    return _LINK.sub(r"\1", _TAG.sub(" ", " ".join(para)))


def strip_doc_comments(src: bytes, language: str) -> tuple[bytes, list[tuple[int, str, str]]]:
    """The file with the doc comment of every documented function blanked (its lines kept
    as empty lines), and (answer's first line, query, symbol) for each."""
    tree = get_parser(language).parse(src)
    found: list[tuple[int, str, str]] = []
    spans: list[tuple[int, int]] = []
    for node in _walk(tree.root_node):
        name = _name(node)
        comments = _comments(node) if name else []
        if not name or not comments:
            continue
        sentence = first_sentence(doc_text([c.text or b"" for c in comments]))
        sentence = re.sub(rf"^((A|An|The)\s+)?{re.escape(name)}\b\s*", "", sentence).strip()
        if len(sentence.split()) < 4:
            continue
        found.append((node.start_point.row + 1, sentence, name))
        spans.append((comments[0].start_byte, comments[-1].end_byte))
    out = bytearray(src)
    for a, b in sorted(spans, reverse=True):
        out[a:b] = b"\n" * src.count(b"\n", a, b)
    return bytes(out), found


_CONTAINERS = {
    "export_statement",
    "class_declaration",
    "abstract_class_declaration",
    "class",
    "class_body",
}


def _walk(node: Node) -> Iterator[Node]:
    """Every definition-level node: top-level statements, class members, exports."""
    for child in node.named_children:
        yield child
        if child.type in _CONTAINERS:
            yield from _walk(child)


def build_repo(corpus: Corpus, dest: Path, files: int, seed: int) -> list[Query]:
    """Copy up to ``files`` documented source files of ``corpus`` into a fresh git repository
    at ``dest``, doc comments removed; the queries whose answers are in it."""
    found = sorted(
        p
        for p in corpus.root.rglob("*")
        if p.suffix in corpus.suffixes
        and p.is_file()
        and not corpus.skip.search(str(p.relative_to(corpus.root)))
        and "node_modules/.bin" not in str(p)
        and 200 < p.stat().st_size < 120_000
    )
    random.Random(seed).shuffle(found)
    dest.mkdir(parents=True)
    queries: list[Query] = []
    taken = 0
    for p in found:
        if taken >= files:
            break
        stripped, answers = strip_doc_comments(p.read_bytes(), corpus.language)
        if not answers:
            continue
        rel = str(p.relative_to(corpus.root))
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(stripped)
        queries.extend(Query(text, rel, line, name) for line, text, name in answers)
        taken += 1
    commit_corpus(dest)
    return queries


# -- the baseline: a plain code-aware BM25 over the same chunks ------------------------------

_IDENT = re.compile(r"[A-Za-z0-9_]+")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def code_tokens(text: str) -> list[str]:
    """Lowercased words: each identifier whole and, when it has several, its parts."""
    out: list[str] = []
    for ident in _IDENT.findall(text):
        parts = _PART.findall(ident)
        out.append(ident.lower())
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
    return out


class BM25:
    """Okapi BM25 (k1=1.2, b=0.75; idf = ln(1 + (N - df + 0.5) / (df + 0.5)))."""

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        docs = [Counter(code_tokens(t)) for t in texts]
        lens = np.array([sum(d.values()) for d in docs], dtype=np.float64)
        norm = k1 * (1 - b + b * lens / max(float(lens.mean()), 1.0))
        df: Counter[str] = Counter()
        for d in docs:
            df.update(d.keys())
        n = len(docs)
        self.post: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        rows: dict[str, tuple[list[int], list[float]]] = {}
        for i, d in enumerate(docs):
            for t, f in d.items():
                ids, ws = rows.setdefault(t, ([], []))
                ids.append(i)
                ws.append(f * (k1 + 1) / (f + norm[i]))
        for t, (ids, ws) in rows.items():
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            self.post[t] = (np.array(ids), idf * np.array(ws))
        self.n = n

    def top(self, query: str, k: int) -> list[int]:
        s = np.zeros(self.n)
        for t in set(code_tokens(query)):
            if t in self.post:
                ids, ws = self.post[t]
                s[ids] += ws
        order = np.argsort(-s, kind="stable")[:k]
        return [int(i) for i in order if s[i] > 0]


# -- scoring ---------------------------------------------------------------------------------

MODES = (Mode.TEXT, Mode.VECTOR, Mode.HYBRID)


def rank_of(q: Query, hits: Sequence[Hit | dict[str, Any]]) -> int | None:
    return next((i for i, h in enumerate(hits) if q.answered_by(h)), None)


def metrics(ranks: Sequence[int | None]) -> dict[str, np.ndarray]:
    def within(k: int) -> np.ndarray:
        return np.array([r is not None and r < k for r in ranks], float)

    mrr = np.array([1.0 / (r + 1) if r is not None and r < 10 else 0.0 for r in ranks])
    return {"R@1": within(1), "R@5": within(5), "MRR@10": mrr}


def evaluate(
    index: Index, store: IndexStore, queries: Sequence[Query]
) -> dict[str, list[int | None]]:
    """Rank of the answer for each query, per search (``None``: not in the top 10)."""
    rows = store.select("synthetic = false", ["path", "start_line", "end_line", "content"])
    bm25 = BM25([str(r["content"]) for r in rows])
    ranks: dict[str, list[int | None]] = {"bm25 (baseline)": []}
    for q in queries:
        ranks["bm25 (baseline)"].append(rank_of(q, [rows[i] for i in bm25.top(q.text, 10)]))
    for mode in MODES:
        ranks[str(mode)] = [rank_of(q, index.search(q.text, k=10, mode=mode)) for q in queries]
    return ranks


def report(language: str, n_chunks: int, ranks: dict[str, list[int | None]]) -> None:
    n = len(next(iter(ranks.values())))
    print(f"\n{language}: {n} queries, {n_chunks} chunks")
    print(f"  {'search':18} {'R@1 [95% CI]':24} {'R@5 [95% CI]':24} {'MRR@10 [95% CI]':24}")
    for name, rs in ranks.items():
        m = metrics(rs)
        print(f"  {name:18} {ci(m['R@1']):24} {ci(m['R@5']):24} {ci(m['MRR@10']):24}")


def missing_corpus(name: str, corpus: Corpus) -> bool:
    if corpus.root.is_dir():
        return False
    print(f"{name}: no corpus at {corpus.root}; fetch it with:", file=sys.stderr)
    for cmd in corpus.setup:
        print(f"    {cmd}", file=sys.stderr)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--language", action="append", choices=sorted(CORPORA), help="repeatable")
    for name, corpus in CORPORA.items():
        ap.add_argument(f"--{name}", type=Path, default=corpus.root, help=f"{name} corpus root")
    ap.add_argument("--files", type=int, help="documented files per language (default: each's)")
    ap.add_argument("--queries", type=int, default=300, help="at most this many per language")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/codechunkd-bench-search/cache"))
    ap.add_argument("--keep", type=Path, help="build (or reuse) the repositories and indexes here")
    args = ap.parse_args(argv)
    chosen = {n: CORPORA[n] for n in args.language or CORPORA}
    chosen = {n: replace(c, root=getattr(args, n)) for n, c in chosen.items()}
    if any([missing_corpus(n, c) for n, c in chosen.items()]):
        return 2
    if args.keep:  # the repositories and indexes kept for the next run
        return run(args, chosen, args.keep)
    with tempfile.TemporaryDirectory(prefix="code-search-") as tmp:
        return run(args, chosen, Path(tmp))


def run(args: argparse.Namespace, chosen: dict[str, Corpus], work: Path) -> int:
    """The bench of the ``chosen`` corpora in ``work``: repositories, indexes and report."""
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    for name, corpus in chosen.items():
        settings = load_settings(env={}, overrides={"index.dir": str(work / name / "index")})
        embedder = make_embedder(settings.embedding)
        repo = work / name / "repo"
        if repo.exists():
            shutil.rmtree(repo)
        queries = build_repo(corpus, repo, args.files or corpus.files, args.seed)
        queries = random.Random(args.seed).sample(queries, min(args.queries, len(queries)))
        store = IndexStore(str(work / name / "index"))
        cache = EmbeddingCache(args.cache, max_entries=1_000_000)
        try:
            t0 = time.monotonic()
            rep = Syncer(settings, store, embedder, cache).sync(GitSource(repo))
        finally:
            cache.close()
        print(f"indexed {name}: {rep.chunks} chunks in {time.monotonic() - t0:.0f} s", flush=True)
        index = Index(store, settings, embedder)
        report(name, store.count_chunks("synthetic = false"), evaluate(index, store, queries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
