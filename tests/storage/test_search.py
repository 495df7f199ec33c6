"""Search over a real index of real code: hybrid ranking, filters, context, staleness."""

from __future__ import annotations

import os
import shutil
import sysconfig
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.conftest import Indexer, Repo, scaled

from codechunkd.storage.fusion import TEXT_WEIGHT, VECTOR_WEIGHT
from codechunkd.storage.reader import Index
from codechunkd.storage.search import GLUE_KINDS, GLUE_WEIGHT, PROSE_WEIGHT, Mode

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ["fnmatch.py", "shlex.py", "textwrap.py", "base64.py"]

# (query, symbol of the chunk that answers it): paraphrases and exact names.
LABELLED = [
    ("remove common leading whitespace from every line", "dedent"),
    ("escape a string so it is safe to use in a shell command line", "quote"),
    ("split a string into tokens like a unix shell would", "split"),
    ("translate a shell wildcard pattern into a regular expression", "translate"),
    ("add a prefix to the beginning of selected lines", "indent"),
    ("collapse and truncate text to fit in the given width", "shorten"),
    ("b85decode", "b85decode"),
    ("urlsafe_b64encode", "urlsafe_b64encode"),
    ("fnmatchcase", "fnmatchcase"),
    ("TextWrapper._handle_long_word", "TextWrapper._handle_long_word"),
    ("decode base32 data casefold map01", "b32decode"),
    ("shlex push_source", "shlex.push_source"),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, embedder) -> Index:  # type: ignore[no-untyped-def]
    from codechunkd.config import load_settings

    root = tmp_path_factory.mktemp("search")
    repo = Repo(root / "repo")
    for name in FILES:
        shutil.copyfile(STDLIB / name, repo.path / name)
    repo.write("docs/guide.md", "# Guide\n\n## Quoting\n\nUse shlex.quote for shell strings.\n")
    repo.commit("stdlib sample")
    settings = load_settings(env={}, overrides={"index.dir": str(root / "index")})
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    ix.close()
    index = Index(ix.store, settings, embedder)
    index.repo = repo  # type: ignore[attr-defined]
    return index


def _mrr(index: Index, mode: Mode) -> float:
    total = 0.0
    for query, symbol in LABELLED:
        hits = index.search(query, k=10, mode=mode)
        ranks = [i for i, h in enumerate(hits) if h.symbol == symbol]
        total += 1.0 / (ranks[0] + 1) if ranks else 0.0
    return total / len(LABELLED)


def test_hybrid_beats_vector_and_text_alone(index: Index) -> None:
    """On the labelled queries, hybrid search has a higher MRR than vector or text alone."""
    hybrid, vector, text = (_mrr(index, m) for m in (Mode.HYBRID, Mode.VECTOR, Mode.TEXT))
    assert hybrid > vector, (hybrid, vector, text)
    assert hybrid > text, (hybrid, vector, text)


def test_a_retrievers_score_shares_are_weighted_in_the_fusion(index: Index) -> None:
    """With the ranking rules off, a hit's score in text mode is TEXT_WEIGHT times its BM25
    score over the best one's, and in vector mode VECTOR_WEIGHT times where its cosine sits
    between the candidates' worst and best: the first hit scores the weight, the others
    less, by how far behind they are (not by their place)."""
    query = "translate a shell wildcard pattern into a regular expression"
    rules = ["glue", "prose", "symbol", "test_prior", "file_coherence", "file_saturation"]
    for mode, weight in ((Mode.TEXT, TEXT_WEIGHT), (Mode.VECTOR, VECTOR_WEIGHT)):
        hits = index.search(query, k=10, mode=mode, disable=rules)
        assert len(hits) >= 5, mode
        assert hits[0].score == pytest.approx(weight, abs=1e-5), mode
        assert all(0 <= h.score <= weight + 1e-5 for h in hits), mode
    # the vector shares are the cosines, rescaled: computed here from the table
    vector = index.embedder.embed([query])[0]
    vector = vector / np.linalg.norm(vector)
    table = index.store.select("synthetic = false", ["id", "vector"])
    cos = {
        r["id"]: float(np.asarray(r["vector"]) @ vector / np.linalg.norm(r["vector"]))
        for r in table
    }
    hits = index.search(query, k=10, mode=Mode.VECTOR, disable=rules)
    top, second = hits[0], hits[1]
    slope = (top.score - second.score) / (cos[top.id] - cos[second.id])
    assert slope > 0
    for h in hits:
        assert h.score == pytest.approx(top.score - slope * (cos[top.id] - cos[h.id]), abs=2e-3)


