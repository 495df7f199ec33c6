"""Regenerate stale LLM summaries, within a budget: ``Summarizer.run_once``.

A chunk row's summary is **stale** when the chunk is worth an LLM summary
(``summaries.eligible``: code, at least ``summaries.min_tokens`` tokens) and
its ``summary_source`` is not ``llm:<model>@<prompt version>`` of the
configured model, or its ``summary_of`` is not its ``content_hash``.  A run:

1. finds the stale rows, most recently indexed first;
2. takes every summary it can from the summary cache, keyed by (content
   hash, model, prompt version): identical code on any branch, source or
   repository is summarized once, and a branch switch back sends nothing;
3. sends the rest to the chat-completions endpoint, one request per distinct
   content hash, until the run's or the day's budget (chunks, estimated
   tokens) would be exceeded; answers are cleaned and cached;
4. writes every row it has a summary for, in one ``merge_insert`` commit of
   just ``summary``, ``summary_source``, ``summary_of`` and ``fts_text``.
   The rows are read on the writer right before, so none can change in
   between.  (No ``where`` on the update: with a BTREE index on ``id``,
   LanceDB 0.40 panics on a conditional subset-column ``merge_insert``.)

An unreachable endpoint ends the run (nothing else is sent) and puts the
summarizer in back-off: later runs return at once until it expires, doubling
up to ``MAX_BACKOFF_S`` (or what the server's ``Retry-After`` asks).  A chunk
whose answer is rejected twice (cut short, error-looking) is not sent again by
this process.  Both stay in the backlog: the stale count is the truth.

Writes: ``run_once`` and ``apply`` write the table, so they must run on the
index's single writer (the daemon's writer thread, or a CLI holding the
``WriterLock``).  ``fetch`` only reads the table (give it a ``reader`` store)
and writes the SQLite cache, so the daemon can run it off the writer thread
and queue the ``apply``.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from codechunkd import logs
from codechunkd.config.settings import Settings, SummarySettings
from codechunkd.errors import BadAnswer, EndpointUnavailable
from codechunkd.llm.client import ChatClient, estimate_tokens
from codechunkd.llm.summaries import (
    PROMPT_VERSION,
    SKIPPED_KINDS,
    SKIPPED_LANGUAGES,
    SummaryInput,
    build_messages,
    clean_summary,
    llm_source,
)
from codechunkd.storage.cache import SummaryCache
from codechunkd.storage.fulltext import fts_text_with_summary
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.rows import quote
from codechunkd.storage.store import IndexStore

__all__ = [
    "Budget",
    "Summarizer",
    "SummaryRun",
    "disabled_reason",
    "open_summarizer",
]

log = logs.get_logger("codechunkd.summarize")

MAX_BACKOFF_S = 3600.0
FIRST_BACKOFF_S = 60.0
MAX_REJECTS = 2
_PAGE = 256
_ROW_COLUMNS = ["id", "path", "language", "kind", "symbol", "parent_id", "content"]


def disabled_reason(settings: SummarySettings) -> str | None:
    """Why LLM summaries are off (None: they are on)."""
    if not settings.url:
        return "no endpoint configured (summaries.url)"
    if not settings.model:
        return "no model configured (summaries.model)"
    return None


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Most chunks and estimated tokens to send (0: no limit)."""

    chunks: int = 0
    tokens: int = 0

    @classmethod
    def per_run(cls, settings: SummarySettings, *, limit: int | None = None) -> Budget:
        chunks = settings.max_chunks_per_run
        if limit is not None:
            chunks = min(chunks, limit) if chunks else limit
        return cls(chunks=chunks, tokens=settings.max_tokens_per_run)


