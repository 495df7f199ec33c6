"""Where the files of one index live.

A local index directory holds the LanceDB tables and, in ``_codechunkd/``, the
writer's private files: the embedding cache, the writer lock and ``state.json``
(a copy of the ``repos`` table that ``codechunkd status`` reads without
importing LanceDB, whose import alone takes seconds).  For an object-store URI
those private files live under ``$XDG_STATE_HOME/codechunkd/<hash of the URI>``.

Everything here is private to the user: the index holds source code.
``private_umask`` makes what the process creates 0700/0600 whatever the
umask (a umask that already denies others everything, like the system unit's
``UMask=0027``, keeps its group bits: the group mode is opt-in), and
``private_dir`` makes (or accepts) the one directory whose trust matters
before anything is created in it: the control socket's.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from codechunkd import platform
from codechunkd.config.settings import Settings, default_runtime_dir
from codechunkd.errors import StoreError
from codechunkd.storage.objectstore import ObjectStore, is_local


def _kind(path: Path) -> str:
    """``a file``, ``a directory``, ``a FIFO``, ... (following symlinks, as opening does)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "unreachable"
    for test, name in (
        (stat.S_ISREG, "a file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    ):
        if test(mode):
            return name
    return "not a directory"


def private_umask() -> int:
    """Deny others (and, unless the umask already denied others all, the group) every access.

    A umask of 022 or 002 is a default nobody chose for an index of source code; one that
    already denies others everything (027, 007, 077) was chosen, and its group bits stay.
    Returns the umask now in force.
    """
    old = os.umask(0o077)
    new = old if old & 0o007 == 0o007 else old | 0o077
    os.umask(new)
    return new


def trust_problem(path: Path, info: os.stat_result) -> str | None:
    """Why an existing directory (``lstat``) cannot be trusted to be ours alone, or None."""
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory"
    if info.st_uid != os.geteuid():
        return f"{path} is owned by uid {info.st_uid}, not by you (uid {os.geteuid()})"
    if info.st_mode & 0o077:
        return f"{path} has mode {stat.S_IMODE(info.st_mode):04o}, not 0700"
    return None


def _foreign(path: Path) -> str | None:
    """Why another user could change ``path`` (owned by them, or writable by everyone), or
    None; a path that is not there is nobody's yet.  Group write is left alone: a umask of
    0002 (user private groups) gives it to every directory a user makes."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if info.st_uid != os.geteuid():
        return f"{path} is owned by uid {info.st_uid}, not by you (uid {os.geteuid()})"
    if info.st_mode & 0o002:
        return f"{path} can be written by every user (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def private_dir(path: Path) -> str | None:
    """Create ``path`` mode 0700 (its parents as the umask says), or check an existing one.

    An existing directory is used only when it is not a symbolic link, is owned by this
    user and grants nothing to group or others; otherwise the reason is returned (another
    user may have made it first, in ``/tmp``, to plant a socket of their own).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError as exc:
        if exc.filename != str(path):  # a file where a parent should be
            return f"cannot make {path}: {exc.filename} is not a directory"
        return trust_problem(path, os.lstat(path))
    except OSError as exc:  # /proc/…, a read-only file system, no permission
        return f"cannot make {path}: {exc.strerror or exc}"
    os.chmod(path, 0o700)  # whatever the umask
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexPaths:
    uri: str
    """The LanceDB URI (a local directory or an object-store URI)."""
    meta: Path
    """Private files of the writer."""
    runtime: Path
    """Runtime files of a daemon (its control socket)."""
    store: ObjectStore | None = field(default=None, compare=False)
    """How to reach an object-store index (None: a local directory)."""
    lease_s: float = 60.0
    """How long the writer's lease on an object-store index lasts unless renewed."""

    @property
    def storage_options(self) -> dict[str, str]:
        """LanceDB's ``storage_options`` for the index (secrets included: never log them)."""
        return self.store.storage_options() if self.store else {}

    @property
    def cache(self) -> Path:
        return self.meta / "cache.sqlite"

    @property
    def lock(self) -> Path:
        return self.meta / "writer.lock"

    @property
    def runtime_lock(self) -> Path:
        """The writer lock outside the index directory (it outlives the directory's removal)."""
        return self.runtime / f"{self.key}.lock"

    @property
    def state_file(self) -> Path:
        return self.meta / "state.json"

    @property
    def socket(self) -> Path:
        return self.runtime / f"{self.key}.sock"

    @property
    def key(self) -> str:
        return hashlib.sha256(self.uri.encode()).hexdigest()[:12]

    def index_problem(self) -> str | None:
        """Why a local index cannot be read (missing, not a directory, not an index), or None.

        An object-store URI is not checked here (that would cost a round trip).
        """
        if not is_local(self.uri):
            return None
        root = Path(self.uri)
        if not root.exists():
            return f"no index at {root}"
        if not root.is_dir():
            return f"{root} is {_kind(root)}, not an index directory"
        if not (self.meta.is_dir() or (root / "chunks.lance").is_dir()):
            return f"{root} is not a codechunkd index"
        return None

    def make_local(self) -> None:
        """Make a local index's directory and its private one when missing, or raise a
        ``StoreError`` saying what is in the way: ``--index-dir`` naming a file, or a path
        under a file or where nothing can be made (``/proc/...``).  An object-store URI is
        not touched.  The writer calls it before anything else looks at the directory."""
        if not is_local(self.uri):
            return
        root = Path(self.uri)
        for path in (root, *root.parents):  # the nearest that exists says what is in the way
            try:
                info = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError:
                break
            if not stat.S_ISDIR(info.st_mode):
                if path == root:
                    raise StoreError(
                        f"{root} is {_kind(root)}, not an index directory; --index-dir (or "
                        "index.dir) names the directory of an index, or where to make one"
                    )
                raise StoreError(f"cannot make the index directory {root}: {path} is {_kind(path)}")
            break
        try:
            self.meta.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename and exc.filename != str(root) else ""
            raise StoreError(
                f"cannot make the index directory {root}: {exc.strerror or exc}{where}"
            ) from None
        for path in (self.meta, self.cache):  # what decides the rows the writer writes
            problem = _foreign(path)
            if problem:
                raise StoreError(
                    f"{problem}: another user could change what this index holds (its "
                    "embedding cache, its state); remove it, or use another --index-dir"
                )

    @classmethod
    def of(cls, settings: Settings) -> IndexPaths:
        uri = settings.index.dir
        if is_local(uri):
            uri = str(platform.resolved(uri.removeprefix("file://")))
            return cls(uri=uri, meta=Path(uri) / "_codechunkd", runtime=Path(default_runtime_dir()))
        uri = uri.rstrip("/")
        state = str(platform.user_dir("state"))  # XDG, or ~/Library/Application Support
        return cls(
            uri=uri,
            meta=Path(state) / "codechunkd" / hashlib.sha256(uri.encode()).hexdigest()[:12],
            runtime=Path(default_runtime_dir()),
            store=ObjectStore.from_settings(settings.object_store),
            lease_s=settings.object_store.lease_s,
        )
