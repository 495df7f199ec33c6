"""``codechunkd service install``: a systemd unit (Linux) or a launchd agent (macOS).

Owns the command's parser, the ``--config``/``--index-dir`` the unit's ``codechunkd run``
gets, and printing or installing the plan.  The units' text and how they are installed are
``daemon.systemd`` and ``daemon.launchd``; this module must not write unit files itself.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import codechunkd.cli.common as common
from codechunkd.config import load_settings


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("service", help="systemd units (Linux) or a launchd agent (macOS)")
    ssub = p.add_subparsers(dest="service_command", required=True, metavar="ACTION")
    q = ssub.add_parser("install", help="write and enable the unit (or print what to do)")
    kind = q.add_mutually_exclusive_group()
    kind.add_argument(
        "--user",
        dest="kind",
        action="store_const",
        const="user",
        help="a unit for this user, run by `systemctl --user` (the default)",
    )
    kind.add_argument(
        "--system",
        dest="kind",
        action="store_const",
        const="system",
        help="a template unit codechunkd@NAME for a CI box, one per /etc/codechunkd/NAME.toml",
    )
    q.set_defaults(kind="user")
    q.add_argument(
        "--manager",
        choices=("systemd", "launchd"),
        help="systemd units or a launchd agent (default: what this OS has)",
    )
    q.add_argument("--print", action="store_true", help="print the unit and commands only")
    q.add_argument("--no-enable", action="store_true", help="write the unit, do not enable it")
    common.options(q)  # --config and --index-dir are passed on to the unit's `codechunkd run`


def _service_run_args(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """The ``--config``/``--index-dir`` the unit's ``codechunkd run`` gets (absolute), and
    the local index directory it will write (None: an object store, or the system unit's
    own ``/etc/codechunkd/%i.toml`` decides)."""
    from codechunkd.platform import resolved
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.objectstore import is_local

    run_args: list[str] = []
    index_dir = args.index_dir
    if index_dir and is_local(index_dir):
        index_dir = str(resolved(index_dir.removeprefix("file://")))
    if index_dir:
        run_args += ["--index-dir", index_dir]
    if args.config is not None:
        run_args += ["--config", str(resolved(args.config))]
    if args.kind == "system" and not run_args:
        return run_args, None
    uri = IndexPaths.of(load_settings(config=args.config, overrides={"index.dir": index_dir})).uri
    return run_args, uri if is_local(uri) else None


def cmd_service(args: argparse.Namespace) -> int:
    from codechunkd import platform
    from codechunkd.daemon import launchd, systemd

    manager = args.manager or platform.service_manager()
    if manager is None:
        sys.stderr.write(
            "codechunkd: error: no service manager known on this OS; run `codechunkd run` "
            "(or print one with --manager systemd|launchd --print)\n"
        )
        return 2
    if manager == "launchd" and args.kind == "system":
        sys.stderr.write("codechunkd: error: launchd: only a user agent (--user) is written\n")
        return 2
    run_args, index_dir = _service_run_args(args)
    plan = (
        launchd.plan(run_args=run_args)
        if manager == "launchd"
        else systemd.plan(args.kind, run_args=run_args, index_dir=index_dir)
    )
    if args.print:
        print(f"# {plan.path}\n{plan.text}")
        print("# then run:")
        for cmd in plan.commands:
            print(" ".join(cmd))
        return 0
    if index_dir is not None and args.kind == "user":  # ReadWritePaths= needs it to exist
        Path(index_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        install = launchd.install if manager == "launchd" else systemd.install
        left = install(plan, enable=not args.no_enable)
    except PermissionError:
        sys.stderr.write(
            f"codechunkd: error: cannot write {plan.path} (run as root, or use --print)\n"
        )
        return 1
    print(f"wrote {plan.path}")
    if left:
        print("to finish, run:")
        for line in left:
            print(f"  {line}")
    return 0
