"""bench/questions.py: its file-level metrics on hand-made rankings, and its question files."""

from __future__ import annotations

import importlib.util
import math
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).parent.parent / "bench"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_questions", BENCH / "questions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        # the bench puts bench/ first on sys.path (for its siblings), where bench/mcp.py
        # would shadow the MCP SDK for every later test
        sys.path[:] = path
    return module


Q = _load()


def test_files_keep_the_rank_of_their_first_chunk() -> None:
    """Hits reduce to distinct files in the order of each file's first hit."""
    assert Q.files_in_order(["a", "a", "b", "a", "c", "b"]) == ["a", "b", "c"]


def test_ndcg_is_one_for_the_ideal_order_and_graded_otherwise() -> None:
    """Ideal order scores 1; the answer (grade 2) below a related file (1) scores less;
    no judged file scores 0; gains are 2^grade - 1 with a log2 discount."""
    rel = {"answer.py": 2, "related.py": 1}
    assert Q.ndcg(["answer.py", "related.py", "x.py"], rel) == 1.0
    swapped = Q.ndcg(["related.py", "answer.py"], rel)
    ideal = 3 + 1 / math.log2(3)
    assert math.isclose((1 + 3 / math.log2(3)) / ideal, swapped)
    assert Q.ndcg(["x.py", "y.py"], rel) == 0.0
    # past the cut-off a file counts for nothing
    assert Q.ndcg([f"f{i}" for i in range(10)] + ["answer.py"], rel) == 0.0


def test_recall_at_5_counts_judged_files_over_at_most_five() -> None:
    """R@5: judged files among the first 5 files, over min(5, judged)."""
    rel = {"a": 2, "b": 1}
    assert Q.recall(["a", "x", "y", "z", "w", "b"], rel) == 0.5
    assert Q.recall(["x", "b", "a"], rel) == 1.0
    many = {f"f{i}": 1 for i in range(8)} | {"f0": 2}
    assert Q.recall([f"f{i}" for i in range(5)], many) == 1.0


def test_mrr_is_the_reciprocal_rank_of_the_first_judged_file() -> None:
    """MRR@10 over distinct files; any grade counts; nothing in 10 scores 0."""
    rel = {"a": 2, "b": 1}
    assert Q.mrr(["x", "y", "b", "a"], rel) == 1.0 / 3
    assert Q.mrr([f"f{i}" for i in range(10)] + ["a"], rel) == 0.0


def test_interval_brackets_the_mean_and_is_deterministic() -> None:
    """The bootstrap interval holds the mean, and the same values give the same interval."""
    values = [0.0, 1.0, 0.5, 1.0, 0.25, 0.75]
    m, lo, hi = Q.interval(values)
    assert lo <= m <= hi
    assert (m, lo, hi) == Q.interval(values)


def test_question_files_are_well_formed_and_split_by_repository() -> None:
    """Every question file loads (kinds, grades with a 2 in each); both splits hold all three
    kinds, at least two languages each and half the questions give or take a fifth."""
    repos = Q.load_repos()
    total = sum(len(r.questions) for r in repos)
    assert total >= 150
    for split in Q.SPLITS:
        mine = [r for r in repos if r.split == split]
        kinds = Counter(q.kind for r in mine for q in r.questions)
        assert set(Q.KINDS) == set(kinds)
        assert len({r.language for r in mine}) >= 2
        assert 0.3 * total <= sum(kinds.values()) <= 0.7 * total
    ids = [q.id for r in repos for q in r.questions]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("name", [p.stem for p in sorted((BENCH / "questions").glob("*.toml"))])
def test_judged_files_exist_in_the_corpus(name: str) -> None:
    """Each judged path is a file of its corpus (where the corpus is on this machine)."""
    repo = Q.load_repo(BENCH / "questions" / f"{name}.toml")
    if not repo.root.is_dir():
        pytest.skip(f"no corpus at {repo.root}")
    assert Q.check_judgements(repo, repo.files()) == []


class _RecordingIndex:
    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def search(self, text: str, **options: object) -> list[object]:
        self.calls.append(options)
        return []


def test_rules_switched_off_reach_the_search_by_name() -> None:
    """``--disable`` goes to every search and ``--ablate`` adds default search with each rule
    off; with none, the search gets no ``disable`` at all (today's API)."""
    runs = Q.searches(frozenset({"a"}), ["b"])
    assert list(runs) == ["default", "text", "vector", "without b"]
    index = _RecordingIndex()
    for options in runs.values():
        Q.run_query(index, "q", options)
    assert index.calls[0] == {"k": 10, "mode": "hybrid", "disable": ["a"]}
    assert index.calls[-1] == {"k": 10, "mode": "hybrid", "disable": ["a", "b"]}
    plain = _RecordingIndex()
    Q.run_query(plain, "q", Q.searches(frozenset(), [])["text"])
    assert plain.calls == [{"k": 10, "mode": "text"}]


