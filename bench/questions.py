"""Questions people ask about code they did not write: the product's search, judged file by file.

    .venv/bin/python bench/questions.py                       # the tune split (the default)
    .venv/bin/python bench/questions.py --repos click,go      # some repositories only
    .venv/bin/python bench/questions.py --misses              # + each question's top files
    .venv/bin/python bench/questions.py --json                # the figures, machine-readable
    .venv/bin/python bench/questions.py --split held-out      # only when measuring, never tuning
    .venv/bin/python bench/questions.py --disable RULE,...    # once search can switch rules off
    .venv/bin/python bench/questions.py --ablate RULE,...     # + default with each rule off
    .venv/bin/python bench/questions.py --windows 3           # long chunks: 3 windows pooled
    .venv/bin/python bench/questions.py --model DIR           # another model directory
    .venv/bin/python bench/questions.py --published --repos axios,mobx  # + builds and docs
    .venv/bin/python bench/questions.py --rerank http://127.0.0.1:8000/v1 --rerank-model M
                                          # default search ordered by a reranking server
    .venv/bin/python bench/questions.py --rerank oracle   # ... by the judgements: the ceiling

The questions are data, one TOML file per repository in ``bench/questions/``: where the
code is (``root`` with ``{site_packages}``, ``{stdlib}`` or ``{code_cache}``, ``include``
globs, an ``exclude`` pattern), its split, and its questions, each with a kind and the
files that answer it, judged by reading the code: grade 2 is the answer, 1 is related.
Kinds: ``semantic`` ("where/how is X done", in a newcomer's words, not the code's),
``architecture`` ("how is Y structured", "what are the main parts of Z"), ``symbol``
("where is ``HTTPAdapter`` defined").  The split is by repository: the held-out half
stays unseen while ranking is tuned, and is printed only with ``--split held-out``/``all``.

Each repository is copied into a fresh git repository and indexed into its own index
through the real pipeline (``Syncer``, default settings, the bundled model; vectors cached
in ``--cache`` by content, shared with the other benches).  The index is kept in ``--work``
under a key of the corpus and of the indexing code (chunking, embedding, pipeline, store),
so a second run only searches (about 80 ms of CPU a search).  Cold, the thirteen repositories
are about 20,800 chunks: some 23 minutes at 15 chunks/s, longer on busy cores; with the
vector cache warm, a changed indexing code only re-chunks.  A corpus that differs from the
one the questions were judged on (another package version) is said so: its figures may be
off.  The held-out questions' misses are for measuring, not for reading while tuning.

Every question runs through ``run_query`` (``Index.search(q, k=10, mode=...)``) in three
modes: default (hybrid), ``text`` and ``vector``.  Scores are at file level: the hits are
reduced to their files in rank order (a file counts at its first chunk), then

- NDCG@10: graded, gain 2^grade - 1, discount log2(rank + 1), ideal from all judged files;
- R@5: judged files (grade >= 1) among the first 5 distinct files, over min(5, judged);
- MRR@10: 1 / rank of the first judged file among the first 10 distinct files;
- files@10: distinct files in the 10 hits (a diagnostic: duplicates crowd answers out).

Means come with 95% bootstrap intervals (1000 resamples of questions, seed 0), per split,
per kind and overall, and paired differences default - text and default - vector (the
same questions resampled; w/t/l: questions where default wins, ties, loses on NDCG@10).

Ranking rules by name: ``--disable`` switches rules off in every search, ``--ablate`` adds
default search with each named rule off in turn (the paired gap is that rule's worth).
Both go through ``run_query``, which passes ``disable=`` to ``Index.search``; until the
search takes that parameter the bench refuses them.

Corpora: packages of the venv and the standard library (always here); Go, TypeScript and
JavaScript as ``bench/code_search.py`` sets them up (``~/.cache/codechunkd-bench/code``, the
npm CLI under ``/usr/lib/node_modules/npm``); a repository whose corpus is missing is
skipped, with the commands that fetch it (its ``setup``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import inspect
import json
import logging
import math
import os
import re
import shutil
import sys
import sysconfig
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

QUESTIONS_DIR = Path(__file__).parent / "questions"
KINDS = ("semantic", "architecture", "symbol")
SPLITS = ("tune", "held-out")
CODE_CACHE = Path.home() / ".cache" / "codechunkd-bench" / "code"
"""Where ``bench/code_search.py`` fetches Go, TypeScript and JavaScript corpora."""
K = 10
RESAMPLES = 1000


# -- the questions, as data --------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    id: str
    """``<repo>-<n>``: the question's place in its file, from 1."""
    repo: str
    kind: str
    text: str
    relevant: dict[str, int]
    """Path in the repository -> grade (2: the answer, 1: related)."""


