"""Logging setup: the one permitted global, configured once by the CLI.

JSON lines on stderr when it is not a terminal (journald, CI), a console
renderer on a terminal.  Tracebacks never include frame locals (structlog's
default JSON tracebacks would log them, source code included).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
from structlog.tracebacks import ExceptionDictTransformer

DEBUG, INFO, WARNING = logging.DEBUG, logging.INFO, logging.WARNING
"""The levels the CLI passes (so that it need not import ``logging`` for them)."""


def configure(*, level: int = logging.INFO, json: bool | None = None) -> None:
    if json is None:
        json = not sys.stderr.isatty()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    renderer: list[Any]
    if json:
        renderer = [
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False)),
            structlog.processors.JSONRenderer(),
        ]
    else:
        renderer = [
            structlog.dev.ConsoleRenderer(
                colors=sys.stderr.isatty(),
                exception_formatter=structlog.dev.plain_traceback,
            )
        ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("apscheduler.scheduler", "apscheduler.executors.default"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    for chatty in ("sentence_transformers", "transformers", "httpx", "urllib3"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
