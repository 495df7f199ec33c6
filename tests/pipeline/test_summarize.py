"""LLM summaries end to end: real repos, real LanceDB, a real chat-completions server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.chat_server import MODEL, Action, ChatServer, closed_port_url, error
from tests.conftest import Indexer, Repo, scaled

from codechunkd import cli
from codechunkd.config import Settings, load_settings
from codechunkd.config.settings import SummarySettings
from codechunkd.git.changes import GitSource
from codechunkd.llm.client import ChatClient
from codechunkd.llm.summaries import PROMPT_VERSION, llm_source
from codechunkd.pipeline.summarize import (
    Budget,
    Summarizer,
    disabled_reason,
)
from codechunkd.pipeline.sync import Syncer
from codechunkd.storage.cache import SummaryCache
from codechunkd.storage.fulltext import code_words, fts_text, fts_text_with_summary
from codechunkd.storage.search import Mode, Searcher

SOURCE = llm_source(MODEL)

APP = '''"""A tiny application."""

import json


class Store:
    """Keeps records in memory and on disk."""

    def __init__(self, path):
        self.path = path
        self.records = {}

    def save(self, key, value):
        """Save one record under a key and flush every record to disk."""
        self.records[key] = value
        with open(self.path, "w") as fh:
            json.dump(self.records, fh, indent=2, sort_keys=True)


def parse_config(text):
    """Parse a configuration text into a dict of settings."""
    out = {}
    for line in text.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def render_report(rows):
    """Render rows as an aligned plain-text report."""
    width = max(len(str(r)) for r in rows)
    lines = [str(r).rjust(width) for r in rows]
    return "\\n".join(lines)


def tiny():
    return 1
'''

README = "# App\n\nA tiny application that keeps records and renders reports for people.\n"

EXPECTED = {"Store.save", "parse_config", "render_report"}
N = len(EXPECTED)


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


def summary_overrides(url: str, **kw: object) -> dict[str, object]:
    values: dict[str, object] = {
        "summaries.url": url,
        "summaries.model": MODEL,
        "summaries.min_tokens": 70,  # save/parse_config/render_report are 80+, the rest under 60
        "summaries.retries": 0,
        "summaries.requests_per_minute": 0,
        "summaries.concurrency": 1,
        "summaries.timeout": 5.0,
    }
    values.update({f"summaries.{k}": v for k, v in kw.items()})
    return values


@pytest.fixture
def settings(index_dir: Path, chat: ChatServer) -> Settings:
    """The test settings with the chat server configured (the ``indexer`` fixture uses them)."""
    return load_settings(
        env={}, overrides={"index.dir": str(index_dir), **summary_overrides(chat.url)}
    )


class Clock:
    """Injected time for back-off: ``now`` moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.day = "2026-01-01"

    def __call__(self) -> float:
        return self.now


MakeSummarizer = Callable[..., Summarizer]


@pytest.fixture
def make(indexer: Indexer, settings: Settings) -> Iterator[MakeSummarizer]:
    """Builds summarizers over the indexer's store (and closes their caches)."""
    caches: list[SummaryCache] = []
    clock = Clock()

    def build(url: str | None = None, **kw: object) -> Summarizer:
        s = settings
        if url is not None or kw:
            s = load_settings(
                env={},
                overrides={
                    "index.dir": settings.index.dir,
                    **summary_overrides(url or settings.summaries.url, **kw),
                },
            )
        cache = SummaryCache(indexer.paths.cache)
        caches.append(cache)
        client = ChatClient(s.summaries, backoff=0.001)
        return Summarizer(s, indexer.store, cache, client, clock=clock, today=lambda: clock.day)

    build.clock = clock  # type: ignore[attr-defined]
    yield build
    for c in caches:
        c.close()
    if indexer.syncer.summaries is not None:
        indexer.syncer.summaries.close()


def rows(ix: Indexer) -> dict[str, dict[str, Any]]:
    cols = [
        "id",
        "symbol",
        "kind",
        "summary",
        "summary_source",
        "summary_of",
        "content_hash",
        "fts_text",
        "content",
    ]
    out = {}
    for r in ix.store.select(None, cols):
        key = r["symbol"] or r["id"]
        out[key + "#block" if r["kind"] == "block" else key] = r
    return out


def llm_symbols(ix: Indexer) -> set[str]:
    return {s for s, r in rows(ix).items() if r["summary_source"] == SOURCE}