@dataclass(frozen=True)
class Repo:
    name: str
    split: str
    language: str
    root: Path
    include: tuple[str, ...]
    exclude: re.Pattern[str] | None
    judged: str
    """What the relevance was judged on (package and version)."""
    digest: str
    """``corpus_digest`` of the files judged ("" when not recorded)."""
    setup: tuple[str, ...]
    questions: tuple[Question, ...] = field(default=())

    def files(self) -> list[str]:
        """The corpus: the paths under ``root`` matching ``include`` and not ``exclude``."""
        found: set[str] = set()
        for pattern in self.include:
            for p in self.root.glob(pattern):
                rel = p.relative_to(self.root).as_posix()
                if p.is_file() and not (self.exclude and self.exclude.search(rel)):
                    found.add(rel)
        return sorted(found)


def placeholders() -> dict[str, str]:
    paths = sysconfig.get_paths()
    return {
        "site_packages": paths["purelib"],
        "stdlib": paths["stdlib"],
        "code_cache": str(CODE_CACHE),
    }


def load_repo(path: Path, where: dict[str, str] | None = None) -> Repo:
    """One ``bench/questions/*.toml``; raises ``ValueError`` on a malformed question."""
    spec = tomllib.loads(path.read_text())
    name = spec["name"]
    if spec["split"] not in SPLITS:
        raise ValueError(f"{path}: split must be one of {SPLITS}")
    questions = []
    for i, q in enumerate(spec.get("questions", []), 1):
        qid = f"{name}-{i}"
        if q["kind"] not in KINDS:
            raise ValueError(f"{path}: {qid}: kind must be one of {KINDS}")
        relevant = {str(p): int(g) for p, g in q["relevant"].items()}
        if (
            not relevant
            or any(g not in (1, 2) for g in relevant.values())
            or 2 not in relevant.values()
        ):
            raise ValueError(f"{path}: {qid}: grades are 1 or 2, with at least one 2")
        questions.append(Question(qid, name, q["kind"], q["text"].strip(), relevant))
    return Repo(
        name=name,
        split=spec["split"],
        language=spec["language"],
        root=Path(spec["root"].format(**(where or placeholders()))),
        include=tuple(spec["include"]),
        exclude=re.compile(spec["exclude"]) if spec.get("exclude") else None,
        judged=spec.get("judged", ""),
        digest=spec.get("digest", ""),
        setup=tuple(spec.get("setup", ())),
        questions=tuple(questions),
    )


def load_repos(directory: Path = QUESTIONS_DIR) -> list[Repo]:
    return [load_repo(p) for p in sorted(directory.glob("*.toml"))]


def corpus_digest(root: Path, files: Iterable[str]) -> str:
    """A short hash of the corpus: its paths and their bytes."""
    h = hashlib.sha256()
    for rel in files:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def check_judgements(repo: Repo, files: Sequence[str]) -> list[str]:
    """Judged paths that are not in the corpus (a typo, or another version's layout)."""
    have = set(files)
    return [f"{q.id}: {p}" for q in repo.questions for p in q.relevant if p not in have]


# -- file-level metrics ------------------------------------------------------------------


def files_in_order(paths: Iterable[str]) -> list[str]:
    """Distinct files in the order of their first hit."""
    return list(dict.fromkeys(paths))


