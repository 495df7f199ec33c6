"""``codechunkd verify``: compare the index with a fresh chunking of the source.

Owns the command's parser and its report (exit 1 on a mismatch).  The comparison is
``pipeline.verify``; this module only refuses a damaged index first and prints, and must
not write to the index.
"""

from __future__ import annotations

import argparse
from typing import Any

import codechunkd.cli.common as common


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "verify", help="compare the index with a fresh chunking of the source (exit 1 on mismatch)"
    )
    p.add_argument("path", nargs="?", default=".", help="any folder inside the repository")
    p.add_argument("--ref", help="verify this ref's source (bare mirrors)")
    common.options(p)


def cmd_verify(args: argparse.Namespace) -> int:
    from codechunkd.errors import IndexDamaged
    from codechunkd.pipeline.verify import verify
    from codechunkd.storage.layout import IndexPaths
    from codechunkd.storage.repair import table_damage
    from codechunkd.storage.store import IndexStore

    settings = common.settings(args)
    git = common.git_source(args.path, args.ref)
    paths = IndexPaths.of(settings)
    common.refuse_damaged(paths)
    store = IndexStore(paths.uri, storage_options=paths.storage_options)
    damage = table_damage(store)  # opens every table and index: what a search would trip on
    if damage:
        raise IndexDamaged("; ".join(map(str, damage)))
    report = verify(settings, store, git)
    if args.json:
        common.print_json(report.as_dict())
    elif report.ok:
        print(f"ok: {report.repo}: {report.files} files, {report.rows} rows match the source")
    else:
        print(
            f"MISMATCH: {report.repo}: {len(report.missing)} rows missing, "
            f"{len(report.extra)} extra, {len(report.stale_files)} stale files, "
            f"{report.duplicate_ids} duplicate ids, {report.unusable_vectors} unusable vectors, "
            f"{report.vectorless} without a vector yet, "
            f"{len(report.references_missing)} reference rows missing, "
            f"{len(report.references_extra)} extra"
        )
        if report.vectorless:
            print("  rows without a vector yet: the next `codechunkd index` (or daemon) fills them")
        if report.unusable_vectors:
            print("  unusable vectors (NaN or all zeros): `codechunkd index --rebuild` embeds them")
        for path in report.stale_files[:20]:
            print(f"  stale: {path}")
        for p, start, end, _, _ in report.missing[:20]:
            print(f"  missing: {p} [{start}:{end}]")
        for p, start, end, _, _ in report.extra[:20]:
            print(f"  extra: {p} [{start}:{end}]")
        for label, refs in (
            ("missing", report.references_missing),
            ("extra", report.references_extra),
        ):
            for p, _, kind, name, _, _, line in refs[:20]:
                print(f"  {label} reference: {p}:{line} {kind} {name}")
    return 0 if report.ok else 1
