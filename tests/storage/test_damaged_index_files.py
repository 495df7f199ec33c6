"""Files of the index directory that are gone, of the wrong kind or of the wrong shape:
damage that every command sees, says in one line, and that `index --rebuild` repairs.

A table folder deleted or replaced by a file or a dangling link went unnoticed (`status`
said fresh, `index` said unchanged); a FIFO in place of a file hung `status`, `index`,
`search` or `run`, and a link to ``/dev/zero`` filled memory; a stray manifest name made the
cheap check recurse for ever or fail with ValueError; ``state.json`` fields of the wrong
type crashed ``status``; and ``index --rebuild`` could not remove a table path that is no
plain directory, nor a ``state.json`` that is one.

A tiny real repository is indexed once with the real CLI; each case damages its own copy
of that index and runs the real CLI (or the real ``quick_damage``), with a hang detector.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.conftest import Repo, run_cli

from codechunkd.config import load_settings
from codechunkd.errors import IndexDamaged
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.repair import quick_damage

pytestmark = pytest.mark.slow

DAMAGED = IndexDamaged.exit_code
FRESH = 13  # status: every source fresh, no daemon running

#: A hang detector far above the need (each command answers in seconds): a command still
#: running then is blocked on a FIFO, or serving (a `run` that did not refuse).
HANG_S = 60.0


def _run(*args: str, index: Path, cap_memory: bool = False) -> subprocess.CompletedProcess[str]:
    """The real CLI on ``index`` (``run_cli``).  ``cap_memory``: 1 GiB of address space, so
    a read of ``/dev/zero`` fails the test instead of taking the machine (as the auditor
    ran it)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return run_cli(*args, index=index, hang_s=HANG_S, preexec_fn=cap if cap_memory else None)


def _damaged(done: subprocess.CompletedProcess[str], says: str) -> None:
    """Exit 8 with the damage said in one line: `DAMAGED: ...` for status, else one
    ``codechunkd: error:`` line that suggests the rebuild."""
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr, done.stderr
    assert done.returncode == DAMAGED, (done.args, done.returncode, done.stdout, done.stderr)
    if done.args[1] == "status":
        assert f"DAMAGED: {says}" in done.stdout, done.stdout
        return
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("codechunkd: error: "), done.stderr
    assert says in lines[0] and "codechunkd index --rebuild" in lines[0], lines[0]


def _rebuilt(repo: Repo, ix: Path) -> str:
    """`index --rebuild` recovers: verify clean, status fresh, search finds; its stderr."""
    done = _run("index", str(repo.path), "--rebuild", index=ix)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    verified = _run("verify", str(repo.path), index=ix)
    assert verified.returncode == 0 and verified.stdout.startswith("ok: "), verified.stdout
    status = _run("status", index=ix)
    assert status.returncode == FRESH and "DAMAGED" not in status.stdout, status.stdout
    found = _run("search", "haversine", "--mode", "text", "--json", index=ix)
    assert found.returncode == 0 and "haversine" in found.stdout, found.stderr
    return done.stderr


@pytest.fixture
def ix(indexed: tuple[Repo, Path], tmp_path: Path) -> Path:
    """This test's own copy of the healthy index."""
    copy = tmp_path / "index"
    shutil.copytree(indexed[1], copy, symlinks=True)
    return copy


NEWEST_V2 = "18446744073709551000.manifest"
"""A V2 manifest name (they count down from 2**64-1) newer than any the index has."""


# -- a table folder gone, or not a folder -------------------------------------------


@pytest.mark.parametrize("table", ["chunks", "files"])
def test_a_deleted_table_folder_is_damage_that_every_command_sees(
    table: str, indexed: tuple[Repo, Path], ix: Path
) -> None:
    """`rm -rf chunks.lance`: status said fresh, search "no results", index "unchanged", and
    `run` never indexed again; only verify saw it.  Now each says it (exit 8; `run` refuses
    before it starts), and the rebuild indexes every source again.  (A missing
    `references.lance` is no damage: an index made before that table existed has none.)"""
    repo, _ = indexed
    shutil.rmtree(ix / f"{table}.lance")
    says = f"{table}.lance: missing"
    _damaged(_run("status", index=ix), says)
    _damaged(_run("search", "haversine", "--mode", "text", index=ix), says)
    _damaged(_run("index", str(repo.path), index=ix), says)
    _damaged(_run("run", str(repo.path), index=ix), says)
    _rebuilt(repo, ix)