def index(repo: Repo, ix: Indexer) -> None:
    ix.sync(repo.path)


def test_stale_chunks_are_summarized_written_and_searchable(
    repo: Repo, indexer: Indexer, chat: ChatServer, make: MakeSummarizer, embedder: Any
) -> None:
    """A run summarizes exactly the eligible chunks; the summaries are in the table and found."""
    repo.write("app.py", APP)
    repo.write("README.md", README)
    repo.commit()
    index(repo, indexer)
    s = make()
    before = {r: v["summary_source"] for r, v in rows(indexer).items()}
    assert {"extractive"} == set(before.values())
    assert len(EXPECTED) == s.backlog()

    run = s.run_once()

    assert (run.stale, run.requested, run.written, run.backlog, run.failed) == (N, N, N, 0, 0)
    assert run.tokens > 0
    assert llm_symbols(indexer) == EXPECTED
    assert indexer.store.unindexed() == (0, 0)  # the full-text index covers the rewritten rows
    table = rows(indexer)
    for sym in EXPECTED:
        r = table[sym]
        assert r["summary_of"] == r["content_hash"]
        assert r["summary"].startswith(f"The {r['kind']} {sym} does")
        assert "Here is a summary" not in r["summary"]
        assert r["fts_text"].split("\n", 2)[1] == r["summary"]
        assert r["fts_text"].endswith(f"{r['content']}\n{code_words(r['content'])}")
    assert table["tiny"]["summary_source"] == "extractive"
    # the method's prompt had its class's signature as context
    save_prompt = next(x.prompt for x in chat.seen if "Chunk: method Store.save" in x.prompt)
    assert "Defined inside: class Store\n" in save_prompt
    # full-text search finds the summary's words, hybrid search too
    marker = table["render_report"]["summary"].split("marker ")[1].rstrip(".")
    hits = Searcher(indexer.store).search(marker, None, mode=Mode.TEXT, k=3)
    assert [h.symbol for h in hits][:1] == ["render_report"]
    from codechunkd.storage.reader import open_index

    hybrid = open_index(settings=s_settings(indexer), embedder=embedder).search(marker, k=3)
    assert hybrid[0].symbol == "render_report"
    # nothing is stale now: the next run sends nothing
    again = s.run_once()
    assert (again.stale, again.requested, again.written) == (0, 0, 0)
    assert chat.requests == N


def s_settings(ix: Indexer) -> Settings:
    return load_settings(env={}, overrides={"index.dir": ix.paths.uri})


def test_editing_one_function_makes_exactly_it_stale(
    repo: Repo, indexer: Indexer, chat: ChatServer, make: MakeSummarizer
) -> None:
    """After an edit only the edited chunk is stale; the next run replaces exactly it."""
    repo.write("app.py", APP)
    repo.commit()
    index(repo, indexer)
    s = make()
    s.run_once()
    old = rows(indexer)

    repo.write(
        "app.py",
        APP.replace("out[key.strip()] = value.strip()", "out[key.strip().lower()] = value.strip()"),
    )
    index(repo, indexer)

    assert EXPECTED - {"parse_config"} == llm_symbols(indexer)
    assert s.backlog() == 1
    (stale,) = s.stale()
    assert stale["id"] == rows(indexer)["parse_config"]["id"]
    sent = chat.requests

    run = s.run_once()

    assert (run.stale, run.requested, run.written, run.backlog) == (1, 1, 1, 0)
    s.run_once()  # an idle run: last_run shows it, last_active_run the replacement
    status = s.status(refresh=True)
    assert (
        status["last_run"]["written"],
        status["backlog"],
        status["last_active_run"]["written"],
        status["last_active_run"]["backlog"],
    ) == (0, 0, 1, 0)
    assert sent + 1 == chat.requests
    assert "Chunk: function parse_config" in chat.seen[-1].prompt
    new = rows(indexer)
    assert llm_symbols(indexer) == EXPECTED
    changed = {sym for sym in EXPECTED if new[sym]["summary"] != old[sym]["summary"]}
    assert {"parse_config"} == changed