@dataclass(slots=True)
class SummaryRun:
    """What one run did (counts are of chunk rows unless named otherwise)."""

    started_at: str = ""
    seconds: float = 0.0
    stale: int = 0
    """Stale rows found at the start."""
    reused: int = 0
    """Stale rows whose summary came from the cache (no request)."""
    requested: int = 0
    """Requests sent (one per distinct content hash)."""
    summarized: int = 0
    """Requests answered with a usable summary (cached)."""
    rejected: int = 0
    """Answers refused: malformed, cut short, empty or error-looking."""
    failed: int = 0
    """Requests that failed because the endpoint was unavailable."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_tokens: int = 0
    """Tokens the planned requests were estimated to cost (prompt + ``max_tokens``)."""
    written: int = 0
    """Rows whose summary was written."""
    backlog: int = 0
    """Stale rows left after the run."""
    stopped_by: str | None = None
    """Why the run stopped early: ``disabled``, ``backoff``, ``endpoint_unavailable``,
    ``chunks_per_run``, ``tokens_per_run``, ``chunks_per_day``, ``tokens_per_day``,
    ``stopping``; None when it went through the backlog."""
    errors: list[str] = field(default_factory=list)
    """The first few errors, for the status."""
    planned: list[dict[str, Any]] = field(default_factory=list)
    """``--dry-run``: what would be sent (path, symbol, lines, estimated tokens)."""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "started_at": self.started_at,
            "seconds": round(self.seconds, 3),
            "stale": self.stale,
            "reused": self.reused,
            "requested": self.requested,
            "summarized": self.summarized,
            "rejected": self.rejected,
            "failed": self.failed,
            "tokens": self.tokens,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "estimated_tokens": self.estimated_tokens,
            "written": self.written,
            "backlog": self.backlog,
            "stopped_by": self.stopped_by,
            "errors": list(self.errors),
            **({"planned": list(self.planned)} if self.planned else {}),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class _Item:
    """One request to make: a distinct content hash and the prompt of one of its rows."""

    content_hash: str
    messages: list[dict[str, str]]
    estimate: int
    path: str
    symbol: str


class Summarizer:
    """Finds stale summaries and regenerates them within a budget (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        store: IndexStore,
        cache: SummaryCache,
        client: ChatClient | None,
        *,
        reader: IndexStore | None = None,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        today: Callable[[], str] = _today,
    ) -> None:
        self.settings = settings.summaries
        self.store = store
        self.reader = reader or store
        self.cache = cache
        self.client = client
        self.stop = stop or threading.Event()
        self.clock = clock
        self.today = today
        self.model = self.settings.model
        self.source_tag = llm_source(self.model)
        self.last_run: SummaryRun | None = None
        """The last run that was not skipped for back-off."""
        self.last_active_run: SummaryRun | None = None
        """The last run that sent a request or wrote a row."""
        self.last_backlog: int | None = None
        self.consecutive_failures = 0
        self.retry_at: float | None = None
        self.last_error: str | None = None
        self._rejects: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.client is not None

    # -- what is stale ----------------------------------------------------------

    def stale_filter(self) -> str:
        """The LanceDB filter of stale rows."""
        s = self.settings
        kinds = ", ".join(quote(k) for k in sorted(SKIPPED_KINDS))
        langs = ", ".join(quote(k) for k in sorted(SKIPPED_LANGUAGES))
        tag = quote(self.source_tag)
        return (
            f"token_count >= {int(s.min_tokens)} AND kind NOT IN ({kinds}) "
            f"AND language NOT IN ({langs}) AND (summary_source IS NULL "
            f"OR summary_source != {tag} OR summary_of IS NULL OR summary_of != content_hash)"
        )

    def backlog(self) -> int:
        """Stale rows in the index now."""
        if not self.reader.has_chunks():
            return 0
        n = self.reader.count_chunks(self.stale_filter())
        self.last_backlog = n
        return n

    def stale(self, store: IndexStore | None = None) -> list[dict[str, str]]:
        """Stale rows (``id``, ``content_hash``), most recently indexed first."""
        store = store or self.reader
        if not store.has_chunks():
            return []
        table = store.scan_chunks(
            self.stale_filter(), ["id", "content_hash", "indexed_at"]
        ).sort_by([("indexed_at", "descending"), ("id", "descending")])
        ids = table.column("id").to_pylist()
        hashes = table.column("content_hash").to_pylist()
        return [{"id": i, "content_hash": h} for i, h in zip(ids, hashes, strict=True)]

    # -- one run ----------------------------------------------------------------

    def run_once(self, budget: Budget | None = None, *, dry_run: bool = False) -> SummaryRun:
        """``fetch`` then ``finish``: one whole pass, on the writer (see the module docstring)."""
        run = self.fetch(budget, dry_run=dry_run)
        if dry_run or run.stopped_by == "disabled":
            return run
        return self.finish(run)

    def finish(self, run: SummaryRun) -> SummaryRun:
        """The writer's half of a run: write what the cache holds, count the backlog, record."""
        started = time.monotonic()
        if run.stopped_by == "backoff":  # nothing was tried: the last real run stays on show
            run.backlog = self.backlog()
            return run
        run.written = self.apply()
        run.backlog = self.backlog()
        run.seconds += time.monotonic() - started
        self.last_run = run
        if run.requested or run.written:
            self.last_active_run = run
        fields = {k: v for k, v in run.as_dict().items() if k != "planned"}
        idle = not (run.stale or run.written or run.requested or run.stopped_by)
        (log.debug if idle else log.info)("summaries_run", **fields)
        return run

    def fetch(self, budget: Budget | None = None, *, dry_run: bool = False) -> SummaryRun:
        """Get summaries of stale rows into the cache (requests within budget); no table write."""
        started = time.monotonic()
        run = SummaryRun(started_at=datetime.now(UTC).isoformat(timespec="seconds"))
        budget = budget or Budget.per_run(self.settings)
        if not dry_run and self.client is None:
            run.stopped_by = "disabled"
            return run
        if not dry_run and self.retry_at is not None and self.clock() < self.retry_at:
            run.stopped_by = "backoff"
            run.backlog = self.backlog()
            return run
        rows = self.stale()
        run.stale = len(rows)
        hashes = list(dict.fromkeys(r["content_hash"] for r in rows))
        cached = self.cache.get_many(self.model, PROMPT_VERSION, hashes)
        run.reused = sum(1 for r in rows if r["content_hash"] in cached)
        todo: dict[str, str] = {}  # content hash -> id of its most recent row
        for r in rows:
            h = r["content_hash"]
            if h not in cached and h not in todo and self._rejects[h] < MAX_REJECTS:
                todo[h] = r["id"]
        items = self._plan(todo, budget, run)
        run.estimated_tokens = sum(i.estimate for i in items)
        if dry_run:
            run.planned = [
                {"path": i.path, "symbol": i.symbol, "estimated_tokens": i.estimate} for i in items
            ]
            run.backlog = run.stale
        elif items:
            self._request(items, run)
        run.seconds = time.monotonic() - started
        return run

    def apply(self) -> int:
        """Write every stale row whose summary is in the cache; returns rows written (writer)."""
        rows = self.stale(self.store)
        if not rows:
            return 0
        found = self.cache.get_many(self.model, PROMPT_VERSION, (r["content_hash"] for r in rows))
        ids = [r["id"] for r in rows if r["content_hash"] in found]
        if not ids:
            return 0
        full: list[dict[str, Any]] = []
        for i in range(0, len(ids), 2000):
            full += self.store.rows_by_id(
                ids[i : i + 2000], ["id", "content_hash", "content", "fts_text"]
            )
        table = pa.table(
            {
                "id": [r["id"] for r in full],
                "summary": [found[r["content_hash"]] for r in full],
                "summary_source": [self.source_tag] * len(full),
                "summary_of": [r["content_hash"] for r in full],
                "fts_text": [
                    fts_text_with_summary(
                        r["fts_text"] or "", found[r["content_hash"]], r["content"] or ""
                    )
                    for r in full
                ],
            }
        )
        self.store.update_chunks(table)
        self.store.index_text()  # the rewritten rows' summaries are searchable by text at once
        return len(full)

    def _plan(self, todo: dict[str, str], budget: Budget, run: SummaryRun) -> list[_Item]:
        """The requests of this run, in order, within the run's and the day's budget."""
        s = self.settings
        day = self.cache.usage(self.today())
        limits = [
            ("chunks_per_run", budget.chunks, 0, "chunks"),
            ("tokens_per_run", budget.tokens, 0, "tokens"),
            ("chunks_per_day", s.max_chunks_per_day, day.chunks, "chunks"),
            ("tokens_per_day", s.max_tokens_per_day, day.tokens, "tokens"),
        ]
        items: list[_Item] = []
        tokens = 0
        pending = list(todo.items())
        for page in range(0, len(pending), _PAGE):
            part = pending[page : page + _PAGE]
            for item in self._items(part):
                for name, limit, used, unit in limits:
                    spent = len(items) + 1 if unit == "chunks" else tokens + item.estimate
                    if limit and used + spent > limit:
                        run.stopped_by = name
                        return items
                items.append(item)
                tokens += item.estimate
        return items

    def _items(self, part: Sequence[tuple[str, str]]) -> list[_Item]:
        """Prompts of one page of (content hash, row id), with each method's class signature."""
        by_id = {r["id"]: r for r in self.reader.rows_by_id([i for _, i in part], _ROW_COLUMNS)}
        parents = {r["parent_id"] for r in by_id.values() if r["parent_id"]}
        context: dict[str, str] = {}
        if parents:
            for p in self.reader.rows_by_id(sorted(parents), ["id", "kind", "signature"]):
                if p["signature"] and p["kind"] not in {"module", "block"}:
                    context[p["id"]] = p["signature"]
        items = []
        for h, row_id in part:
            r = by_id.get(row_id)
            if r is None:
                continue
            messages = build_messages(
                SummaryInput(
                    path=r["path"],
                    language=r["language"] or "",
                    kind=r["kind"] or "",
                    symbol=r["symbol"] or "",
                    content=r["content"] or "",
                    context=context.get(r["parent_id"] or "", ""),
                ),
                max_input_tokens=self.settings.max_input_tokens,
            )
            prompt = sum(estimate_tokens(m["content"]) + 4 for m in messages)
            items.append(
                _Item(
                    content_hash=h,
                    messages=messages,
                    estimate=prompt + self.settings.max_tokens,
                    path=r["path"],
                    symbol=r["symbol"] or "",
                )
            )
        return items

    def _request(self, items: Sequence[_Item], run: SummaryRun) -> None:
        """Send ``items`` (``concurrency`` at a time); stop everything when the endpoint fails."""
        assert self.client is not None
        client = self.client
        abort = threading.Event()
        unavailable: list[EndpointUnavailable] = []

        def one(item: _Item) -> None:
            if abort.is_set() or self.stop.is_set():
                return
            with self._lock:
                run.requested += 1
            try:
                answer = client.complete(item.messages)
                text = clean_summary(answer.text, max_chars=self.settings.max_chars)
            except EndpointUnavailable as exc:
                abort.set()
                with self._lock:
                    run.failed += 1
                    unavailable.append(exc)
                    self._note_error(run, str(exc))
                return
            except BadAnswer as exc:
                with self._lock:
                    run.rejected += 1
                    run.prompt_tokens += item.estimate - self.settings.max_tokens
                    run.completion_tokens += self.settings.max_tokens
                    self._rejects[item.content_hash] += 1
                    self._note_error(run, f"{item.path} {item.symbol}: {exc.reason}")
                log.warning(
                    "summary_rejected", path=item.path, symbol=item.symbol, reason=exc.reason
                )
                return
            self.cache.put(self.model, PROMPT_VERSION, item.content_hash, text, answer.tokens)
            with self._lock:
                run.summarized += 1
                run.prompt_tokens += answer.prompt_tokens
                run.completion_tokens += answer.completion_tokens

        workers = max(1, min(self.settings.concurrency, len(items)))
        pool = ThreadPoolExecutor(workers, thread_name_prefix="codechunkd-summary")
        futures = [pool.submit(one, item) for item in items]
        # wait for the requests, but not past a stop: one in flight may take summaries.timeout
        while not self.stop.is_set() and wait(futures, timeout=0.2).not_done:
            pass
        pool.shutdown(wait=not self.stop.is_set(), cancel_futures=True)
        crashed = [e for f in futures if f.done() and not f.cancelled() and (e := f.exception())]
        if crashed:  # not an endpoint failure: a bug or the cache's disk
            raise crashed[0]
        if self.stop.is_set() and run.requested < len(items):
            run.stopped_by = run.stopped_by or "stopping"
        self.cache.add_usage(
            self.today(),
            chunks=run.summarized,
            tokens=run.tokens,
            requests=run.requested,
            failures=run.failed + run.rejected,
        )
        if unavailable:
            run.stopped_by = "endpoint_unavailable"
            self.consecutive_failures += 1
            delay = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2.0 ** (self.consecutive_failures - 1))
            hint = max((e.retry_after or 0.0) for e in unavailable)
            delay = max(delay, min(hint, MAX_BACKOFF_S))
            self.retry_at = self.clock() + delay
            log.warning(
                "summary_endpoint_unavailable",
                error=str(unavailable[0]),
                failures=self.consecutive_failures,
                retry_s=round(delay, 1),
            )
        elif run.summarized:
            self.consecutive_failures = 0
            self.retry_at = None

    def _note_error(self, run: SummaryRun, error: str) -> None:
        self.last_error = error
        if len(run.errors) < 5:
            run.errors.append(error)

    # -- status -----------------------------------------------------------------

    def status(self, *, refresh: bool = False) -> dict[str, Any]:
        """The ``summaries`` part of the status document.

        ``backlog`` is the count of the last run (or of the last ``backlog()``);
        ``refresh`` counts it again first (one filtered ``count_rows`` on the reader).
        """
        if refresh and self.enabled:
            self.backlog()
        retry_in = None
        if self.retry_at is not None:
            retry_in = max(0.0, round(self.retry_at - self.clock(), 1))
        day = self.cache.usage(self.today())
        return {
            "enabled": self.enabled,
            "reason": None if self.enabled else disabled_reason(self.settings),
            "endpoint": self.client.shown if self.client else None,
            "model": self.model or None,
            "prompt_version": PROMPT_VERSION,
            "source": self.source_tag if self.enabled else None,
            "backlog": self.last_backlog,
            "last_run": self.last_run.as_dict() if self.last_run else None,
            "last_active_run": self.last_active_run.as_dict() if self.last_active_run else None,
            "today": {
                "chunks": day.chunks,
                "tokens": day.tokens,
                "requests": day.requests,
                "failures": day.failures,
            },
            "consecutive_failures": self.consecutive_failures,
            "retry_in_s": retry_in,
            "rejected_chunks": sum(1 for n in self._rejects.values() if n >= MAX_REJECTS),
            "last_error": self.last_error,
        }


def open_summarizer(
    settings: Settings,
    store: IndexStore,
    *,
    reader: IndexStore | None = None,
    stop: threading.Event | None = None,
) -> Summarizer:
    """The summarizer of an index, with a client when an endpoint is configured.

    Raises ``ConfigError`` when the endpoint is configured but its API key
    variable is not set.  Close ``summarizer.cache`` when done.
    """
    client = None
    if disabled_reason(settings.summaries) is None:
        client = ChatClient(settings.summaries, stop=stop)
    cache = SummaryCache(IndexPaths.of(settings).cache)
    return Summarizer(settings, store, cache, client, reader=reader, stop=stop)
