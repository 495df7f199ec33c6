"""The product's own search, measured: ``open_index().search()`` on real projects with their docs.

    .venv/bin/python bench/search_quality.py                  # the held-out split
    .venv/bin/python bench/search_quality.py --split tune     # the split ranking was tuned on
    .venv/bin/python bench/search_quality.py --latency        # + text latency, rows not indexed

Each split is two real Python projects nobody on the team wrote, with their Markdown/reST
docs, copied into one git repository each and indexed into one index through the real
pipeline (``Syncer``, the default settings; vectors cached in ``--cache`` across runs).
Queries, as a user would ask them:

- code-seeking: a function's docstring first sentence; the docstring is removed from the
  indexed copy.  A hit is a chunk of that file holding the function's ``def`` line.
- doc-seeking: a docs section's first sentence; the sentence is removed from the indexed
  copy.  A hit is a chunk of that file overlapping the section.

Each search is ``Index.search(query, k=10)`` with the default settings: hybrid with no
filter (what a user gets), hybrid with ``language=`` the answer's language, vector only and
text only.  R@5 and MRR@10 come with 95% bootstrap intervals (1000 resamples of queries).

``--latency``: the second project is written with the full-text index left as it was (as
before #17: rows outside the index until a fold), the median text-search time is taken,
then after ``IndexStore.index_text`` adds the rows, and after a merge of the whole index
into one piece (a freshly folded index).

Sources (offline on the bench machine): the projects vendored by the Google Cloud SDK's
gsutil (``--projects``).  No TypeScript or Go sources exist on this machine (no Go
toolchain, no ``.ts`` outside type declarations): those languages are not measured here.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codechunkd.config import load_settings
from codechunkd.embedding.embedder import make_embedder
from codechunkd.git.changes import GitSource
from codechunkd.pipeline.sync import Syncer
from codechunkd.storage.cache import EmbeddingCache
from codechunkd.storage.coverage import coverage
from codechunkd.storage.reader import Index
from codechunkd.storage.search import Hit, Mode, Searcher
from codechunkd.storage.store import IndexStore

sys.path.insert(0, str(Path(__file__).parent))
from retrieval import first_sentence, strip_docstrings

THIRD_PARTY = Path("/usr/lib/google-cloud-sdk/platform/gsutil/third_party")
SPLITS = {
    "tune": ("requests", "charset_normalizer", "rsa"),
    "held-out": ("urllib3", "google-auth-library-python"),
    # The first held-out split was looked at in several sessions: no longer unseen.  The
    # second was run once with the ranking of 622c47b, and its misses were then read.
    "held-out-2": ("pyparsing", "pyasn1", "argcomplete"),
    # The rest of the vendored projects, never run before the ranking of #17's last change.
    "held-out-3": (
        "apitools",
        "cachetools",
        "certifi",
        "chardet",
        "crcmod",
        "fasteners",
        "funcsigs",
        "gcs-oauth2-boto-plugin",
        "google-auth-library-python-httplib2",
        "google-reauth-python",
        "httplib2",
        "idna",
        "mock",
        "monotonic",
        "pyasn1-modules",
        "pyu2f",
        "retry-decorator",
        "six",
    ),
}
SKIP_PARTS = {"test", "tests", "testing", "examples", "vendor", "_vendor"}
DOC_SUFFIXES = {".md", ".rst"}


@dataclass(frozen=True)
class Query:
    text: str
    kind: str
    """``code`` or ``doc``."""
    repo: str
    path: str
    start_line: int
    end_line: int
    language: str

    def answered_by(self, hit: Hit) -> bool:
        if hit.repo != self.repo or hit.path != self.path:
            return False
        if self.kind == "code":  # the chunk with the def line
            return hit.start_line <= self.start_line <= hit.end_line
        return hit.start_line <= self.end_line and self.start_line <= hit.end_line


# -- corpora ----------------------------------------------------------------------------


def _files(root: Path, suffixes: set[str], cap: int, seed: int) -> list[Path]:
    found = [
        p
        for p in sorted(root.rglob("*"))
        if p.suffix in suffixes
        and p.is_file()
        and not (set(p.relative_to(root).parts) & SKIP_PARTS)
        and p.stat().st_size < 120_000
    ]
    random.Random(seed).shuffle(found)
    return found[:cap]


_MD_HEADING = re.compile(r"^#{1,6}\s+\S")
_RST_UNDERLINE = re.compile(r"^([=\-~^*+#\"'`])\1{2,}\s*$")


def _sections(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) 0-based line of each section: from its heading to the next heading."""
    heads = []
    for i, line in enumerate(lines):
        if _MD_HEADING.match(line):
            heads.append(i)
        elif (
            i > 0
            and _RST_UNDERLINE.match(line)
            and lines[i - 1].strip()
            and len(line.strip()) >= len(lines[i - 1].strip())
            and not _RST_UNDERLINE.match(lines[i - 1])
        ):
            heads.append(i - 1)
    return [
        (h, (heads[j + 1] - 1) if j + 1 < len(heads) else len(lines) - 1)
        for j, h in enumerate(heads)
    ]