def test_a_query_naming_a_function_finds_it_first(index: Index) -> None:
    """A query that names a function or method ranks it first."""
    for name in ("b85decode", "fnmatchcase", "dedent", "TextWrapper.wrap"):
        assert index.search(name, k=3)[0].symbol == name


def test_glue_scores_are_scaled_by_the_glue_weight(index: Index) -> None:
    """Module glue chunks score GLUE_WEIGHT of what they score with the glue rule off, so at
    most GLUE_WEIGHT of the best fused score, while a definition keeps its score."""
    query = "module imports, constants and the __all__ list"
    after = ["file_saturation", "file_coherence", "test_prior"]  # rules that look at the other hits
    on = {h.id: h for h in index.search(query, k=30, disable=after)}
    off = {h.id: h for h in index.search(query, k=30, disable=[*after, "glue"])}
    glue = [rid for rid, h in on.items() if h.kind in GLUE_KINDS and rid in off]
    defs = [rid for rid, h in on.items() if h.kind == "function" and rid in off]
    assert glue and defs, [h.kind for h in on.values()]  # the query reaches both
    for rid in glue:
        assert on[rid].score == pytest.approx(GLUE_WEIGHT * off[rid].score, abs=2e-5), rid
        assert on[rid].score <= GLUE_WEIGHT * (VECTOR_WEIGHT + TEXT_WEIGHT) + 1e-5
    assert all(on[rid].score == pytest.approx(off[rid].score, abs=1e-5) for rid in defs)


def test_a_question_about_the_code_weighs_the_docs_below_it(index: Index) -> None:
    """A question about what the code does ("how are …", "where is …") is a code question:
    a docs section scores PROSE_WEIGHT of what it scores with the ``questions`` rule off, the
    code the same; "how do I …" asks for the docs, which keep their score."""
    after = ["file_saturation", "file_coherence", "test_prior"]  # rules that look at the other hits

    def scores(query: str, *off: str) -> dict[str, tuple[str, float]]:
        hits = index.search(query, k=30, disable=[*after, *off])
        return {h.id: (h.language, h.score) for h in hits}

    for query in ("how are strings quoted for a shell", "where is a string quoted for a shell"):
        on, off = scores(query), scores(query, "questions")
        docs = [rid for rid, (language, _) in on.items() if language == "markdown" and rid in off]
        code = [rid for rid, (language, _) in on.items() if language == "python" and rid in off]
        assert docs and code, query  # the query reaches both
        for rid in docs:
            assert on[rid][1] == pytest.approx(PROSE_WEIGHT * off[rid][1], abs=2e-5), query
        assert all(on[rid][1] == pytest.approx(off[rid][1], abs=1e-5) for rid in code), query
    asked = "how do I quote strings for a shell"
    on, off = scores(asked), scores(asked, "questions")
    assert any(language == "markdown" for language, _ in on.values())
    assert on.keys() == off.keys()
    assert all(on[rid][1] == pytest.approx(off[rid][1], abs=1e-5) for rid in on)


def test_full_text_matches_the_words_of_the_context_header(index: Index) -> None:
    """Full-text search matches words found only in a chunk's context header (its file)."""
    # "in file textwrap.py" is only in the header of most textwrap chunks
    hits = index.search("textwrap", k=50, mode=Mode.TEXT)
    assert any(
        h.path == "textwrap.py" and "textwrap" not in (h.content + h.symbol).lower() for h in hits
    ), [h.symbol for h in hits]


def test_filters(index: Index) -> None:
    """Path, kind, language, branch and repo filters keep only matching hits."""
    hits = index.search("decode", k=20, path="base64*", kind="function")
    assert hits and all(h.path == "base64.py" and h.kind == "function" for h in hits)
    assert all(h.language == "markdown" for h in index.search("quoting", k=5, language="markdown"))
    assert index.search("decode", k=5, branch="no-such-branch") == []
    repo_root = str(index.repo.path.resolve())  # type: ignore[attr-defined]
    assert index.search("decode", k=3, repo=repo_root)
    assert index.search("decode", k=3, repo="/elsewhere") == []


def test_context_adds_enclosing_class_signature(index: Index) -> None:
    """``context=True`` adds the enclosing class's signature to a method hit; the module
    around it, which has no name or signature, is not named by the bare word ``module``."""
    hit = next(
        h
        for h in index.search("TextWrapper._wrap_chunks", k=5, context=True)
        if h.symbol == "TextWrapper._wrap_chunks"
    )
    assert hit.context == ("class TextWrapper",)


