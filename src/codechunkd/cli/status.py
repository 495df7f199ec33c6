"""``codechunkd status``: what is indexed, and how fresh it is (and its exit code).

Owns the command's parser, asking a running daemon for its status document, the same
document from state.json when none answers (``daemon.offline``), ``status PATH``'s filter,
and the damage lines.  The document's text and exit code are ``daemon.status``'s.  Must not
import LanceDB, pyarrow, pygit2 or structlog: ``status`` stays light (``tests/test_docs.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import codechunkd.cli.common as common


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("status", help="what is indexed, and how fresh it is")
    p.add_argument(
        "path", nargs="?", help="only the source containing this folder (exit 2 if none does)"
    )
    common.options(p)


def _status_via_daemon(paths: Any) -> dict[str, Any]:
    """The running daemon's status document, or a ``stopped``/``stalled`` stub.

    A daemon that holds the index's lock is never ``stopped``: busy, starting or stopping,
    it is asked again until the timeout, then reported ``stalled``."""
    from codechunkd.daemon.control import DaemonUnavailable, daemon_pid, request

    try:
        doc = request(
            paths.socket, {"cmd": "status"}, timeout=2.0, running=lambda: daemon_pid(paths)
        )
    except DaemonUnavailable as exc:
        if not exc.stalled:
            return {"daemon": {"state": "stopped", "reason": exc.reason}}
        return {"daemon": {"state": "stalled", "reason": exc.reason, "pid": daemon_pid(paths)}}
    if not isinstance(doc, dict) or "daemon" not in doc:
        return {"daemon": {"state": "stalled", "reason": "unexpected answer from the daemon"}}
    return doc


def cmd_status(args: argparse.Namespace) -> int:
    from codechunkd.daemon.status import exit_code, render_text
    from codechunkd.errors import IndexDamaged, StoreError
    from codechunkd.platform import resolved
    from codechunkd.storage.layout import IndexPaths

    settings = common.settings(args, check_index=False)  # a running daemon is asked first
    paths = IndexPaths.of(settings)
    out = _status_via_daemon(paths)
    only = str(resolved(args.path)) if args.path else None
    if "sources" not in out:  # no daemon answered: the same document, from state.json
        from codechunkd.daemon.offline import stopped_status

        stopped = out["daemon"]["state"] == "stopped"  # (a stalled daemon is reported)
        problem = paths.index_problem() if args.index_dir and stopped else None
        if problem:
            raise StoreError(f"{problem}; check --index-dir, or `codechunkd index` to make one")

        out = stopped_status(
            paths,
            state=out["daemon"]["state"],
            reason=out["daemon"].get("reason"),
            pid=out["daemon"].get("pid"),
        )
    if only:
        every = out["sources"]
        out["sources"] = [
            s for s in every if only == s["repo"] or only.startswith(s["repo"] + os.sep)
        ]
        if every and not out["sources"]:
            listed = "".join(f"\n  {s['repo']}" for s in every)
            sys.stderr.write(
                f"codechunkd: error: {only} is in none of the sources of {out['index']}; "
                f"they are:{listed}\n"
            )
            return 2
    code = exit_code(out)
    damage = common.damage_lines(paths)  # issue #15: a damaged index is never "fresh"
    if damage:
        out["damage"], code = damage, IndexDamaged.exit_code
    if args.json:
        common.print_json(out)
    else:
        print(render_text(out))
        for line in damage:
            print(f"DAMAGED: {line}")
        if damage:
            print(f"  {IndexDamaged.HINT}")
    return code