def test_branch_switch_back_sends_zero_requests(
    repo: Repo, indexer: Indexer, chat: ChatServer, make: MakeSummarizer
) -> None:
    """Summaries are keyed by content: going back to a branch reuses every one of them."""
    repo.write("app.py", APP)
    repo.commit()
    index(repo, indexer)
    s = make()
    s.run_once()
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("app.py", APP.replace("width = max(", "width = 2 + max("))
    repo.commit("feature")
    index(repo, indexer)
    assert s.run_once().requested == 1
    sent = chat.requests

    repo.git("checkout", "-q", "main")
    index(repo, indexer)

    assert llm_symbols(indexer) == EXPECTED  # written with their cached summaries
    assert s.backlog() == 0
    run = s.run_once()
    assert (run.requested, run.backlog) == (0, 0)
    assert sent == chat.requests


def test_rows_written_without_summaries_reuse_the_cache(
    repo: Repo, indexer: Indexer, chat: ChatServer, make: MakeSummarizer, embedder: Any
) -> None:
    """Rows another writer wrote extractive (e.g. a second source) take cached summaries."""
    repo.write("app.py", APP)
    repo.commit()
    index(repo, indexer)
    make().run_once()
    plain = load_settings(env={}, overrides={"index.dir": indexer.paths.uri})
    other = Repo(repo.path.parent / "other")
    other.write("app.py", APP)
    other.commit()
    Syncer(plain, indexer.store, embedder, indexer.cache).sync(GitSource(other.path))
    s = make()
    assert s.backlog() == N
    sent = chat.requests

    run = s.run_once()

    assert (run.reused, run.written, run.requested, run.backlog) == (N, N, 0, 0)
    assert sent == chat.requests


def test_budget_stops_a_run(
    repo: Repo, indexer: Indexer, chat: ChatServer, make: MakeSummarizer
) -> None:
    """Per run and per day, by chunks and by tokens: the run stops and the rest stays stale."""
    repo.write("app.py", APP)
    repo.commit()
    index(repo, indexer)
    s = make(max_chunks_per_day=2)

    first = s.run_once(Budget(chunks=1))
    assert (
        first.requested,
        first.written,
        first.backlog,
        first.stopped_by,
    ) == (1, 1, N - 1, "chunks_per_run")
    dry = s.run_once(Budget(tokens=10), dry_run=True)
    assert (dry.planned, dry.stopped_by) == ([], "tokens_per_run")
    second = s.run_once()
    assert (second.requested, second.backlog, second.stopped_by) == (1, N - 2, "chunks_per_day")
    third = s.run_once()
    assert (third.requested, third.backlog, third.stopped_by) == (0, N - 2, "chunks_per_day")
    assert chat.requests == 2
    make.clock.day = "2026-01-02"  # type: ignore[attr-defined]
    fourth = s.run_once()
    assert (fourth.requested, fourth.backlog, fourth.stopped_by) == (N - 2, 0, None)
    assert s.cache.usage("2026-01-01").chunks == 2


def test_dry_run_lists_and_estimates_without_sending(
    repo: Repo, indexer: Indexer, chat: ChatServer, make: MakeSummarizer
) -> None:
    """``--dry-run``: the stale chunks and estimated tokens; no request, no write."""
    repo.write("app.py", APP)
    repo.commit()
    index(repo, indexer)
    run = make().run_once(dry_run=True)
    assert {p["symbol"] for p in run.planned} == EXPECTED
    assert run.estimated_tokens == sum(p["estimated_tokens"] for p in run.planned) > 0
    assert (0, 0, set()) == (chat.requests, run.written, llm_symbols(indexer))


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        ([error(500)], "HTTP 500"),
        ([error(429)], "HTTP 429"),
        ([Action(kind="cut")], "cut short"),
        ([Action(kind="hang")], "timed out"),
    ],
)
def test_failures_back_off_and_keep_the_stale_count_honest(
    repo: Repo,
    indexer: Indexer,
    chat: ChatServer,
    make: MakeSummarizer,
    failure: list[Action],
    reason: str,
) -> None:
    """An unavailable endpoint ends the run; later runs wait out the back-off, then go on."""
    repo.write("app.py", APP)
    repo.commit()
    index(repo, indexer)
    s = make(timeout=0.3)
    chat.script.extend(failure)

    run = s.run_once()

    assert (
        run.requested,
        run.failed,
        run.written,
        run.backlog,
        run.stopped_by,
    ) == (1, 1, 0, N, "endpoint_unavailable")
    assert reason in run.errors[0]
    assert set() == llm_symbols(indexer)
    status = s.status()
    assert (status["consecutive_failures"], status["retry_in_s"], status["backlog"]) == (1, 60.0, N)
    assert chat.requests == 1
    waiting = s.run_once()
    assert (waiting.stopped_by, waiting.backlog, chat.requests) == ("backoff", N, 1)
    assert s.status()["last_run"]["stopped_by"] == "endpoint_unavailable"  # still on show
    make.clock.now += 61  # type: ignore[attr-defined]
    done = s.run_once()
    assert (done.written, done.backlog, done.stopped_by) == (N, 0, None)
    assert s.status()["consecutive_failures"] == 0