def strip_doc_sentences(text: str) -> tuple[str, list[tuple[str, int, int]]]:
    """The doc without each section's first sentence, and (sentence, first, last line)."""
    lines = text.split("\n")
    found = []
    for first, last in _sections(lines):
        body = first + 1
        while body <= last and (not lines[body].strip() or _RST_UNDERLINE.match(lines[body])):
            body += 1
        if body > last or lines[body].lstrip().startswith(("..", "```", "|", "-", "*", ">")):
            continue
        para_end = body
        while para_end + 1 <= last and lines[para_end + 1].strip():
            para_end += 1
        para = " ".join(x.strip() for x in lines[body : para_end + 1])
        sentence = first_sentence(para)
        if len(sentence.split()) < 6 or not para.startswith(sentence):
            continue
        rest = para[len(sentence) :].strip()
        lines[body : para_end + 1] = [rest] + [""] * (para_end - body)  # line numbers kept
        found.append((sentence, first + 1, last + 1))
    return "\n".join(lines), found


def build_repo(src: Path, dest: Path, cap: int, seed: int) -> list[Query]:
    """Copy ``src``'s code and docs into a fresh git repository at ``dest``, answers removed."""
    dest.mkdir(parents=True)
    queries: list[Query] = []
    for p in _files(src, {".py"}, cap, seed):
        rel = str(p.relative_to(src))
        stripped, found = strip_docstrings(p.read_bytes().decode("utf-8", "replace").encode())
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(stripped)
        lines = stripped.decode("utf-8", "replace").split("\n")
        defs = [i + 1 for i, x in enumerate(lines) if re.match(r"\s*(async\s+)?def\s", x)]
        for ordinal, sentence in found:
            if ordinal < len(defs):
                line = defs[ordinal]
                queries.append(Query(sentence, "code", str(dest), rel, line, line, "python"))
    for p in _files(src, DOC_SUFFIXES, cap, seed):
        rel = str(p.relative_to(src))
        stripped_doc, sections = strip_doc_sentences(p.read_text("utf-8", "replace"))
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(stripped_doc)
        lang = "markdown" if p.suffix == ".md" else "rst"
        queries.extend(Query(s, "doc", str(dest), rel, a, b, lang) for s, a, b in sections)
    commit_corpus(dest)
    return queries


def commit_corpus(dest: Path) -> None:
    """Make ``dest`` a git repository with everything in it committed on ``main``."""
    env = {
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@x",
    }
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "corpus"]):
        subprocess.run(["git", *cmd], cwd=dest, check=True, env=env, capture_output=True)


# -- scoring ----------------------------------------------------------------------------


def rank_of(q: Query, hits: Sequence[Hit]) -> int | None:
    return next((i for i, h in enumerate(hits) if q.answered_by(h)), None)


def scores(ranks: Sequence[int | None]) -> tuple[np.ndarray, np.ndarray]:
    r5 = np.array([r is not None and r < 5 for r in ranks], float)
    mrr = np.array([1.0 / (r + 1) if r is not None and r < 10 else 0.0 for r in ranks])
    return r5, mrr


