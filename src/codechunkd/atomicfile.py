"""Write a small file whole or not at all.

``state.json``, ``sources.json``, the thread calibration and the systemd unit are
read by other processes at any moment: each is written to a temporary file beside
it and renamed over it (atomic within one directory), so a reader sees the old
file or the new one, never a part.  The temporary file is synced to disk before the
rename, and the directory after it: a power cut leaves the old file or the new one,
never an empty or cut-short one (``sources.json`` is no copy of anything: read cut
short, it would have lost the user's list).  The files are small and rarely written
(``state.json``: once per commit), so the syncs cost little.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically and durably; the temporary file never
    stays behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with tmp.open("w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _sync_dir(path.parent)


def _sync_dir(folder: Path) -> None:
    """Make the rename durable; best effort (a folder cannot be opened on Windows, some
    file systems refuse to sync one)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["write_text"]
