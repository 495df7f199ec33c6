"""Search over a real index of real code: hybrid ranking, filters, context, staleness."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import pytest
from tests.conftest import Indexer, Repo

from codechunkd.storage.reader import Index
from codechunkd.storage.search import GLUE_KINDS, GLUE_WEIGHT, RRF_K, TEXT_WEIGHT, Mode

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


def test_the_text_ranking_counts_text_weight_in_the_fusion(index: Index) -> None:
    """In text mode a definition at rank r of the full-text ranking scores
    TEXT_WEIGHT / (RRF_K + r + 1), in vector mode 1 / (RRF_K + r + 1): the text ranking's
    weight is applied to it, not to the vector ranking (the ranking stage's rules, which
    scale scores after the fusion, off)."""
    query = "translate a shell wildcard pattern into a regular expression"
    after_fusion = ["test_prior", "file_saturation", "symbol_in_query"]
    for mode, weight in ((Mode.TEXT, TEXT_WEIGHT), (Mode.VECTOR, 1.0)):
        hits = index.search(query, k=10, mode=mode, disable=after_fusion)
        defs = [h for h in hits if h.kind == "function" and h.language == "python"]
        assert len(defs) >= 3, (mode, [(h.kind, h.symbol) for h in hits])
        places = [weight / h.score - RRF_K - 1 for h in defs]  # r, when weighted so
        assert all(abs(r - round(r)) < 0.1 and r > -0.1 for r in places), (mode, places)


def test_a_query_naming_a_function_finds_it_first(index: Index) -> None:
    """A query that names a function or method ranks it first."""
    for name in ("b85decode", "fnmatchcase", "dedent", "TextWrapper.wrap"):
        assert index.search(name, k=3)[0].symbol == name


def test_glue_scores_are_scaled_below_any_definition_of_the_same_ranks(index: Index) -> None:
    """Module glue chunks score at most GLUE_WEIGHT of the best fused score, below a
    definition."""
    hits = index.search("module imports, constants and the __all__ list", k=30)
    glue = [h for h in hits if h.kind in GLUE_KINDS]
    assert glue, [h.kind for h in hits]  # the query does reach module code
    # first in both rankings is the best a chunk can do; glue gets GLUE_WEIGHT of it
    assert all(h.score <= GLUE_WEIGHT * (1 + TEXT_WEIGHT) / (RRF_K + 1) + 1e-5 for h in glue)
    assert any(h.kind == "function" and h.score > max(g.score for g in glue) for h in hits)


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
    """``context=True`` adds the enclosing class's signature to a method hit."""
    hit = next(
        h
        for h in index.search("TextWrapper._wrap_chunks", k=5, context=True)
        if h.symbol == "TextWrapper._wrap_chunks"
    )
    assert any("class TextWrapper" in c for c in hit.context)


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
