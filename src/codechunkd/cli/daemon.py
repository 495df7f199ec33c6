"""``codechunkd run``, ``add`` and ``remove``: the daemon, and the list of sources it follows.

Owns the three commands' parsers, the checks ``run`` makes before its slow imports (every
path is a source, the socket directory, the writer lock), handing over to
``daemon.service.Service``, and editing ``sources.json`` (a running daemon is asked to
reload).  ``cmd_run`` is the one place besides ``main`` that ends the process itself
(``os._exit`` when the writer was abandoned inside a batch).  Must not run the service loop
or watch anything itself.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import Any

import codechunkd.cli.common as common


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("run", help="run the daemon: watch sources and keep the index fresh")
    p.add_argument(
        "paths", nargs="*", metavar="PATH", help="sources to watch (besides the configured ones)"
    )
    common.options(p)

    p = sub.add_parser("add", help="add a source to the daemon's list (a running daemon follows)")
    p.add_argument("path", help="any folder inside the repository")
    p.add_argument("--ref", help="follow this ref instead of the working tree (bare mirrors)")
    common.options(p)

    p = sub.add_parser("remove", help="remove a source from the daemon's list")
    p.add_argument("path", help="the source's folder")
    p.add_argument("--ref", help="the ref it follows, if any")
    common.options(p)


def cmd_run(args: argparse.Namespace) -> int:
    from codechunkd import logs
    from codechunkd.daemon.control import SourceSpec

    recycled = int(os.environ.pop(RECYCLED_ENV, "0") or 0)  # a daemon that exec'd itself
    logs.configure(level=logs.DEBUG if args.verbose else logs.INFO)
    os.environ.setdefault("LANCEDB_LOG", "error")
    settings = common.settings(args)  # (after the pop: settings refuse unknown CODECHUNKD_*)
    specs = [SourceSpec.parse(p) for p in args.paths]
    for spec in specs:  # a path that is no source fails now, having created nothing
        common.git_source(spec.path, spec.ref)
    from codechunkd.daemon.control import ensure_socket_dir
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.lease import writer_lock

    paths = IndexPaths.of(settings)
    ensure_socket_dir(paths.runtime)  # refuse a socket directory someone else made
    if not recycled:
        with writer_lock(paths, what="codechunkd run"):
            pass  # refuse early (exit 5) before the slow imports; Service.run takes it for real
    common.refuse_damaged(paths)  # as `index` does: its writer would fail, or hang on a FIFO
    from codechunkd.daemon.service import Service
    from codechunkd.heap import release_freed_memory

    if recycled:
        logs.get_logger("codechunkd.daemon").info("daemon_recycled", times=recycled)
    service = Service(
        settings,
        specs=specs,
        load_settings=lambda: common.settings(args),
        patient=bool(recycled),  # it let go of the lock a moment ago: wait for it, if taken
    )
    if not service.specs():
        sys.stderr.write(
            "codechunkd: error: no sources: pass a PATH, run `codechunkd add PATH`, "
            "or set [daemon] sources\n"
        )
        return 2
    while True:
        code = service.run()
        if service.abandoned:
            # the writer is still inside a batch and holds the lock: end the process now, with
            # no interpreter teardown (which would wait on, or tear down under, that thread);
            # exiting releases the lock, and the next start repairs the pending state
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        if service.recycle is not None and not service.signalled:
            return _exec_again(recycled + 1)
        if not service.restart:
            return code
        service = service.again()  # its index directory was deleted: index anew, same pid
        gc.collect()  # the old one's model and tables, before the new one loads its own
        release_freed_memory()


RECYCLED_ENV = "CODECHUNKD_RECYCLED"
"""How many times this daemon has exec'd itself (``Service.recycle``), set for the next
image: it waits for the writer lock instead of refusing to start."""


def _exec_again(times: int) -> int:
    """This process's image replaced by a new ``codechunkd run`` with the same arguments and
    environment: the same pid, for systemd and whoever watches it; what the native libraries
    kept is given back. Returns 15 (a restart by the service manager) only if exec fails."""
    from codechunkd import logs
    from codechunkd.storage.lease import LeaseLost

    sys.stdout.flush()
    sys.stderr.flush()
    env = {**os.environ, RECYCLED_ENV: str(times)}
    try:
        os.execve(sys.executable, sys.orig_argv, env)  # noqa: S606 - the same argv, no shell
    except OSError as exc:
        logs.get_logger("codechunkd.daemon").error("daemon_exec_failed", error=str(exc))
    return LeaseLost.exit_code


def _edit_sources(args: argparse.Namespace, *, add: bool) -> int:
    from codechunkd.daemon.control import (
        DaemonUnavailable,
        SourceSpec,
        daemon_pid,
        read_sources,
        request,
        write_sources,
    )
    from codechunkd.errors import ConfigError
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.refviews import containing

    paths = IndexPaths.of(common.settings(args))
    file = paths.meta / "sources.json"
    specs = read_sources(file)
    if add:
        git = common.git_source(args.path, args.ref)
        spec = SourceSpec(path=git.source.repo, ref=args.ref)
        if spec in specs:
            print(f"already listed: {spec}")
            return 0
        specs.append(spec)
    else:  # any folder of a listed source, as `add` takes (its repository may be gone)
        given = SourceSpec.parse(args.path + (f"#{args.ref}" if args.ref else ""))
        root = containing(given.path, [s.path for s in specs if s.ref == given.ref])
        if root is None:
            listed = ", ".join(map(str, specs)) or "none"
            sys.stderr.write(f"codechunkd: error: not listed: {given} (listed: {listed})\n")
            return 2
        spec = SourceSpec(path=root, ref=given.ref)
        specs.remove(spec)
    write_sources(file, specs)
    try:
        request(paths.socket, {"cmd": "reload"}, timeout=2.0, running=lambda: daemon_pid(paths))
        running = "; the running daemon follows"
    except DaemonUnavailable:
        running = "; no daemon is running"
    except ConfigError as exc:  # an untrusted socket directory: the list is written anyway
        print(f"{'added' if add else 'removed'} {spec}; the daemon was not told ({exc})")
        return 2
    print(f"{'added' if add else 'removed'} {spec}{running}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    return _edit_sources(args, add=True)


def cmd_remove(args: argparse.Namespace) -> int:
    return _edit_sources(args, add=False)