def test_pooled_windows_read_a_long_text_past_the_models_window(embedder) -> None:  # type: ignore[no-untyped-def]
    """``--windows``: a text that fits the model's window keeps the model's vector; a long
    one gets the normalised mean of its windows' vectors, each window a text of its own, so
    its vector moves towards what its tail says (the head alone cannot see it)."""
    from codechunkd.config import load_settings

    pooled = Q.PooledWindows(embedder, 3, load_settings(env={}).embedding)
    assert pooled.model_id == f"{embedder.model_id}/windows3"  # never mixed in one cache
    head = "def load_rows(stream):\n" + "".join(f"    row_{i} = stream.read()\n" for i in range(60))
    tail = "".join(f"    send_email_to_customer(address_{i}, invoice)\n" for i in range(60))
    short, long = pooled.embed(["parse a header line", head + tail])
    assert float(short @ embedder.embed(["parse a header line"])[0]) == pytest.approx(1, abs=1e-5)
    whole = embedder.embed([head + tail])[0]  # the model alone: the head only
    question = embedder.embed(["email the invoice to the customer"])[0]
    assert float(question @ long) > float(question @ whole) + 0.05
    assert float(long @ long) == pytest.approx(1, abs=1e-5)


def test_published_takes_every_file_of_a_package_folder_only(tmp_path: Path) -> None:
    """``--published`` indexes a package's whole folder (builds beside the judged sources);
    a corpus rooted in the standard library or site-packages is no package and is refused."""
    pkg = tmp_path / "pkg"
    (pkg / "src").mkdir(parents=True)
    (pkg / "dist").mkdir()
    for rel in ("package.json", "src/a.ts", "dist/a.js", "dist/a.js.map"):
        (pkg / rel).write_text("{}")
    where = {"code_cache": str(tmp_path), "stdlib": str(tmp_path / "lib")}
    spec = tmp_path / "pkg.toml"
    spec.write_text(
        'name = "pkg"\nsplit = "tune"\nlanguage = "typescript"\nroot = "{code_cache}/pkg"\n'
        'include = ["src/**/*.ts"]\n'
    )
    repo = Q.load_repo(spec, where)
    assert repo.files() == ["src/a.ts"]
    assert Q.published(repo).files() == ["dist/a.js", "dist/a.js.map", "package.json", "src/a.ts"]
    spec.write_text(spec.read_text().replace("{code_cache}/pkg", "{stdlib}"))
    assert Q.published(Q.load_repo(spec, where)) is None
    assert Q._overrides(None, keep_generated=True) == {"files.skip_generated": False}


def test_a_reranker_that_fails_stops_the_bench(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """``--rerank``: default search is ordered by the server; a failure is an error, not
    figures of the search without the reranker under default search's name."""
    import argparse

    from tests.conftest import index_of
    from tests.rerank_server import RerankServer

    index = index_of(
        tmp_path, {"a.py": "def parse(x):\n    return x\n", "b.py": "# zebra\nY = 1\n"}, embedder
    )
    with RerankServer(word="zebra") as server:
        args = argparse.Namespace(
            rerank=server.url,
            rerank_model="m",
            rerank_protocol="cohere",
            rerank_key_env="",
            rerank_depth=30,
        )
        reranked = Q.with_reranker(index, args)
        default = Q.searches(frozenset(), [])["default"]
        assert Q.run_query(index, "parse", default)[0].path == "a.py"
        assert Q.run_query(reranked, "parse", default)[0].path == "b.py"
        server.answer = lambda body: (500, b"{}")
        with pytest.raises(RuntimeError, match="ranked without the reranker"):
            Q.run_query(reranked, "parse", default)


def test_the_oracle_reranker_scores_candidates_by_their_judged_grade() -> None:
    """``--rerank oracle``: a server on 127.0.0.1 that answers each candidate (its path on
    the first line, as search sends it) with its file's grade for the question."""
    from codechunkd.config.settings import RerankSettings
    from codechunkd.llm.rerank import Reranker

    question = Q.Question("r-1", "r", "semantic", "where is x", {"a.py": 2, "b.py": 1})
    repo = Q.Repo("r", "tune", "python", Path("."), (), None, "", "", (), (question,))
    oracle = Q.OracleReranker([repo])
    try:
        reranker = Reranker(RerankSettings(url=oracle.url, model="oracle"))
        docs = ["b.py\ndef y(): ...", "c.py\nz = 1", "a.py\ndef x(): ..."]
        assert reranker.scores("where is x", docs) == [1.0, 0.0, 2.0]
    finally:
        oracle.close()
