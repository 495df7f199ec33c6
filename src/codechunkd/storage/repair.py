"""Finding damage in an index directory, and ``repair``: what ``index --rebuild`` runs first.

The index is derived data (git is the source of truth), so repairing it means
setting aside what cannot be opened and indexing again:

- ``state.json`` that is not a valid copy of ``repos`` is removed (the writer
  writes it again after its next commit);
- ``cache.sqlite`` that is no SQLite file, or that SQLite calls corrupt
  (``PRAGMA quick_check``), is renamed ``cache.sqlite.corrupt-<time>`` (a healthy
  one is kept: its vectors are what makes a rebuild cheap);
- an index of a table (full-text, vector) whose files are missing or unreadable
  is dropped (the next sync builds it again);
- a table that cannot be opened or read (a lost data file, an overwritten or
  missing manifest) is removed with the three others: ``files``, ``repos`` and
  ``references`` describe the rows of ``chunks``, so one without the others would lie
  (a file or a link in a table's place is unlinked, never what the link points to).

``quick_damage`` is the cheap look ``status``, a plain ``index``, ``run``, a local
``search`` and ``repair`` itself take before LanceDB or SQLite opens anything: each table
is a directory (and is there at all while ``state.json`` lists sources), the files the
latest manifest of each table names exist, and the cache and state files look like what
they should be.  Every file it reads must be a regular file (``open_regular_file``): a
FIFO would block, ``/dev/zero`` would never end.  ``table_damage`` opens everything
with LanceDB (``verify`` and ``repair``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from codechunkd.errors import IndexDamaged, StoreError
from codechunkd.regularfile import open_regular_file
from codechunkd.storage._errors import one_line
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.objectstore import is_local
from codechunkd.storage.statefile import load_state_file, read_index_file

if TYPE_CHECKING:
    from codechunkd.storage.store import IndexStore

TABLES = ("chunks", "files", "repos", "references")
"""Every table of an index: each describes the rows of ``chunks``, so they go together."""
_SQLITE_MAGIC = b"SQLite format 3\x00"
_LANCE_MAGIC = b"LANC"


@dataclass(frozen=True, slots=True)
class Damage:
    """One thing of the index directory that cannot be used."""

    what: str
    """``chunks.lance``, ``the index fts_text_idx of chunks``, ``cache.sqlite``, ..."""
    reason: str
    table: str | None = None
    """The table it belongs to (for a table or one of its indexes)."""
    index: str | None = None
    """The index's name, for a damaged index (the table's rows are fine)."""

    def __str__(self) -> str:
        return f"{self.what}: {self.reason}"


def _local_root(uri: str) -> Path | None:
    return Path(uri.removeprefix("file://")) if is_local(uri) else None


# -- the cheap look (no LanceDB) ---------------------------------------------------


def cache_header_damage(path: Path) -> str | None:
    """Why ``cache.sqlite`` is not an SQLite file, from its first bytes (a FIFO, a device
    or a directory in its place is not one either)."""
    try:
        with open_regular_file(path) as f:
            head = f.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable ({one_line(exc)})"
    if head and head != _SQLITE_MAGIC:
        return "not an SQLite database"
    return None


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, bytes | int]]:
    """The (field number, value) pairs of a protobuf message (length-delimited as bytes)."""
    out: list[tuple[int, bytes | int]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(buf, i)
            if i + size > len(buf):
                raise ValueError("truncated field")
            out.append((number, buf[i : i + size]))
            i += size
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
    return out


def manifest_data_files(data: bytes) -> list[str]:
    """Paths of the data files a Lance manifest names (``Manifest.fragments[].files[].path``).

    The manifest is a length-prefixed protobuf at the offset its 16-byte footer gives
    (offset, format version, ``LANC``).  Raises ``ValueError`` on anything else.
    """
    if len(data) < 16 or data[-4:] != _LANCE_MAGIC:
        raise ValueError("no Lance footer")
    (pos,) = struct.unpack("<Q", data[-16:-8])
    if pos + 4 > len(data) - 16:
        raise ValueError("manifest offset out of range")
    (size,) = struct.unpack("<I", data[pos : pos + 4])
    message = data[pos + 4 : pos + 4 + size]
    paths: list[str] = []
    for number, fragment in _fields(message):
        if number != 2 or not isinstance(fragment, bytes):  # Manifest.fragments
            continue
        for fnum, file in _fields(fragment):
            if fnum != 2 or not isinstance(file, bytes):  # DataFragment.files
                continue
            for pnum, path in _fields(file):
                if pnum == 1 and isinstance(path, bytes):  # DataFile.path
                    paths.append(path.decode())
    return paths


def _latest_manifest(versions: Path) -> Path | None:
    """The latest manifest: V2 names count down from 2**64-1, V1 names count up."""
    numbered = [
        (int(p.stem), p)
        for p in versions.glob("*.manifest")
        if p.stem.isascii() and p.stem.isdigit()  # not "²", which int() refuses
    ]
    if not numbered:
        return None
    if all(n >= 1 << 63 for n, _ in numbered):
        return min(numbered)[1]
    return max(numbered)[1]


NOT_MADE = "no version manifest (_versions/ is missing or empty)"


def table_dir_damage(table_dir: Path, *, again: bool = True) -> str | None:
    """Why a local ``<table>.lance`` directory cannot be opened (from its files alone).

    Damage found while a newer manifest appeared (a commit landed while we looked) is
    looked at ``again``, once: a stray manifest that cannot be read is damage, not a loop."""
    versions = table_dir / "_versions"
    latest = _latest_manifest(versions)
    if latest is None:
        return NOT_MADE
    why = _manifest_damage(table_dir, latest)
    if why is not None and again and _latest_manifest(versions) != latest:
        return table_dir_damage(table_dir, again=False)
    return why


def _manifest_damage(table_dir: Path, manifest: Path) -> str | None:
    """Why the table's version ``manifest`` cannot be used: unreadable (a FIFO, a device, a
    dangling link, not a manifest), or it names a data file that is not there."""
    try:
        names = manifest_data_files(read_index_file(manifest))
    except (OSError, ValueError) as exc:
        return f"unreadable manifest {manifest.name} ({one_line(exc)})"
    missing = [n for n in names if not (table_dir / "data" / n).is_file()]
    if missing:
        return f"missing data file {missing[0]}" + (
            f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        )
    return None


def quick_damage(paths: IndexPaths) -> list[Damage]:
    """What is visibly damaged, without importing LanceDB (milliseconds: for ``status``)."""
    found: list[Damage] = []
    state, why = load_state_file(paths.state_file)  # read once: its damage, its sources
    if why is not None:
        found.append(Damage("state.json", why))
    if (why := cache_header_damage(paths.cache)) is not None:
        found.append(Damage("cache.sqlite", why))
    root = _local_root(paths.uri)
    if root is None:
        return found
    listed = bool((state or {}).get("sources"))
    for name in TABLES:
        table_dir = root / f"{name}.lance"
        # its rows are gone while state.json says sources are indexed (not `references`:
        # an index made before it existed has none, and reads take its absence as no
        # references; the writer creates it)
        needed = listed and name != "references"
        if table_dir.is_dir():
            why = table_dir_damage(table_dir)
            if why == NOT_MADE and not needed:
                why = None  # a table being made (or whose making a crash cut): no table yet
        elif os.path.lexists(table_dir):
            why = "not a directory"  # a file, a dangling link
        else:
            why = "missing" if needed else None
        if why is not None:
            found.append(Damage(table_dir.name, why, table=name))
    return found


def refuse_damage(paths: IndexPaths, *, tables_only: bool = False) -> None:
    """``IndexDamaged`` naming what ``quick_damage`` sees (``tables_only``: in the tables,
    what a reader would fail or hang on), or nothing."""
    found = [str(d) for d in quick_damage(paths) if d.table is not None or not tables_only]
    if found:
        raise IndexDamaged("; ".join(found))


# -- the thorough look (LanceDB) ---------------------------------------------------


def table_damage(store: IndexStore) -> list[Damage]:
    """Open every table and index of ``store`` and read what can be read cheaply.

    A table: its manifest, the existence of its data files (``validate``); an index:
    all its files (``prewarm_index``).  A table missing while ``repos`` lists sources
    is damage too: the index claims rows it does not have.
    """
    found: list[Damage] = []
    root = _local_root(store.uri)
    try:
        listed = set(store.db.list_tables().tables)
    except Exception as exc:  # noqa: BLE001 - a listing that fails is damage to report
        return [Damage("the index directory", one_line(exc))]
    present = {n for n in TABLES if n in listed or (root and (root / f"{n}.lance").is_dir())}
    opened = {}
    for name in sorted(present):
        try:
            tbl = store.db.open_table(name)
            tbl.to_lance().validate()
        except Exception as exc:  # noqa: BLE001 - LanceDB raises several types
            found.append(Damage(f"{name}.lance", one_line(exc), table=name))
            continue
        opened[name] = tbl
        try:
            indices = list(tbl.list_indices())
        except Exception as exc:  # noqa: BLE001
            found.append(Damage(f"the indexes of {name}", one_line(exc), table=name))
            continue
        for ix in indices:
            try:
                tbl.prewarm_index(ix.name)
            except Exception as exc:  # noqa: BLE001
                what = f"the index {ix.name} of {name}"
                found.append(Damage(what, one_line(exc), table=name, index=ix.name))
    if "repos" in opened and not found:
        try:
            sources = int(opened["repos"].count_rows())
        except Exception as exc:  # noqa: BLE001
            return [Damage("repos.lance", one_line(exc), table="repos")]
        for name in TABLES:
            if sources and name not in present:
                found.append(Damage(f"{name}.lance", "missing", table=name))
    return found


# -- repair --------------------------------------------------------------------------


def _aside(path: Path, stamp: str) -> Path:
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    path.rename(target)
    return target


def cache_damage(path: Path) -> str | None:
    """What SQLite says is wrong with ``cache.sqlite`` (``PRAGMA quick_check``), if anything."""
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(path)
        try:
            rows = db.execute("PRAGMA quick_check").fetchall()
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:  # "file is not a database", "malformed"
        return one_line(exc)
    if rows != [("ok",)]:
        return "; ".join(str(r[0]) for r in rows[:3])
    return None


def repair(paths: IndexPaths) -> list[str]:
    """Set aside or drop whatever of the index cannot be used; one line per action.

    Run it holding the writer lock, before opening the index for writing.  What
    ``quick_damage`` sees is dealt with before SQLite or LanceDB opens anything: a FIFO
    where a file should be would block them.
    """
    from codechunkd.storage.store import IndexStore

    done: list[str] = []
    stamp = time.strftime("%Y%m%dT%H%M%S")
    quick = quick_damage(paths)
    seen = {d.what: d.reason for d in quick}
    if "state.json" in seen:
        _remove(paths.state_file)
        done.append(
            f"removed state.json ({seen['state.json']}); it is written again from the index"
        )
    if (why := seen.get("cache.sqlite") or cache_damage(paths.cache)) is not None:
        moved = _aside(paths.cache, stamp)
        for suffix in ("-wal", "-shm"):
            side = paths.cache.with_name(paths.cache.name + suffix)
            with contextlib.suppress(FileNotFoundError):
                _aside(side, stamp)
        done.append(f"moved cache.sqlite aside to {moved.name} ({why}); vectors are computed again")
    store = IndexStore(paths.uri, storage_options=paths.storage_options)
    broken_tables = [d for d in quick if d.table is not None]
    damage = [] if broken_tables else table_damage(store)
    broken_tables += [d for d in damage if d.index is None]
    for d in damage:
        if d.index is not None and not broken_tables:
            try:
                store.db.open_table(d.table).drop_index(d.index)
            except Exception as exc:  # noqa: BLE001 - then the table goes, below
                why = f"{d.reason}; dropping it: {one_line(exc)}"
                broken_tables.append(Damage(d.what, why, table=d.table))
                continue
            done.append(f"dropped {d.what} ({d.reason}); it is built again")
    if broken_tables:
        done += _remove_tables(store, broken_tables)
    return done


def _remove(path: Path) -> bool:
    """Remove ``path``: a directory with all it holds, anything else (a file, a FIFO, a
    link: never what it points to) by itself.  False when there was nothing; an error is
    a one-line ``StoreError``."""
    try:
        if stat.S_ISDIR(path.lstat().st_mode):
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StoreError(f"cannot remove {path}: {exc.strerror or one_line(exc)}") from exc
    return True


def _remove_tables(store: IndexStore, damage: list[Damage]) -> list[str]:
    """Remove every table (the damaged ones and those that describe the same rows)."""
    root = _local_root(store.uri)
    removed = []
    for name in TABLES:
        if root is not None:
            if _remove(root / f"{name}.lance"):
                removed.append(name)
            continue
        try:
            store.db.drop_table(name)
        except Exception:  # noqa: BLE001, S112 - absent or unreadable: nothing to keep
            continue
        removed.append(name)
    done = [f"removed {d}" if d.table in removed else str(d) for d in damage]
    others = [f"{n}.lance" for n in removed if not any(d.table == n for d in damage)]
    if others:
        done.append(
            f"removed {', '.join(others)} with it; every source is indexed again "
            "(cached vectors are reused)"
        )
    return done
