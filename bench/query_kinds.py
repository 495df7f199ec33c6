"""How code questions start, measured on text nobody on the team wrote (#17).

    .venv/bin/python bench/query_kinds.py            # coverage of search.asks_for_code
    .venv/bin/python bench/query_kinds.py --words    # + the first words behind its lists

``search.asks_for_code`` decides whether a query asks for code from how it starts.  Two
corpora stand for the two kinds of question, and neither is in bench/search_quality.py's
splits:

- code: the first sentence of every function docstring in the standard library's own
  source (tests and idlelib left out), as a user describing a function writes it;
- docs: the first sentence of every section of the READMEs shipped as package metadata
  (``*.dist-info/METADATA`` in this virtualenv and the system's), as documentation speaks;
  sections are cut as search_quality.py cuts the projects' docs.

It prints the share of each that ``asks_for_code`` takes for a code question.  With
``--words``, the first words that start at least ``--min`` docstrings, are not yet taken
for code, and start no README sentence: the source of ``_CODE_VERBS``' last lines and of
``_CODE_OPENERS`` (nouns and adverbs among them went to the openers, verbs to the verbs;
auxiliaries, articles and words that read as doc prose, such as "use" or "import", were
left out by hand).
"""

from __future__ import annotations

import argparse
import ast
import email
import re
import sys
import sysconfig
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from codechunkd.storage.search import _is_code_verb, asks_for_code

sys.path.insert(0, str(Path(__file__).parent))
from retrieval import first_sentence
from search_quality import strip_doc_sentences

METADATA_GLOBS = (
    str(Path(sys.prefix) / "lib/python3*/site-packages/*.dist-info/METADATA"),
    "/usr/lib/python3/dist-packages/*.dist-info/METADATA",
)


def docstring_sentences(root: Path) -> Iterator[str]:
    """First sentences of the function docstrings under ``root`` (tests, idlelib left out)."""
    for path in sorted(root.rglob("*.py")):
        if {"test", "tests", "idlelib", "site-packages"} & set(path.parts):
            continue
        try:
            tree = ast.parse(path.read_text("utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc:
                    yield first_sentence(" ".join(doc.split()))


def readme_sentences() -> Iterator[str]:
    """First sentences of the sections of the READMEs in installed packages' metadata."""
    seen: set[str] = set()
    for pattern in METADATA_GLOBS:
        for meta in sorted(Path("/").glob(pattern.lstrip("/"))):
            if meta.parent.name.split("-")[0].lower() in seen:
                continue
            seen.add(meta.parent.name.split("-")[0].lower())
            body = email.message_from_string(meta.read_text("utf-8", "replace")).get_payload()
            if isinstance(body, str):
                yield from (s for s, _, _ in strip_doc_sentences(body)[1])


def first_word(text: str) -> str:
    words = re.findall(r"[a-z]+", text.lower())
    return words[0] if words else ""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--words", action="store_true", help="list the candidate first words")
    ap.add_argument("--min", type=int, default=5, help="docstrings a listed word starts")
    args = ap.parse_args(argv)
    code = list(docstring_sentences(Path(sysconfig.get_paths()["stdlib"])))
    docs = list(readme_sentences())
    for name, sentences in (("stdlib function docstrings", code), ("README sections", docs)):
        taken = sum(map(asks_for_code, sentences))
        print(
            f"{name:28} {len(sentences):6} first sentences; asks_for_code: "
            f"{taken / max(1, len(sentences)):.1%}"
        )
    if args.words:
        starts_code = Counter(map(first_word, code))
        starts_doc = Counter(map(first_word, docs))
        print(f"\nfirst words of >= {args.min} docstrings and no README sentence, not yet taken:")
        for word, n in starts_code.most_common():
            if n < args.min:
                break
            if word and not starts_doc[word] and not asks_for_code(word.capitalize() + " x"):
                kind = "verb form" if _is_code_verb(word) else ""
                print(f"  {word:16} {n:5} {kind}")


if __name__ == "__main__":
    main()