def ndcg(files: Sequence[str], relevant: dict[str, int], k: int = K) -> float:
    gains = [2 ** relevant.get(f, 0) - 1 for f in files[:k]]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted((2**g - 1 for g in relevant.values()), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall(files: Sequence[str], relevant: dict[str, int], k: int = 5) -> float:
    if not relevant:
        return 0.0
    return sum(f in relevant for f in files[:k]) / min(k, len(relevant))


def mrr(files: Sequence[str], relevant: dict[str, int], k: int = K) -> float:
    return next((1.0 / (i + 1) for i, f in enumerate(files[:k]) if f in relevant), 0.0)


METRICS: dict[str, Callable[[Sequence[str], dict[str, int]], float]] = {
    "NDCG@10": ndcg,
    "R@5": recall,
    "MRR@10": mrr,
    "files@10": lambda files, relevant: float(len(files[:K])),
}


def interval(values: Sequence[float] | np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """Mean and 95% bootstrap interval (``RESAMPLES`` resamples)."""
    v = np.asarray(values, dtype=float)
    if not len(v):
        return (math.nan, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), (RESAMPLES, len(v)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return (float(v.mean()), float(lo), float(hi))


def fmt(iv: tuple[float, float, float], signed: bool = False) -> str:
    m, lo, hi = iv
    if math.isnan(m):
        return "-"
    s = "+.3f" if signed else ".3f"
    return f"{m:{s}} [{lo:{s}}, {hi:{s}}]"


# -- searching ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchOptions:
    mode: str
    """``hybrid`` (the default search), ``text`` or ``vector``."""
    k: int = K
    disable: frozenset[str] = frozenset()
    """Ranking rules switched off by name (``--disable``)."""
    enable: frozenset[str] = frozenset()
    """Opt-in ranking rules switched on by name (``--enable``)."""


MODES = {"default": "hybrid", "text": "text", "vector": "vector"}


def search_takes_disable() -> bool:
    from codechunkd.storage.reader import Index

    return "disable" in inspect.signature(Index.search).parameters


def run_query(index: Any, text: str, options: SearchOptions) -> list[Any]:
    """The one place a question meets the search.  ``options.disable`` is passed on as
    ``disable=`` (the names of ranking rules to switch off) once ``Index.search`` takes it;
    ``main`` refuses ``--disable`` before that."""
    answer = getattr(index, "answer", None)
    if answer is not None:  # this code's Index: its notes say when a reranker failed
        from codechunkd.storage.request import SearchRequest

        req = SearchRequest(
            query=text,
            k=options.k,
            mode=options.mode,
            disable=tuple(sorted(options.disable)),
            enable=tuple(sorted(options.enable)),
        )
        hits, notes = answer(req)
        if notes:  # its figures would be those of the search without it, under its name
            raise RuntimeError(f"{text!r}: {'; '.join(notes)}")
        return list(hits)
    extra: dict[str, Any] = {"disable": sorted(options.disable)} if options.disable else {}
    if options.enable:
        extra["enable"] = sorted(options.enable)
    return list(index.search(text, k=options.k, mode=options.mode, **extra))


@dataclass
class Outcome:
    question: Question
    files: dict[str, list[str]]
    """Search name -> distinct files of its hits, in rank order."""

    def score(self, search: str, metric: str) -> float:
        return METRICS[metric](self.files[search], self.question.relevant)


# -- indexing ----------------------------------------------------------------------------

INDEXING_CODE = (
    "chunking",
    "embedding",
    "pipeline",
    "git",
    "config",
    "storage/store.py",
    "storage/rows.py",
    "storage/fulltext.py",
    "storage/writes.py",
    "storage/upkeep.py",
)
"""What decides an index's contents (its key); ranking code is not in it."""


def code_digest() -> str:
    import codechunkd

    pkg = Path(codechunkd.__file__).parent
    h = hashlib.sha256()
    for part in INDEXING_CODE:
        p = pkg / part
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(f.relative_to(pkg).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def _overrides(
    window: int | None, model: str | None = None, keep_generated: bool = False
) -> dict[str, int | str | bool]:
    """Settings overrides for ``--window`` (the model reads that many tokens of a chunk),
    ``--model`` (a model directory instead of the bundled one) and ``--keep-generated``
    (build output indexed like any file)."""
    found: dict[str, int | str | bool] = {"embedding.max_seq_length": window} if window else {}
    if model:
        found["embedding.model"] = model
    if keep_generated:
        found["files.skip_generated"] = False
    return found


def published(repo: Repo) -> Repo | None:
    """The repository as its package was published, every file under its root (its builds
    and docs beside the judged sources), or None when its root is no package folder."""
    if not (repo.root / "package.json").is_file():
        return None
    return dataclasses.replace(repo, include=("**/*",), exclude=None)


STRIDE = 32
"""Tokens that one window of a long text shares with the one before (``--windows``)."""


class PooledWindows:
    """``--windows N``: an embedder that reads up to N windows of a long text, not only its
    head. The text is cut into windows of the model's window of tokens, each overlapping the
    one before by :data:`STRIDE` tokens; each window is embedded as a text of its own, and
    the text's vector is the normalised mean of its windows' vectors. A text that fits one
    window gets the model's own vector. Everything else is the wrapped embedder's."""

    def __init__(self, inner: Any, windows: int, settings: Any) -> None:
        from tokenizers import Tokenizer

        from codechunkd.embedding.models import model_path

        path = model_path(settings.model)
        if path is None:
            raise SystemExit(f"--windows: no local files for the model {settings.model!r}")
        self.inner, self.windows = inner, windows
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=settings.max_seq_length, stride=STRIDE)

    @property
    def model_id(self) -> str:
        return f"{self.inner.model_id}/windows{self.windows}"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str]) -> Any:
        from codechunkd.embedding.base import normalize

        parts: list[str] = []
        owner: list[int] = []
        encodings = self.tokenizer.encode_batch(list(texts))
        for i, (text, enc) in enumerate(zip(texts, encodings, strict=True)):
            windows = [enc, *enc.overflowing[: self.windows - 1]]
            if len(windows) == 1:
                parts.append(text)
                owner.append(i)
                continue
            for w in windows:
                spans = [(a, b) for a, b in w.offsets if b > a]  # special tokens have none
                parts.append(text[spans[0][0] : spans[-1][1]] if spans else "")
                owner.append(i)
        vectors = self.inner.embed(parts)
        pooled = np.zeros((len(texts), vectors.shape[1]), dtype=np.float64)
        np.add.at(pooled, owner, vectors)
        return normalize(pooled)


def build_index(
    repo: Repo,
    files: Sequence[str],
    digest: str,
    work: Path,
    cache_dir: Path,
    embedder: Any,
    fresh: bool,
    window: int | None = None,
    windows: int | None = None,
    model: str | None = None,
    keep_generated: bool = False,
) -> tuple[Any, str]:
    """The repository's index (built, or reused from ``work``) and a line saying which."""
    from codechunkd.config import load_settings
    from codechunkd.git.changes import GitSource
    from codechunkd.pipeline.sync import Syncer
    from codechunkd.storage.cache import EmbeddingCache
    from codechunkd.storage.reader import Index
    from codechunkd.storage.store import IndexStore
    from search_quality import commit_corpus

    home = work / (
        f"{repo.name}-{digest}-{code_digest()}"
        + (f"-w{window}" if window else "")
        + (f"-p{windows}" if windows else "")
        + (f"-m{hashlib.sha256(model.encode()).hexdigest()[:8]}" if model else "")
        + ("-g" if keep_generated else "")
    )
    overrides = _overrides(window, model, keep_generated)
    settings = load_settings(env={}, overrides={"index.dir": str(home / "index"), **overrides})
    done = home / "done.json"
    if fresh and home.exists():
        shutil.rmtree(home)
    if done.exists():
        info = json.loads(done.read_text())
        line = f"{repo.name}: {len(files)} files, {info['chunks']} chunks (index reused: {home})"
    else:
        if home.exists():
            shutil.rmtree(home)
        src = home / "repo"
        for rel in files:
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo.root / rel, src / rel)
        commit_corpus(src)
        cache_dir.parent.mkdir(parents=True, exist_ok=True)
        cache = EmbeddingCache(cache_dir, max_entries=1_000_000)
        t0 = time.monotonic()
        try:
            rep = Syncer(settings, IndexStore(str(home / "index")), embedder, cache).sync(
                GitSource(src)
            )
        finally:
            cache.close()
        took = time.monotonic() - t0
        failed = rep.skipped.get("chunking_failed", 0)
        if failed:  # figures from a partial index would look like a ranking change
            shutil.rmtree(home, ignore_errors=True)
            raise SystemExit(
                f"{repo.name}: {failed} file(s) failed to chunk (the log's chunking_failed "
                "lines say why; was the code edited while the bench ran?): no figures"
            )
        info = {"chunks": rep.chunks, "embedded": rep.embedded, "seconds": round(took, 1)}
        done.write_text(json.dumps(info))
        line = (
            f"{repo.name}: {len(files)} files, {rep.chunks} chunks indexed in {took:.0f} s "
            f"({rep.embedded} embedded, the rest from the cache)"
        )
    return Index(IndexStore(str(home / "index")), settings, embedder), line


