"""Logging setup: the one permitted global, configured once by the CLI.

JSON lines on stderr when it is not a terminal (journald, CI), a console
renderer on a terminal.  Tracebacks never include frame locals (structlog's
default JSON tracebacks would log them, source code included).

A short command that logs nothing at its level (``search``) need not import structlog
(~0.1 CPU-s, asyncio with it): ``configure(lazy=True)`` sets the level and leaves
structlog's set-up to the first record that passes it, and the modules on that command's
path log through ``get_logger``, whose loggers import structlog only for a record their
level lets through.  ``tests/test_docs.py`` checks that ``search`` imports no structlog.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

DEBUG, INFO, WARNING = logging.DEBUG, logging.INFO, logging.WARNING
"""The levels the CLI passes (so that it need not import ``logging`` for them)."""

_pending: tuple[int, bool | None] | None = None
"""``configure(lazy=True)``'s arguments, until structlog is set up with them."""


def configure(*, level: int = logging.INFO, json: bool | None = None, lazy: bool = False) -> None:
    """Send every record (structlog's and the standard library's) to stderr at ``level``.

    ``lazy``: import and set up structlog only when a record at ``level`` or above comes.
    """
    global _pending
    if lazy:
        _pending = (level, json)
        root = logging.getLogger()
        root.handlers[:] = [_DeferredHandler()]
        root.setLevel(level)
        return
    reset()
    _configure(level, json)


def reset() -> None:
    """Forget a lazy ``configure`` not yet acted on (a test's next one starts afresh)."""
    global _pending
    _pending = None


def _ensure() -> None:
    """Set up structlog now if ``configure(lazy=True)`` left it for later."""
    global _pending
    if _pending is not None:
        level, json = _pending
        _pending = None
        _configure(level, json)


class _DeferredHandler(logging.Handler):
    """The root handler of a lazy ``configure``: the first record sets structlog up, then
    goes to the real handler that replaced this one."""

    def emit(self, record: logging.LogRecord) -> None:
        _ensure()
        for handler in logging.getLogger().handlers:
            if handler is not self and record.levelno >= handler.level:
                handler.handle(record)


_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
}
"""The level of each logging method."""


class _Logger:
    """A structlog logger, made when first used.  While a lazy ``configure`` waits, a record
    below its level is dropped here, without structlog, and any other sets structlog up
    first (a logger made before, e.g. by an earlier command in the same process, must not
    write through structlog's defaults, which print every level to stdout).  With structlog
    not set up at all (codechunkd used as a library), records go through ``logging``."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None
        self._plain: Any = None

    def __getattr__(self, attr: str) -> Any:
        if _pending is not None:  # a lazy configure not yet acted on: this record decides
            level = _LEVELS.get(attr)
            if level is not None and not logging.getLogger(self._name).isEnabledFor(level):
                return _ignore
            _ensure()
        if self._logger is None:
            import structlog

            if not structlog.is_configured():  # a library user's process: its logging decides
                if self._plain is None:
                    self._plain = _through_logging(self._name)
                return getattr(self._plain, attr)
            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, attr)


def _through_logging(name: str) -> Any:
    """A logger for a process that set up no structlog (codechunkd used as a library):
    records go to the standard library's logger ``name`` as ``key=value`` lines, so the
    host's logging decides where (with none set up, warnings and worse reach stderr), never
    to stdout, which structlog's defaults print every record to."""
    import structlog

    render = structlog.processors.KeyValueRenderer(key_order=["event"])

    def to_logging(logger: Any, method: str, event: Any) -> dict[str, Any]:
        exc_info = event.pop("exc_info", None)  # logging prints the traceback itself
        return {"msg": render(logger, method, event), "exc_info": exc_info}

    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[to_logging],
        wrapper_class=structlog.stdlib.BoundLogger,
    )


def _ignore(*args: Any, **kwargs: Any) -> None:
    """A record below the level: dropped, as structlog's stdlib logger would drop it."""


def get_logger(name: str) -> Any:
    """A logger of ``name`` that imports structlog only for a record it will write."""
    return _Logger(name)


def _configure(level: int, json: bool | None) -> None:
    import structlog
    from structlog.tracebacks import ExceptionDictTransformer

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
