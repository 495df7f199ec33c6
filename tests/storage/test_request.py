"""SearchRequest: the one search value, its JSON form, its checks, its filters."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from codechunkd.errors import ConfigError
from codechunkd.storage.request import MODES, SearchRequest
from codechunkd.storage.search import Filters, Mode


def test_json_round_trip_keeps_every_field() -> None:
    """to_json then from_json gives the same value, through a real JSON encoding."""
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
    )
    assert req == SearchRequest.from_json(json.loads(json.dumps(req.to_json())))


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
        ({"query": "q", "path": ["*.py"]}, "path must be a non-empty string"),
        ({"query": "q", "context": "yes"}, "context must be true or false"),
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