class OracleReranker:
    """``--rerank oracle``: a reranking server on 127.0.0.1 that scores each candidate by the
    judged grade of its file (0, 1 or 2) for the question asked: what a perfect reranker
    would say, so the figures are the ceiling the candidates and ``rerank.*`` allow."""

    def __init__(self, repos: Sequence[Repo]) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        grades = {q.text: q.relevant for r in repos for q in r.questions}

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                relevant = grades.get(body["query"], {})
                docs = body["documents"]
                results = [
                    {"index": i, "relevance_score": relevant.get(d.split("\n", 1)[0], 0)}
                    for i, d in enumerate(docs)
                ]
                out = json.dumps({"results": results}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def with_reranker(index: Any, args: argparse.Namespace) -> Any:
    """``index`` searched with the reranking server of ``--rerank`` (``rerank.*``)."""
    from codechunkd.config.settings import RerankSettings
    from codechunkd.storage.reader import Index

    rerank = RerankSettings(
        url=args.rerank,
        model=args.rerank_model,
        protocol=args.rerank_protocol,
        api_key_env=args.rerank_key_env,
        depth=args.rerank_depth,
    )
    settings = dataclasses.replace(index.settings, rerank=rerank)
    return Index(index.store, settings, index.embedder)


def searches(
    disable: frozenset[str], ablate: Sequence[str], enable: frozenset[str] = frozenset()
) -> dict[str, SearchOptions]:
    """The searches each question runs: the three modes, then default search with each rule
    of ``ablate`` switched in turn: off (``without <rule>``) for a rule the search runs by
    default, on (``with <rule>``) for an opt-in one (``ranking.OPT_IN``)."""
    from codechunkd.storage.ranking import OPT_IN

    out = {
        name: SearchOptions(mode, disable=disable, enable=enable) for name, mode in MODES.items()
    }
    for rule in ablate:
        if rule in OPT_IN and rule not in enable:
            out[f"with {rule}"] = SearchOptions("hybrid", disable=disable, enable=enable | {rule})
        else:
            out[f"without {rule}"] = SearchOptions(
                "hybrid", disable=disable | {rule}, enable=enable - {rule}
            )
    return out


def evaluate(index: Any, repo: Repo, runs: dict[str, SearchOptions]) -> list[Outcome]:
    out = []
    for q in repo.questions:
        files = {}
        for name, options in runs.items():
            files[name] = files_in_order(h.path for h in run_query(index, q.text, options))
        out.append(Outcome(q, files))
    return out


# -- reporting ---------------------------------------------------------------------------

SCORED = ("NDCG@10", "R@5", "MRR@10")


def figures(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Per search: each metric's (mean, lo, hi); paired gaps of default search over each other
    search (a single retriever, or default with one rule off: that rule's worth)."""
    names = list(outcomes[0].files)
    fig: dict[str, Any] = {"questions": len(outcomes), "searches": {}, "paired": {}}
    for search in names:
        fig["searches"][search] = {
            m: interval([o.score(search, m) for o in outcomes]) for m in METRICS
        }
    for other in names[1:]:
        pair: dict[str, Any] = {}
        for m in SCORED:
            pair[m] = interval([o.score("default", m) - o.score(other, m) for o in outcomes])
        d = np.array([o.score("default", "NDCG@10") - o.score(other, "NDCG@10") for o in outcomes])
        pair["wins_ties_losses"] = (
            int((d > 1e-9).sum()),
            int((abs(d) <= 1e-9).sum()),
            int((d < -1e-9).sum()),
        )
        fig["paired"][f"default - {other}"] = pair
    return fig


def print_block(title: str, fig: dict[str, Any]) -> None:
    width = max(len(n) for n in [*fig["searches"], *fig["paired"]])
    print(f"\n{title}: {fig['questions']} questions")
    heads = "".join(f" {m + ' [95% CI]':24}" for m in SCORED)
    print(f"  {'search':{width}}{heads} files@10")
    for search, ms in fig["searches"].items():
        cells = "".join(f" {fmt(ms[m]):24}" for m in SCORED)
        print(f"  {search:{width}}{cells} {ms['files@10'][0]:.1f}")
    for name, pair in fig["paired"].items():
        cells = "".join(f" {fmt(pair[m], signed=True):24}" for m in SCORED)
        w, t, lo = pair["wins_ties_losses"]
        print(f"  {name:{width}}{cells} w/t/l {w}/{t}/{lo}")


def groups(
    outcomes: Sequence[Outcome], repos: dict[str, Repo], split: str
) -> list[tuple[str, list[Outcome]]]:
    """(title, outcomes) for a split (or ``all``): every kind, then each kind."""
    chosen = [o for o in outcomes if split == "all" or repos[o.question.repo].split == split]
    out = [(f"{split}, all kinds", chosen)]
    out += [(f"{split}, {kind}", [o for o in chosen if o.question.kind == kind]) for kind in KINDS]
    return [(t, os) for t, os in out if os]


def print_misses(outcomes: Sequence[Outcome]) -> None:
    print("\nper question (NDCG@10 default/text/vector; default's first files; * judged):")
    for o in outcomes:
        q = o.question
        s = "/".join(f"{o.score(n, 'NDCG@10'):.2f}" for n in MODES)
        top = ", ".join(f"{'*' if f in q.relevant else ''}{f}" for f in o.files["default"][:5])
        print(f"  {q.id:14} {q.kind[:4]} {s}  {q.text[:70]!r}\n      -> {top}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--split", choices=[*SPLITS, "all"], default="tune")
    ap.add_argument("--repos", help="comma-separated repository names (default: all of the split)")
    ap.add_argument("--disable", default="", help="comma-separated ranking rules to switch off")
    ap.add_argument("--enable", default="", help="comma-separated opt-in rules to switch on")
    ap.add_argument(
        "--ablate", default="", help="comma-separated rules: also run default with each one off"
    )
    ap.add_argument("--json", action="store_true", help="print the figures as JSON only")
    ap.add_argument("--misses", action="store_true", help="also print each question's top files")
    ap.add_argument("--work", type=Path, default=Path("/tmp/codechunkd-bench-questions"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/codechunkd-bench-search/cache"))
    ap.add_argument("--fresh", action="store_true", help="rebuild the indexes")
    ap.add_argument(
        "--window", type=int, help="tokens of a chunk the model reads (embedding.max_seq_length)"
    )
    ap.add_argument("--model", help="a sentence-transformers model directory (embedding.model)")
    ap.add_argument(
        "--published",
        action="store_true",
        help="index every file of a package as published (its builds, docs); npm packages only",
    )
    ap.add_argument(
        "--keep-generated",
        action="store_true",
        help="index build output like any file (files.skip_generated = false)",
    )
    ap.add_argument(
        "--windows",
        type=int,
        help="embed up to N windows of a long chunk, their vectors pooled (PooledWindows)",
    )
    ap.add_argument(
        "--rerank",
        metavar="URL",
        help="default search ordered by this reranking server (rerank.url; also "
        "--rerank-model), or by the judgements themselves: `oracle` (the ceiling)",
    )
    ap.add_argument("--rerank-model", default="", help="rerank.model")
    ap.add_argument("--rerank-protocol", default="cohere", help="rerank.protocol")
    ap.add_argument("--rerank-key-env", default="", help="rerank.api_key_env")
    ap.add_argument("--rerank-depth", type=int, default=30, help="rerank.depth")
    args = ap.parse_args(argv)
    os.environ.setdefault("LANCEDB_LOG", "error")
    from codechunkd import logs

    logs.configure(level=logging.INFO)  # the pipeline's lines on stderr: --json is stdout
    disable = frozenset(x.strip() for x in args.disable.split(",") if x.strip())
    ablate = [x.strip() for x in args.ablate.split(",") if x.strip()]
    if (disable or ablate) and not search_takes_disable():
        print(
            "--disable/--ablate: Index.search takes no `disable` yet; see run_query",
            file=sys.stderr,
        )
        return 2
    enable = frozenset(x.strip() for x in args.enable.split(",") if x.strip())
    runs = searches(disable, ablate, enable)
    log = sys.stderr if args.json else sys.stdout
    every = load_repos()
    repos = [r for r in every if args.split == "all" or r.split == args.split]
    if args.repos:
        wanted = {x.strip() for x in args.repos.split(",")}
        unknown = wanted - {r.name for r in every}
        if unknown:
            print(f"--repos: no such repository: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        held = [r.name for r in every if r.name in wanted and r not in repos]
        if held:
            print(f"--repos: {', '.join(held)} not in split {args.split}", file=sys.stderr)
            return 2
        repos = [r for r in repos if r.name in wanted]

    from codechunkd.config import load_settings
    from codechunkd.embedding.embedder import make_embedder

    embedding = load_settings(env={}, overrides=_overrides(args.window, args.model)).embedding
    embedder = make_embedder(embedding)
    windows = args.windows if args.windows and args.windows > 1 else None
    if windows:
        embedder = PooledWindows(embedder, windows, embedding)
    oracle = None
    if args.rerank == "oracle":
        oracle = OracleReranker(repos)
        args.rerank, args.rerank_model, args.rerank_protocol = oracle.url, "oracle", "cohere"
    try:
        return _measure(args, repos, runs, embedder, windows, log, disable, enable, ablate)
    finally:
        if oracle is not None:
            oracle.close()


def _measure(
    args: argparse.Namespace,
    repos: Sequence[Repo],
    runs: dict[str, SearchOptions],
    embedder: Any,
    windows: int | None,
    log: Any,
    disable: frozenset[str],
    enable: frozenset[str],
    ablate: Sequence[str],
) -> int:
    """Index each repository, ask its questions, print the figures."""
    outcomes: list[Outcome] = []
    used: list[Repo] = []
    for repo in repos:
        if not repo.root.is_dir():
            print(
                f"{repo.name}: no corpus at {repo.root}; skipped. Fetch it with:", file=sys.stderr
            )
            for cmd in repo.setup:
                print(f"    {cmd}", file=sys.stderr)
            continue
        whole = published(repo) if args.published else repo
        if whole is None:
            print(f"--published: {repo.name} is no package folder; skipped", file=sys.stderr)
            continue
        files = repo.files()
        bad = check_judgements(repo, files)
        if bad:
            print(f"{repo.name}: judged files not in the corpus: {'; '.join(bad)}", file=sys.stderr)
            return 2
        digest = corpus_digest(repo.root, files)
        if repo.digest and digest != repo.digest:
            print(
                f"{repo.name}: the corpus ({digest}) is not the one judged ({repo.judged}, "
                f"{repo.digest}): its figures may be off",
                file=sys.stderr,
            )
        if whole is not repo:  # the judged sources checked above, then their whole package
            repo, files = whole, whole.files()
            digest = corpus_digest(repo.root, files)
        index, line = build_index(
            repo,
            files,
            digest,
            args.work,
            args.cache,
            embedder,
            args.fresh,
            args.window,
            windows,
            args.model,
            args.keep_generated,
        )
        if args.rerank:
            index = with_reranker(index, args)
        print(line, file=log, flush=True)
        t0 = time.monotonic()
        outcomes += evaluate(index, repo, runs)
        print(
            f"  {len(repo.questions)} questions x {len(runs)} searches in {time.monotonic() - t0:.1f} s",
            file=log,
        )
        used.append(repo)

    if not used:
        print("no repository to measure", file=sys.stderr)
        return 2
    by_name = {r.name: r for r in used}
    splits = [args.split] if args.split != "all" else [*SPLITS, "all"]
    result: dict[str, Any] = {
        "split": args.split,
        "disable": sorted(disable),
        "enable": sorted(enable),
        "ablate": ablate,
        "repos": {
            r.name: {"split": r.split, "language": r.language, "questions": len(r.questions)}
            for r in used
        },
        "groups": {},
        "per_repo": {},
    }
    for split in splits:
        for title, chosen in groups(outcomes, by_name, split):
            result["groups"][title] = figures(chosen)
    for r in used:
        mine = [o for o in outcomes if o.question.repo == r.name]
        result["per_repo"][r.name] = {
            s: {m: float(np.mean([o.score(s, m) for o in mine])) for m in SCORED} for s in runs
        }
    if args.json:
        result["per_question"] = [
            {
                "id": o.question.id,
                "kind": o.question.kind,
                "files": o.files,
                **{f"{s} {m}": o.score(s, m) for s in runs for m in SCORED},
            }
            for o in outcomes
        ]
        print(json.dumps(result, indent=1))
        return 0
    for split in splits:
        names = [r.name for r in used if split == "all" or r.split == split]
        print(f"\n== split {split}: {', '.join(names)}")
        for title, _ in groups(outcomes, by_name, split):
            print_block(title, result["groups"][title])
    print("\nper repository, NDCG@10 (default / text / vector):")
    for name, per in result["per_repo"].items():
        r = by_name[name]
        cells = " / ".join(f"{per[s]['NDCG@10']:.3f}" for s in MODES)
        print(f"  {name:12} {r.split:9} {r.language:11} {len(r.questions):3} questions  {cells}")
    if args.misses:
        print_misses(outcomes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