def test_stale_flag_when_file_changed_on_disk(index: Index) -> None:
    """``stale=True`` flags hits whose file changed on disk since it was indexed."""
    repo = index.repo  # type: ignore[attr-defined]
    assert not any(h.stale for h in index.search("dedent", k=3, stale=True))
    original = (repo.path / "textwrap.py").read_text()
    try:
        (repo.path / "textwrap.py").write_text(original + "\n# edited\n")
        hits = index.search("dedent", k=3, stale=True)
        assert any(h.stale and h.path == "textwrap.py" for h in hits)
    finally:
        (repo.path / "textwrap.py").write_text(original)


@pytest.mark.parametrize("replacement", ["fifo", "symlink to a fifo outside"])
def test_stale_reads_neither_a_fifo_nor_through_a_symlink(
    index: Index, tmp_path: Path, replacement: str
) -> None:
    """A file replaced by a FIFO, or by a symlink to one outside the tree, is flagged stale
    without blocking the search: the file is read as the indexer reads it (``open`` of a
    FIFO blocked ``search --stale`` for good, and a symlink was followed out of the tree)."""
    repo = index.repo  # type: ignore[attr-defined]
    path = repo.path / "textwrap.py"
    original = path.read_text()
    fifo = path if replacement == "fifo" else tmp_path / "outside.fifo"
    path.unlink()
    os.mkfifo(fifo)
    if fifo != path:
        path.symlink_to(fifo)
    found: list[list[Any]] = []
    search = threading.Thread(
        target=lambda: found.append(index.search("dedent", k=3, stale=True)), daemon=True
    )
    try:
        search.start()
        search.join(scaled(120))  # a hang detector: the search reads nothing that blocks
        assert found, "search --stale blocked on the FIFO"
        assert any(h.stale and h.path == "textwrap.py" for h in found[0])
    finally:
        if search.is_alive():  # let a blocked open() return
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            search.join()
        path.unlink()
        path.write_text(original)


def test_reader_api_rows_get_children_file(index: Index) -> None:
    """The reader API's file, children, get, rows and sources return the indexed rows
    in order."""
    rows = index.file("textwrap.py")
    assert rows and rows == sorted(
        rows, key=lambda r: (r.repo, r.start_byte, not r.synthetic, r.end_byte)
    )
    cls = next(r for r in rows if r.symbol == "TextWrapper" and r.kind == "class")
    children = index.children(cls.id)
    assert {"TextWrapper.wrap", "TextWrapper.fill"} <= {c.symbol for c in children}
    assert index.get(cls.id) == cls
    assert index.get("nope") is None
    assert {r.path for r in index.rows(path="*.md")} == {"docs/guide.md"}
    assert len(index.sources()) == 1


def test_a_code_question_ranks_the_code_above_the_docs_that_describe_it(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    """A question asking for code ranks the function above a docs section that paraphrases
    it; a question about installing, or a search limited to sections, still finds the docs."""
    from codechunkd.config import load_settings

    repo = Repo(tmp_path / "repo")
    repo.write(
        "shellquote.py",
        "import re\n\n_find_unsafe = re.compile(r'[^\\w@%+=:,./-]').search\n\n\n"
        "def quote(s):\n    # safe for a shell\n    if not s:\n        return \"''\"\n"
        "    if _find_unsafe(s) is None:\n"
        '        return s\n    return "\'" + s.replace("\'", "\'\\"\'\\"\'") + "\'"\n',
    )
    repo.write(
        "docs/usage.md",
        "# Usage\n\n## Quoting\n\nCall quote(s) to make a string safe for a shell: it returns "
        "the string in single quotes.\n\n"
        "## Installing\n\nInstall the package with pip install shellquote.\n",
    )
    repo.commit("init")
    settings = load_settings(env={}, overrides={"index.dir": str(tmp_path / "index")})
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    ix.close()
    index = Index(ix.store, settings, embedder)
    hits = index.search("escape a string so it is safe to use in a shell command line", k=3)
    assert hits[0].symbol == "quote", [(h.path, h.symbol) for h in hits]
    hits = index.search("how do I install it with pip", k=3)
    assert hits[0].path == "docs/usage.md", [(h.path, h.symbol) for h in hits]
    hits = index.search("escape a string for a shell", k=3, kind="section")
    assert hits and hits[0].path == "docs/usage.md"