def test_refused_connection_and_retry_after_hint(
    repo: Repo, indexer: Indexer, chat: ChatServer, make: MakeSummarizer
) -> None:
    """Refused: unavailable, backlog unchanged; a 429's Retry-After sets the back-off."""
    repo.write("app.py", APP)
    repo.commit()
    index(repo, indexer)
    refused = make(closed_port_url()).run_once()
    assert (refused.stopped_by, refused.backlog, refused.written) == ("endpoint_unavailable", N, 0)
    assert "connection failed" in refused.errors[0]
    s = make()
    chat.script.append(error(429, **{"Retry-After": "900"}))
    s.run_once()
    assert s.status()["retry_in_s"] == 900.0


def test_rejected_answers_are_never_stored(
    repo: Repo, indexer: Indexer, chat: ChatServer, make: MakeSummarizer
) -> None:
    """Error-looking, malformed or cut-short answers stay out of the table; retried twice only."""
    repo.write("app.py", APP)
    repo.commit()
    index(repo, indexer)
    chat.reply = lambda prompt: (
        "I'm sorry, I cannot summarize this code."
        if "parse_config" in prompt
        else "Does a useful thing for its callers."
    )
    s = make()

    first = s.run_once()

    assert (first.requested, first.rejected, first.written, first.backlog) == (N, 1, N - 1, 1)
    second = s.run_once()
    assert (second.requested, second.rejected, second.backlog) == (1, 1, 1)
    third = s.run_once()
    assert (third.requested, third.backlog) == (0, 1)  # parse_config was rejected twice
    repo.write("app.py", APP.replace("width = max(", "width = 2 + max("))
    index(repo, indexer)
    chat.script.extend([Action(kind="raw", body=b"not json"), Action(kind="length")])
    fourth = s.run_once()
    fifth = s.run_once()
    assert (
        fourth.requested,
        fourth.rejected,
        fifth.requested,
        fifth.rejected,
        fifth.backlog,
    ) == (1, 1, 1, 1, 2)
    assert "not JSON" in fourth.errors[0]
    assert "cut short" in fifth.errors[0]
    assert {"parse_config", "render_report"}.isdisjoint(llm_symbols(indexer))
    assert "sorry" not in json.dumps([r["summary"] for r in rows(indexer).values()])
    assert s.status()["rejected_chunks"] == 2


def test_concurrency_is_bounded(
    repo: Repo, indexer: Indexer, chat: ChatServer, make: MakeSummarizer
) -> None:
    """``summaries.concurrency`` requests in flight at once, never more: the first ones
    wait (half a second at most) for a third that a bound of 2 never sends."""
    repo.write(
        "app.py", APP + "".join(APP.split("def parse_config")[1:2]).join(["\n\ndef parse_a", ""])
    )
    repo.commit()
    index(repo, indexer)
    chat.gate, chat.gate_s = 3, 0.5
    run = make(concurrency=2).run_once()
    assert run.requested == run.summarized >= 3
    assert chat.max_inflight == 2


def test_disabled_without_endpoint(indexer: Indexer, make: MakeSummarizer) -> None:
    """No URL configured: nothing is sent and the status says why."""
    assert disabled_reason(SummarySettings()) == "no endpoint configured (summaries.url)"
    s = Summarizer(
        load_settings(env={}, overrides={"index.dir": indexer.paths.uri}),
        indexer.store,
        SummaryCache(indexer.paths.cache),
        None,
    )
    try:
        run = s.run_once()
        assert run.stopped_by == "disabled"
        assert (
            s.status()["enabled"],
            s.status()["reason"],
        ) == (False, "no endpoint configured (summaries.url)")
    finally:
        s.cache.close()


