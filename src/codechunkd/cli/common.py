"""What every command shares: the common options, the settings, a source, JSON out, damage.

Owns the options most commands take (``--config``, ``--index-dir``, ``--json``, ``-v``),
the settings a command runs with (a private umask, and an index that must exist for the
commands that read one), opening a source by its path, printing one JSON document, and
the index damage visible without LanceDB.  Must not import LanceDB, torch, pygit2 or the
daemon at its top: every command module imports this one, ``status --help`` included, so
anything heavy is imported inside the function that needs it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from codechunkd.config import Settings, load_settings


def options(p: argparse.ArgumentParser) -> None:
    """The options most commands take (``mcp`` takes its own three)."""
    p.add_argument(
        "--config",
        type=Path,
        help="settings file (default: $XDG_CONFIG_HOME/codechunkd/config.toml)",
    )
    p.add_argument(
        "--index-dir", help="index directory or URI (default: $XDG_DATA_HOME/codechunkd/index)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug details")


#: Commands that read an index: a missing one is an error, never created (a typo'd --index-dir).
#: (search.py, status.py, verify.py, and refs.py's defs, refs and map.)
READ_COMMANDS = frozenset({"search", "status", "verify", "defs", "refs", "map"})


def settings(args: argparse.Namespace, *, check_index: bool = True) -> Settings:
    """The settings, with what every command needs first: a private umask, an index to read
    (``check_index=False``: the caller looks at the index itself)."""
    from codechunkd.errors import StoreError
    from codechunkd.storage.layout import IndexPaths, private_umask

    settings = load_settings(config=args.config, overrides={"index.dir": args.index_dir})
    private_umask()  # the index, its cache and the socket hold source code
    command = getattr(args, "command", None)
    # `status` on the default index before anything was indexed says so (exit 12/13);
    # a directory named on the command line must be an index for every read command.
    if check_index and command in READ_COMMANDS and (args.index_dir or command != "status"):
        problem = IndexPaths.of(settings).index_problem()
        if problem:
            raise StoreError(f"{problem}; check --index-dir, or `codechunkd index` to make one")
    return settings


def git_source(path: str, ref: str | None = None) -> Any:
    """The source at ``path`` (``GitSource``); a path that does not exist says so (exit 3)."""
    from codechunkd.errors import RepoError
    from codechunkd.git.changes import GitSource

    if not os.path.exists(path):
        raise RepoError(f"{path} does not exist")
    return GitSource(path, ref=ref)  # NotAGitRepo / RefNotFound: exit 3


def repo_options(p: argparse.ArgumentParser) -> None:
    """``--repo`` and ``--all-repos``, for the commands that read every repository's rows
    (``search``, ``defs``, ``refs``): by default, the repository the current folder is in."""
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--repo",
        help="only this repository (its root, or any folder in it) and the indexed ones inside "
        "it (default: the indexed repository you are in, else every one)",
    )
    g.add_argument(
        "--all-repos", action="store_true", help="every indexed repository, wherever you are"
    )


def scope(args: argparse.Namespace, roots: Collection[str]) -> str | None:
    """The repository ``search``, ``defs`` and ``refs`` read (None: every one): ``--repo``'s;
    else, unless ``--all-repos``, the indexed repository the current folder is in (a daemon
    following several projects answers about the one you work in, as ``map`` does)."""
    if args.repo:
        return indexed_repo(args.repo, roots)
    if args.all_repos:
        return None
    from codechunkd.storage.refviews import repository_of

    return repository_of(".", roots)


def scope_note(args: argparse.Namespace, repo: str | None, roots: Collection[str]) -> str:
    """After an empty answer read in the repository the current folder is in (no
    ``--repo``): that it read only that one, when others are indexed; else ``""``."""
    if repo is None or args.repo:
        return ""
    from codechunkd.storage.refviews import beyond

    others = beyond(repo, roots)
    if not others:
        return ""
    more = "another indexed repository" if others == 1 else f"{others} other indexed repositories"
    return f"only {repo} was read, the repository you are in ({more}: --all-repos)"


def indexed_repo(folder: str | None, roots: Collection[str]) -> str | None:
    """``--repo FOLDER``: the indexed repository (of ``roots``) the folder is in, so that
    ``--repo .`` works anywhere in a checkout; with no roots to check against, the folder
    made absolute. A folder in none is an error naming the indexed ones."""
    if not folder:
        return None
    from codechunkd.storage.refviews import repository_of

    if not roots:
        return str(Path(folder).resolve())
    found = repository_of(folder, roots)
    if found is None:
        raise not_indexed(folder, roots, key="repo")
    return found


def not_indexed(folder: str, roots: Collection[str], *, key: str) -> Exception:
    """The error for a folder in no indexed repository: it names the indexed ones."""
    from codechunkd.errors import ConfigError

    indexed = ", ".join(sorted(roots)) or "none"
    return ConfigError(f"{folder} is in no indexed repository (indexed: {indexed})", key=key)


def print_json(doc: object) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


def damage_lines(paths: Any) -> list[str]:
    """Damage visible without importing LanceDB (``storage.repair.quick_damage``)."""
    from codechunkd.storage.repair import quick_damage

    return [str(d) for d in quick_damage(paths)]


def refuse_damaged(paths: Any) -> None:
    """Raise ``IndexDamaged`` for damage visible without LanceDB."""
    from codechunkd.storage.repair import refuse_damage

    refuse_damage(paths)