def _a_file(ix: Path, outside: Path) -> None:
    shutil.rmtree(ix / "chunks.lance")
    (ix / "chunks.lance").write_text("x\n")


def _a_dangling_link(ix: Path, outside: Path) -> None:
    shutil.rmtree(ix / "chunks.lance")
    (ix / "chunks.lance").symlink_to(outside / "nonexistent")


def _a_link_to_a_damaged_folder(ix: Path, outside: Path) -> None:
    (ix / "chunks.lance").rename(outside / "chunks.lance")
    (ix / "chunks.lance").symlink_to(outside / "chunks.lance", target_is_directory=True)
    for data in (outside / "chunks.lance" / "data").iterdir():
        data.unlink()


NOT_A_FOLDER: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "a file": (_a_file, "chunks.lance: not a directory"),
    "a dangling link": (_a_dangling_link, "chunks.lance: not a directory"),
    "a link to a damaged folder": (_a_link_to_a_damaged_folder, "chunks.lance: missing data"),
}


@pytest.mark.parametrize("case", list(NOT_A_FOLDER))
def test_rebuild_removes_a_table_path_that_is_no_plain_folder(
    case: str, indexed: tuple[Repo, Path], ix: Path, tmp_path: Path
) -> None:
    """`index --rebuild` failed on these ("Cannot call rmtree on a symbolic link", "Not a
    directory"; a dangling link: said "removed", removed the other tables, then failed at
    every run).  A link or file is unlinked, never what a link points to."""
    repo, _ = indexed
    outside = tmp_path / "outside"
    outside.mkdir()
    damage, says = NOT_A_FOLDER[case]
    damage(ix, outside)
    _damaged(_run("status", index=ix), says)
    repaired = _rebuilt(repo, ix)
    assert f"codechunkd: repaired: removed {says}" in repaired, repaired
    assert (ix / "chunks.lance").is_dir() and not (ix / "chunks.lance").is_symlink()
    if case == "a link to a damaged folder":  # what the link pointed to is not the index's
        assert (outside / "chunks.lance" / "_versions").is_dir()


def test_rebuild_removes_a_state_json_that_is_a_directory(
    indexed: tuple[Repo, Path], ix: Path
) -> None:
    """`index --rebuild` failed with "[Errno 21] Is a directory" (unlink of a folder)."""
    repo, _ = indexed
    state = ix / "_codechunkd" / "state.json"
    state.unlink()
    (state / "inside").mkdir(parents=True)
    says = "state.json: unreadable (a directory, not a regular file)"
    _damaged(_run("status", index=ix), says)
    _damaged(_run("index", str(repo.path), index=ix), says)
    repaired = _rebuilt(repo, ix)
    assert "codechunkd: repaired: removed state.json" in repaired, repaired
    assert state.is_file()


# -- FIFOs and devices where a file should be: damage, never a hang --------------------


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


SPECIAL: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "state.json a FIFO": (_fifo, "_codechunkd/state.json", "state.json: unreadable (a named pipe"),
    "cache.sqlite a FIFO": (
        _fifo,
        "_codechunkd/cache.sqlite",
        "cache.sqlite: unreadable (a named pipe",
    ),
    "the newest manifest a FIFO": (
        _fifo,
        f"chunks.lance/_versions/{NEWEST_V2}",
        f"chunks.lance: unreadable manifest {NEWEST_V2} (a named pipe",
    ),
    "state.json /dev/zero": (
        _dev_zero,
        "_codechunkd/state.json",
        "state.json: unreadable (a character device",
    ),
    "the newest manifest /dev/zero": (
        _dev_zero,
        f"chunks.lance/_versions/{NEWEST_V2}",
        f"chunks.lance: unreadable manifest {NEWEST_V2} (a character device",
    ),
}


@pytest.mark.parametrize("case", list(SPECIAL))
def test_a_fifo_or_device_in_place_of_an_index_file_is_damage_not_a_hang(
    case: str, indexed: tuple[Repo, Path], ix: Path
) -> None:
    """A FIFO hung status and index (waiting for a writer that never comes); a link to
    ``/dev/zero`` was read until memory ran out.  Both are damage now, said at once, and the
    rebuild sets them aside without opening them with SQLite or LanceDB."""
    repo, _ = indexed
    make, where, says = SPECIAL[case]
    make(ix / where)
    _damaged(_run("status", index=ix, cap_memory=True), says)
    _damaged(_run("index", str(repo.path), index=ix), says)
    _rebuilt(repo, ix)


