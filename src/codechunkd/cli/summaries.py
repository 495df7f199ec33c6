"""``codechunkd summarize``: regenerate stale LLM summaries once, within the budget.

Owns the command's parser, its checks of the flags and its report (``--dry-run`` lists
and estimates without the writer lock).  The work is ``pipeline.summarize``; this module
must not call the LLM or write rows itself.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

import codechunkd.cli.common as common


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("summarize", help="regenerate stale LLM summaries once, within the budget")
    p.add_argument("--limit", type=int, metavar="N", help="send at most N chunks this pass")
    p.add_argument(
        "--dry-run", action="store_true", help="list what is stale and estimate the tokens only"
    )
    common.options(p)


def cmd_summarize(args: argparse.Namespace) -> int:
    from codechunkd.errors import ConfigError
    from codechunkd.pipeline.summarize import Budget, disabled_reason, open_summarizer
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.lease import writer_lock
    from codechunkd.storage.store import IndexStore

    settings = common.settings(args)
    if args.limit is not None and args.limit < 1:
        raise ConfigError("--limit must be at least 1")
    off = disabled_reason(settings.summaries)
    if off and not args.dry_run:
        raise ConfigError(f"LLM summaries are off: {off}", key="summaries.url")
    paths = IndexPaths.of(settings)
    budget = Budget.per_run(settings.summaries, limit=args.limit)
    lock = (
        contextlib.nullcontext()
        if args.dry_run
        else writer_lock(paths, what="codechunkd summarize")
    )
    with lock:
        summarizer = open_summarizer(
            settings, IndexStore(paths.uri, storage_options=paths.storage_options)
        )
        try:
            run = summarizer.run_once(budget, dry_run=args.dry_run)
        finally:
            summarizer.cache.close()
    doc = {"enabled": off is None, "reason": off, **run.as_dict()}
    if args.json:
        common.print_json(doc)
    elif args.dry_run:
        print(
            f"{run.stale} stale chunk rows ({run.reused} have a cached summary); "
            f"this pass would send {len(run.planned)} requests, ~{run.estimated_tokens} tokens"
            + (f" (stopped by {run.stopped_by})" if run.stopped_by else "")
        )
        for p in run.planned:
            print(f"  {p['path']}  {p['symbol'] or '-'}  ~{p['estimated_tokens']} tokens")
    else:
        print(
            f"summaries: {run.written} written ({run.reused} from cache, {run.summarized} new), "
            f"{run.requested} requests, {run.tokens} tokens, {run.rejected} rejected, "
            f"{run.failed} failed; {run.backlog} still stale"
            + (f" (stopped by {run.stopped_by})" if run.stopped_by else "")
        )
        for e in run.errors:
            print(f"  error: {e}")
    return 1 if run.stopped_by == "endpoint_unavailable" else 0