def ci(values: np.ndarray, seed: int = 0) -> str:
    if not len(values):
        return "   -"
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (1000, len(values)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return f"{values.mean():.3f} [{lo:.3f}, {hi:.3f}]"


RULES: dict[str, list[str]] = {"disable": [], "enable": []}
"""Ranking rules switched off and on for every search (``--disable``, ``--enable``)."""

SEARCHES: dict[str, Callable[[Index, Query], list[Hit]]] = {
    "hybrid (default, no filter)": lambda ix, q: ix.search(q.text, k=10, **RULES),
    "hybrid, language filter": lambda ix, q: ix.search(q.text, k=10, language=q.language, **RULES),
    "vector only": lambda ix, q: ix.search(q.text, k=10, mode=Mode.VECTOR, **RULES),
    "text only": lambda ix, q: ix.search(q.text, k=10, mode=Mode.TEXT, **RULES),
}


def report(index: Index, queries: Sequence[Query], only: Sequence[str] | None = None) -> None:
    for kind in ("code", "doc"):
        qs = [q for q in queries if q.kind == kind]
        print(f"\n{kind}-seeking queries: {len(qs)}")
        print(f"  {'search':32} {'R@5 [95% CI]':26} {'MRR@10 [95% CI]':26} doc@1")
        recall: dict[str, np.ndarray] = {}
        for name, run in SEARCHES.items():
            if only and name not in only:
                continue
            ranks, top_doc = [], 0
            for q in qs:
                hits = run(index, q)
                ranks.append(rank_of(q, hits))
                top_doc += bool(hits) and hits[0].language in {"markdown", "rst"}
            r5, mrr = scores(ranks)
            recall[name] = r5
            print(f"  {name:32} {ci(r5):26} {ci(mrr):26} {top_doc / max(1, len(qs)):.2f}")
        default, filtered = (recall.get(n) for n in list(SEARCHES)[:2])
        if default is not None and filtered is not None:  # paired: the same queries resampled
            lost = int((filtered - default).sum())
            print(f"  R@5 filtered - default: {ci(filtered - default)} ({lost} queries)")


def text_latency_ms(searcher: Searcher, queries: Sequence[Query]) -> float:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        searcher.search(q.text, None, k=10, mode=Mode.TEXT)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


class _OldStore(IndexStore):
    """The store as before #17 for the ``--latency`` figure: new rows left out of the
    full-text index until a fold."""

    def index_text(self) -> int:
        return 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--split", choices=sorted(SPLITS), default="held-out")
    ap.add_argument("--projects", type=Path, default=THIRD_PARTY)
    ap.add_argument(
        "--files", type=int, default=120, help="at most this many code (and doc) files per project"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/codechunkd-bench-search/cache"))
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--keep", type=Path, help="build (or reuse) the index here")
    ap.add_argument(
        "--plain-words", action="store_true", help="as before #17: no code words (the baseline)"
    )
    ap.add_argument(
        "--old-ranking", action="store_true", help="as before #17: no prose weight (baseline)"
    )
    ap.add_argument("--prose-weight", type=float, help="override search.PROSE_WEIGHT (tuning)")
    ap.add_argument("--only", action="append", help="only these searches (repeatable)")
    ap.add_argument("--disable", default="", help="ranking rules to switch off (RULE,...)")
    ap.add_argument("--enable", default="", help="opt-in ranking rules to switch on (RULE,...)")
    ap.add_argument(
        "--vectors",
        help="comma-separated shares of chunks that keep their vector, e.g. 1,0.5,0: the report "
        "at each (the others as a first index leaves them before its fill: text only)",
    )
    args = ap.parse_args(argv)
    RULES["disable"] = [r for r in args.disable.split(",") if r]
    RULES["enable"] = [r for r in args.enable.split(",") if r]
    if args.old_ranking:
        import codechunkd.storage.search as search_mod

        search_mod.hit_weight = lambda row, prose_weight: search_mod.kind_weight(row["kind"])
    if args.plain_words:
        import codechunkd.storage.fulltext as fulltext_mod
        import codechunkd.storage.search as search_mod

        fulltext_mod.code_words = vars(search_mod)["code_words"] = lambda text: ""
    if args.prose_weight is not None:
        import codechunkd.storage.search as search_mod

        search_mod.PROSE_WEIGHT = args.prose_weight

    if args.keep:  # the repositories and indexes kept for the next run
        run(args, args.keep)
        return
    with tempfile.TemporaryDirectory(prefix="search-quality-") as tmp:
        run(args, Path(tmp))


def run(args: argparse.Namespace, work: Path) -> None:
    """The bench in ``work``: its repositories, indexes and report."""
    settings = load_settings(env={}, overrides={"index.dir": str(work / "index")})
    embedder = make_embedder(settings.embedding)
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    cache = EmbeddingCache(args.cache, max_entries=1_000_000)
    queries: list[Query] = []
    stores: list[IndexStore] = []
    try:
        for i, name in enumerate(SPLITS[args.split]):
            repo = work / name
            if repo.exists():
                shutil.rmtree(repo)
            queries += build_repo(args.projects / name, repo, args.files, args.seed)
            store_cls = _OldStore if args.latency and i == 1 else IndexStore
            store = store_cls(str(work / "index"))
            stores.append(store)
            t0 = time.monotonic()
            rep = Syncer(settings, store, embedder, cache).sync(GitSource(repo))
            print(f"indexed {name}: {rep.chunks} chunks in {time.monotonic() - t0:.0f} s")
    finally:
        cache.close()
    store = IndexStore(str(work / "index"))
    if args.latency:
        searcher = Searcher(store)
        sample = random.Random(1).sample(queries, min(200, len(queries)))
        rows, _ = store.unindexed()
        print(f"\ntext search, median ms over {len(sample)} queries ({store.rows()} rows):")
        print(f"  {rows} rows outside the full-text index: {text_latency_ms(searcher, sample):.1f}")
        t0 = time.perf_counter()
        added = store.index_text()
        took = (time.perf_counter() - t0) * 1000
        print(
            f"  after index_text ({added} rows in {took:.0f} ms): "
            f"{text_latency_ms(searcher, sample):.1f}"
        )
        ds = store.chunks_table().to_lance()
        ds.optimize.optimize_indices(index_names=["fts_text_idx"], num_indices_to_merge=1000)
        print(f"  whole index merged into one: {text_latency_ms(searcher, sample):.1f}")
    index = Index(store, settings, embedder)
    print(f"\nsplit {args.split}: {', '.join(SPLITS[args.split])}; {store.rows()} rows")
    if not args.vectors:
        report(index, queries, args.only)
        return
    for share in sorted((float(v) for v in args.vectors.split(",")), reverse=True):
        dropped = keep_vectors(store, share)
        cov = coverage(store)
        print(f"\n== vectors for {share:.0%} of chunks ({cov.text()}; {dropped} dropped now)")
        report(index, queries, args.only)


def keep_vectors(store: IndexStore, share: float) -> int:
    """Leave a vector on ``share`` of the rows (chosen by id: the same rows at every share),
    NULL on the rest, as a text-first write leaves them before its fill; returns rows
    changed. Shares must come in decreasing order (a dropped vector is not put back)."""
    import pyarrow as pa

    ids = store.scan_chunks("embedding_model IS NOT NULL", ["id"]).column("id").to_pylist()
    drop = [i for i in ids if int(i[:8], 16) / 0x1_0000_0000 >= share]
    if not drop:
        return 0
    dim = store.chunks_table().schema.field("vector").type.list_size
    flat = pa.array(np.zeros(len(drop) * dim, np.float32))
    mask = pa.array([True] * len(drop))
    table = pa.table(
        {
            "id": pa.array(drop, pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(flat, dim, mask=mask),
            "embedding_model": pa.array([None] * len(drop), pa.string()),
        }
    )
    tbl = store.chunks_table()
    tbl.merge_insert("id").when_matched_update_all().execute(table, on_bad_vectors="null")
    store.index_text()
    return len(drop)


if __name__ == "__main__":
    main()