def test_fts_text_matches_the_store(repo: Repo, indexer: Indexer) -> None:
    """Replacing a row's summary gives what the store writes for the same summary."""
    repo.write("app.py", APP)
    repo.commit()
    index(repo, indexer)
    from codechunkd.chunking.chunker import chunk
    from codechunkd.chunking.tokens import counter_for

    for c in chunk(
        "app.py", APP.encode(), load_settings(env={}).chunking, count_tokens=counter_for()
    ):
        old = fts_text(c, "an extractive one")
        assert fts_text(c, "a summary") == fts_text_with_summary(old, "a summary", c.content)


def test_cli_summarize(
    repo: Repo,
    indexer: Indexer,
    chat: ChatServer,
    make: MakeSummarizer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``codechunkd summarize``: --dry-run lists, --limit bounds, --json reports."""
    repo.write("app.py", APP)
    repo.commit()
    index(repo, indexer)
    for key, value in summary_overrides(chat.url).items():
        monkeypatch.setenv("CODECHUNKD_" + key.replace(".", "_").upper(), str(value))
    capsys.readouterr()  # the indexing logs

    def run(*args: str) -> tuple[int, Any]:
        with pytest.raises(SystemExit) as done:
            cli.main(["summarize", "--index-dir", indexer.paths.uri, "--json", *args])
        return int(done.value.code or 0), json.loads(capsys.readouterr().out)

    code, dry = run("--dry-run")
    assert (code, len(dry["planned"]), chat.requests) == (0, N, 0)
    code, one = run("--limit", "1")
    assert (
        code,
        one["requested"],
        one["written"],
        one["backlog"],
        one["stopped_by"],
    ) == (0, 1, 1, N - 1, "chunks_per_run")
    code, rest = run()
    assert (code, rest["requested"], rest["backlog"]) == (0, N - 1, 0)
    monkeypatch.delenv("CODECHUNKD_SUMMARIES_URL")
    with pytest.raises(SystemExit) as off:
        cli.main(["summarize", "--index-dir", indexer.paths.uri])
    assert off.value.code == 2
    assert "LLM summaries are off" in capsys.readouterr().err
    assert PROMPT_VERSION


def test_stop_ends_a_run_without_waiting_for_the_request(
    repo: Repo, indexer: Indexer, chat: ChatServer, make: MakeSummarizer
) -> None:
    """A shutdown (``stop`` set) ends a run at once; the hung request is abandoned."""
    repo.write("app.py", APP)
    repo.commit()
    index(repo, indexer)
    s = make()
    chat.script.append(Action(kind="hang", hang_s=10.0))
    result: list[Any] = []
    runner = threading.Thread(target=lambda: result.append(s.run_once()), name="run")
    runner.start()
    chat.wait_for_requests(1)
    t0 = time.monotonic()
    s.stop.set()
    runner.join(scaled(5.0))
    assert not runner.is_alive()
    assert time.monotonic() - t0 < scaled(2.0)
    (run,) = result
    assert (run.stopped_by, run.summarized, run.backlog) == ("stopping", 0, N)
    chat.release.set()  # the abandoned request ends; its thread with it
    deadline = time.monotonic() + scaled(10.0)
    while any(t.name.startswith("codechunkd-summary") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the abandoned request did not end"
        threading.Event().wait(0.02)


def test_summary_settings_are_checked(index_dir: Path) -> None:
    """Out-of-range or inconsistent ``[summaries]`` settings name the key."""
    from codechunkd.errors import ConfigError

    def load(**kw: object) -> Settings:
        over = {"index.dir": str(index_dir), **{f"summaries.{k}": v for k, v in kw.items()}}
        return load_settings(env={}, overrides=over)

    assert load().summaries.url == ""
    with pytest.raises(ConfigError, match=r"summaries\.model"):
        load(url="http://127.0.0.1:1/v1")
    with pytest.raises(ConfigError, match=r"summaries\.url"):
        load(url="ftp://x/v1", model="m")
    with pytest.raises(ConfigError, match=r"summaries\.concurrency"):
        load(concurrency=0)
    with pytest.raises(ConfigError, match=r"summaries\.max_chunks_per_day"):
        load(max_chunks_per_day=-1)
    env = {"CODECHUNKD_SUMMARIES_MAX_TOKENS_PER_DAY": "1_000"}
    assert load_settings(env=env).summaries.max_tokens_per_day == 1000