def test_a_fifo_data_file_is_refused_by_run_and_search_and_removed_by_rebuild(
    indexed: tuple[Repo, Path], ix: Path
) -> None:
    """A data file of chunks.lance replaced by a FIFO hung `run`'s writer, a local search,
    `defs`, `map` and `index --rebuild` (inside LanceDB's validation); the cheap check saw
    it, and only status asked it.  Now run and every reader (``open_index``: search, defs,
    refs, map, the MCP server) refuse with it, and the rebuild removes the tables before
    LanceDB opens them."""
    repo, _ = indexed
    data = next((ix / "chunks.lance" / "data").glob("*.lance"))
    _fifo(data)
    says = f"chunks.lance: missing data file {data.name}"
    _damaged(_run("search", "haversine", "--mode", "text", index=ix), says)
    _damaged(_run("defs", "haversine", index=ix), says)
    _damaged(_run("map", index=ix), says)
    _damaged(_run("run", str(repo.path), index=ix), says)
    repaired = _rebuilt(repo, ix)
    assert f"codechunkd: repaired: removed {says}" in repaired, repaired


# -- stray manifest names --------------------------------------------------------------


def test_stray_manifest_names_neither_loop_nor_crash_the_cheap_check(ix: Path) -> None:
    """A dangling link named as the newest manifest made ``table_dir_damage`` call itself on
    FileNotFoundError for ever (RecursionError); ``².manifest`` passed ``str.isdigit`` and
    failed ``int()`` (ValueError).  The first is damage, said once; the second is no
    manifest name at all."""
    paths = IndexPaths.of(load_settings(env={}, overrides={"index.dir": str(ix)}))
    versions = ix / "chunks.lance" / "_versions"
    (versions / "².manifest").write_bytes(b"")
    assert quick_damage(paths) == []
    (versions / NEWEST_V2).symlink_to(ix / "nonexistent")
    (found,) = quick_damage(paths)
    assert (found.what, found.table) == ("chunks.lance", "chunks")
    assert found.reason.startswith(f"unreadable manifest {NEWEST_V2} ("), found.reason
    assert "No such file or directory" in found.reason


# -- state.json fields of the wrong type -------------------------------------------------

WRONG_TYPES = {
    "git_dir a number": ("git_dir", 5),
    "git_dir a list": ("git_dir", []),
    "ref a number": ("ref", 7),
    "commit a number": ("commit", 12),
    "files a string": ("files", "x"),
    "git_dir with a NUL": ("git_dir", "/tmp/a\0b"),
    "skipped a list": ("skipped", ["binary"]),
    "skipped counts as strings": ("skipped", {"binary": "2"}),
}


def _set_field(ix: Path, key: str, value: object) -> None:
    state = ix / "_codechunkd" / "state.json"
    doc = json.loads(state.read_text())
    doc["sources"][0][key] = value
    state.write_text(json.dumps(doc))


@pytest.mark.parametrize("case", list(WRONG_TYPES))
def test_a_state_field_of_the_wrong_type_is_damage(case: str, ix: Path) -> None:
    """``"git_dir": 5`` and the like crashed status (TypeError, AttributeError, "embedded null
    byte") and were no damage, so nothing repaired them.  Each is damage now."""
    key, value = WRONG_TYPES[case]
    _set_field(ix, key, value)
    _damaged(_run("status", index=ix), f"state.json: a source entry's {key!r}")


def test_a_state_field_of_the_wrong_type_is_refused_by_index_and_repaired(
    indexed: tuple[Repo, Path], ix: Path
) -> None:
    """The plain `index` refuses (it read the entry as fresh), and the rebuild rewrites it."""
    repo, _ = indexed
    _set_field(ix, "git_dir", 5)
    says = "state.json: a source entry's 'git_dir' has the wrong type (int)"
    _damaged(_run("index", str(repo.path), index=ix), says)
    repaired = _rebuilt(repo, ix)
    assert f"codechunkd: repaired: removed state.json ({says[len('state.json: ') :]})" in repaired
    doc = json.loads((ix / "_codechunkd" / "state.json").read_text())
    assert isinstance(doc["sources"][0]["git_dir"], str)
