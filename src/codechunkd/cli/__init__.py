"""The ``codechunkd`` command: the composition root.

Settings are loaded and logging configured here, once; the stages are built
and wired here and nowhere else.  Commands that do not embed (``status``,
``--help``) never import torch, and ``status`` does not even import LanceDB.

Exit codes: 0 success; 1 unexpected error; 2 bad settings or usage; 3 git
error; 4 index error; 5 the index is locked by another writer; 6 embedding
error; 8 the index is damaged (run ``codechunkd index --rebuild``; ``status``
too).  ``status`` adds 10 (some source is stale), 11 (degraded: a source is
not fully watched, or keeps failing), 12 (nothing indexed), 13 (stopped: no
daemon runs for this index; the indexed state is still printed) and 14
(stalled: the daemon is silent or its changes wait too long); see
``codechunkd.daemon.status``.  ``status PATH`` for a PATH that is in no source
of the index exits 2 and lists the sources.

With a daemon running (``codechunkd run``), ``status`` and ``search`` ask it
over its Unix socket (a warm model, no torch import); without one they work
on their own.

The package: this module holds the top-level parser, the command table and ``main`` (the
last boundary: errors become exit codes, and how the process ends); each command group
is a module of its own that adds its parsers (``add_parsers``) and holds its
``cmd_*`` bodies; ``common`` holds what they share.  Nothing here may import LanceDB,
torch or the MCP SDK at its top, nor may a command module: ``--help`` and ``status``
import every command module.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from codechunkd import __version__
from codechunkd.cli import (
    daemon,
    index,
    mcp,
    model,
    refs,
    search,
    service,
    status,
    summaries,
    verify,
)
from codechunkd.errors import CodechunkdError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codechunkd",
        description="A git-aware indexer of syntax-aware code chunks into LanceDB.",
    )
    parser.add_argument("--version", action="version", version=f"codechunkd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # in the order `codechunkd --help` lists them
    for group in (index, search, model, verify, summaries, status, daemon, mcp, service, refs):
        group.add_parsers(sub)
    return parser


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "index": index.cmd_index,
    "search": search.cmd_search,
    "status": status.cmd_status,
    "summarize": summaries.cmd_summarize,
    "verify": verify.cmd_verify,
    "model": model.cmd_model,
    "run": daemon.cmd_run,
    "add": daemon.cmd_add,
    "remove": daemon.cmd_remove,
    "service": service.cmd_service,
    "mcp": mcp.cmd_mcp,
    **refs.COMMANDS,
}


def _unexpected(exc: Exception, *, verbose: bool) -> int:
    """An error nothing translated (a bug, or an OS error): one line, exit 1; ``-v``: traceback."""
    from codechunkd.storage._errors import one_line

    if verbose:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    what = one_line(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {one_line(exc)}"
    hint = "" if verbose else " (run with -v for the traceback)"
    sys.stderr.write(f"codechunkd: error: unexpected: {what}{hint}\n")
    return 1


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for the resume hint
    if args.command != "status":  # status starts no thread: skip ctypes' import
        from codechunkd import heap

        heap.limit_arenas()  # before any thread starts (LanceDB, onnxruntime, the sync's reader)
    from codechunkd import logs

    # structlog is imported at the first record a command writes (most write none)
    logs.configure(level=logs.DEBUG if args.verbose else logs.WARNING, lazy=True)
    try:
        code = COMMANDS[args.command](args)
    except CodechunkdError as exc:
        sys.stderr.write(f"codechunkd: error: {exc}\n")
        code = exc.exit_code
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # the reader went away (``| head``): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except Exception as exc:  # noqa: BLE001 - the last boundary: one line, never a traceback
        code = _unexpected(exc, verbose=args.verbose)
    if argv is None and args.command == "search":
        # a read-only command with nothing left to clean up: skip the interpreter's
        # teardown (LanceDB's runtime, module cleanup), a visible part of its wall time
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            code = 0
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
