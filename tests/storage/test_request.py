"""SearchRequest: the one search value, its JSON form, its checks, its filters."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from tests.conftest import finishes_within

from codechunkd.errors import ConfigError
from codechunkd.storage.request import MAX_FILTER_CHARS, MAX_QUERY_CHARS, MODES, SearchRequest
from codechunkd.storage.search import Filters, Mode


def test_json_round_trip_keeps_every_field() -> None:
    """to_json then from_json gives the same value, through a real JSON encoding (the
    control socket took no ``disable`` or ``enable``, which the docs said it did)."""
    req = SearchRequest(
        query="parse the config",
        k=7,
        mode="text",
        repo="/src/app",
        branch="main",
        commit="abc123",
        path="src/*.py",
        language="python",
        kind="function",
        context=True,
        stale=True,
        disable=("glue",),
        enable=("stub",),
        prefer="/src/app-worktree",
    )
    assert req == SearchRequest.from_json(json.loads(json.dumps(req.to_json())))
    # what a daemon from before them reads: no key it does not know when they are not given
    assert set(SearchRequest(query="q").to_json()).isdisjoint({"disable", "enable", "prefer"})


def test_reads_the_control_socket_document_the_cli_sends_today() -> None:
    """The CLI's socket request (cmd, lang, nulls for unset options) parses unchanged."""
    doc = {
        "cmd": "search",
        "query": "handle request",
        "k": 10,
        "repo": None,
        "branch": None,
        "commit": None,
        "path": "lib/*",
        "lang": "python",
        "kind": None,
        "mode": "hybrid",
        "context": False,
        "stale": None,
    }
    req = SearchRequest.from_json(doc)
    assert req == SearchRequest(query="handle request", path="lib/*", language="python")
    assert req.to_json()["language"] == "python"
    assert "cmd" not in req.to_json()


def test_defaults_match_the_daemon() -> None:
    """Only a query given: k 10, hybrid, no filters, no extras (what Service.search assumed)."""
    req = SearchRequest.from_json({"query": "x"})
    assert (req.k, req.mode, req.context, req.stale) == (10, "hybrid", False, False)
    assert req.filters() == Filters()


def test_filters_carry_every_filter() -> None:
    """The storage Filters get repo, branch, commit, path, language and kind."""
    req = SearchRequest.from_json(
        {"query": "q", "repo": "/r", "branch": "b", "commit": "c", "path": "*.go"}
        | {"language": "go", "kind": "method"}
    )
    assert req.filters() == Filters(
        repo="/r", branch="b", commit="c", path="*.go", language="go", kind="method"
    )


def test_modes_are_the_storage_modes() -> None:
    """The mode list repeated here (to import nothing) is the search module's enum."""
    assert set(MODES) == {m.value for m in Mode}
    assert SearchRequest(query="q", mode=Mode.VECTOR).to_json()["mode"] == "vector"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"query": ""}, "query is empty"),
        ({"query": "   "}, "query is empty"),
        ({"k": 3}, "query is empty"),
        ({"query": "q", "k": 0}, "k must be between 1 and 1000, got 0"),
        ({"query": "q", "k": 1001}, "k must be between 1 and 1000, got 1001"),
        ({"query": "q", "k": "5"}, "k must be an integer"),
        ({"query": "q", "k": True}, "k must be an integer"),
        ({"query": "q", "k": 2.5}, "k must be an integer"),
        ({"query": "q", "mode": "fuzzy"}, "unknown search mode 'fuzzy'"),
        ({"query": "q", "limit": 5}, "unknown search option 'limit'"),
        ({"query": "q", "lang": "go", "language": "rust"}, "conflicting values for language"),
        ({"query": "q", "repo": "relative/dir"}, "repo must be an absolute path"),
        ({"query": "q", "prefer": "."}, "prefer must be an absolute path"),
        ({"query": "q", "prefer": "/r\udcfe"}, "prefer is not Unicode text"),
        ({"query": "q", "disable": ["no_such_rule"]}, "unknown ranking rule 'no_such_rule'"),
        ({"query": "q", "path": ["*.py"]}, "path must be a non-empty string"),
        ({"query": "q", "context": "yes"}, "context must be true or false"),
        # a shell argument that is not UTF-8 (`search $'a\\xffb'`): a traceback from the
        # model's tokenizer, or the filter's encoding error, before
        ({"query": "a\udcffb"}, "the query is not Unicode text: it holds a byte that is not"),
        ({"query": "q", "path": "src/\udcff*"}, "path is not Unicode text"),
        ({"query": "q", "repo": "/r\udcfe"}, "repo is not Unicode text"),
    ],
)
def test_bad_values_are_one_clear_error(doc: dict[str, Any], message: str) -> None:
    """Each bad request is a ConfigError naming what is wrong, not a TypeError deep inside."""
    with pytest.raises(ConfigError, match=message):
        SearchRequest.from_json(doc)


