"""Summaries: extractive ones, the versioned prompt, input selection and output hygiene."""

from __future__ import annotations

import pytest
from tests.conftest import finishes_within

from codechunkd.chunking.chunker import CountTokens, chunk
from codechunkd.config.settings import ChunkingSettings
from codechunkd.errors import BadAnswer
from codechunkd.llm.summaries import (
    PROMPT_VERSION,
    SummaryInput,
    build_messages,
    clean_summary,
    eligible,
    extractive_summary,
    llm_source,
)

SOURCE = b'''class Loader:
    """Loads things."""

    def load(self, path):
        """Read one file.

        More details here.
        """
        return open(path).read()
'''


def test_extractive_summary_is_the_first_docstring_paragraph(count_tokens: CountTokens) -> None:
    """The docstring's first paragraph, else the signature."""
    chunks = chunk("a.py", SOURCE, ChunkingSettings(), count_tokens=count_tokens)
    load = next(c for c in chunks if c.symbol == "Loader.load")
    assert extractive_summary(load) == "Read one file."


def test_source_names_model_and_prompt_version() -> None:
    """``llm:<model>@<prompt version>``."""
    assert f"llm:qwen2.5-coder:7b@{PROMPT_VERSION}" == llm_source("qwen2.5-coder:7b")


def test_small_chunks_and_prose_are_not_eligible() -> None:
    """Below the threshold, or Markdown/JSON/sections: the extractive summary suffices."""
    assert eligible(kind="function", language="python", token_count=60, min_tokens=48)
    assert not eligible(kind="function", language="python", token_count=47, min_tokens=48)
    assert not eligible(kind="section", language="markdown", token_count=500, min_tokens=48)
    assert not eligible(kind="module", language="json", token_count=500, min_tokens=48)


def test_a_method_gets_its_class_signature_as_context() -> None:
    """The prompt names the file, language, chunk and enclosing class, then the code."""
    messages = build_messages(
        SummaryInput(
            path="pkg/io.py",
            language="python",
            kind="method",
            symbol="Loader.load",
            content="def load(self, path):\n    return open(path).read()",
            context="class Loader(Base):",
        ),
        max_input_tokens=100,
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "File: pkg/io.py" in user
    assert "Chunk: method Loader.load" in user
    assert "Defined inside: class Loader(Base):" in user
    assert "return open(path).read()" in user


def test_input_is_capped_at_a_line_break() -> None:
    """Code past ``max_input_tokens`` (≈4 chars each) is cut at a line and marked."""
    content = "\n".join(f"x_{i} = {i}" for i in range(2000))
    user = build_messages(
        SummaryInput(path="a.py", language="python", kind="module", symbol="", content=content),
        max_input_tokens=50,
    )[1]["content"]
    code = user.split("```python\n", 1)[1]
    assert len(code) < 50 * 4 + 80
    assert "… (rest of the code omitted)" in code
    assert "x_0 = 0\n" in code


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("Loads a file and returns its text.", "Loads a file and returns its text."),
        (
            "Here is a summary:\nLoads a file and returns its text.",
            "Loads a file and returns its text.",
        ),
        (
            "Sure! Here's a brief summary of the method:\n\nLoads a file and returns its text.",
            "Loads a file and returns its text.",
        ),
        ("```text\nLoads a file and returns its text.\n```", "Loads a file and returns its text."),
        (
            "<think>hmm</think>Summary: Loads a `file`.  Returns **text**.",
            "Loads a file. Returns text.",
        ),
    ],
)
def test_fences_and_preambles_are_stripped(answer: str, expected: str) -> None:
    """Code fences, preambles, reasoning tags and Markdown emphasis go; the summary stays."""
    assert expected == clean_summary(answer, max_chars=600)


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "   \n ",
        "```\n```",
        "Error: model not loaded",
        "I'm sorry, but I cannot help with that request.",
        "As an AI language model, I cannot see the code.",
        "Internal Server Error",
        "Loads.",
    ],
)
def test_empty_or_error_looking_answers_are_rejected(answer: str) -> None:
    """Never stored: empty, error-looking or too-short answers."""
    with pytest.raises(BadAnswer):
        clean_summary(answer, max_chars=600)


def test_long_summaries_are_cut_at_a_sentence() -> None:
    """Past ``max_chars`` the summary ends at the last full sentence (or word) that fits."""
    text = "Loads a file from disk. " * 20
    out = clean_summary(text, max_chars=100)
    assert len(out) <= 100
    assert out.endswith("disk.")
    words = clean_summary("word " * 100, max_chars=50)
    assert len(words) <= 51
    assert words.endswith("…")


def test_a_hostile_answer_is_cleaned_in_linear_time() -> None:
    """An LLM endpoint chooses the answer: ``"Here is"`` and 2,000 line breaks took 64 s
    of CPU (holding the GIL: the daemon froze), 40,000 ``<think>`` or an unclosed fence
    of spaces grew quadratically.  200,000-character answers are cleaned at once, also
    with a ``max_chars`` so large that the cut before the patterns does not help; the
    deadline is a hang detector, far above the need."""
    code = (
        "from codechunkd.errors import BadAnswer\n"
        "from codechunkd.llm.summaries import clean_summary\n"
        "n = 200_000\n"
        "for limit in (600, 10 * n):\n"
        "    for text in ('Here is' + '\\n' * n + 'y', 'here is' + ' ' * n + 'y',\n"
        "                 '<think>' * n, '```' + ' ' * n + 'x', 'Summary' + ' ' * n):\n"
        "        try:\n"
        "            clean_summary(text, max_chars=limit)\n"
        "        except BadAnswer:\n"
        "            pass\n"
        "text = '<think>' + 'x' * n + '</think>Here is a summary: Adds two numbers.'\n"
        "assert clean_summary(text, max_chars=600) == 'Adds two numbers.'\n"
    )
    finishes_within(code, 60, "cleaning 200,000-character hostile answers")