def test_a_document_that_is_not_an_object_is_refused() -> None:
    """A JSON list or string where the request belongs is a ConfigError too."""
    with pytest.raises(ConfigError, match="is a JSON object"):
        SearchRequest.from_json(["q"])  # type: ignore[arg-type]


def test_the_same_alias_twice_with_one_value_is_fine() -> None:
    """lang and language agreeing is not a conflict."""
    assert SearchRequest.from_json({"query": "q", "lang": "go", "language": "go"}).language == "go"


def test_importing_it_loads_nothing_heavy() -> None:
    """Daemon clients build requests too: no numpy, pyarrow or LanceDB at import."""
    code = (
        "import sys\nimport codechunkd.storage.request\n"
        "print(sorted(m for m in ('numpy', 'pyarrow', 'lancedb') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"query": "x" * 20_000_000}, "the query is 20,000,000 characters; the limit is 16,000"),
        ({"query": "q", "path": "[" * 20_000}, "path is 20,000 characters; the limit is 4,096"),
        ({"query": "q", "repo": "/" + "r" * 5_000}, "repo is 5,001 characters; the limit is 4,096"),
        ({"query": "q", "kind": "k" * 4_097}, "kind is 4,097 characters; the limit is 4,096"),
    ],
)
def test_sizes_are_capped_and_the_error_does_not_echo_them(
    doc: dict[str, Any], message: str
) -> None:
    """A query or filter past its cap is refused with its length and the limit, not itself."""
    with pytest.raises(ConfigError) as caught:
        SearchRequest.from_json(doc)
    assert str(caught.value) == message
    assert (
        SearchRequest.from_json(
            {"query": "x" * MAX_QUERY_CHARS, "path": "p" * MAX_FILTER_CHARS}
        ).path
        == "p" * MAX_FILTER_CHARS
    )


@pytest.mark.parametrize(
    "doc",
    [
        {"query": "q", "k": "9" * 100_000},
        {"query": "q", "mode": "m" * 100_000},
        {"query": "q", "stale": "s" * 100_000},
        {"query": "q", "x" * 100_000: 1},
        {"query": "q", "lang": "go", "language": "l" * 1_000},
    ],
)
def test_no_error_repeats_a_large_value(doc: dict[str, Any]) -> None:
    """Every refusal quotes at most a short prefix of what it was sent."""
    with pytest.raises(ConfigError) as caught:
        SearchRequest.from_json(doc)
    assert len(str(caught.value)) < 300, str(caught.value)[:300]


def test_a_glob_is_parsed_in_linear_time() -> None:
    """200,000 unclosed ``[`` (a scan for ``]`` at each made the parse quadratic: 20,000
    took 162 s) parse at once; the deadline is a hang detector, a thousand times the need."""
    code = (
        "from codechunkd.storage.globs import path_filter\n"
        "f = path_filter('[' * 200_000 + '[a]')\n"
        'assert f.endswith("[a]$\')"), f[-40:]\n'
    )
    finishes_within(code, 120, "parsing a 200,000-character glob")
