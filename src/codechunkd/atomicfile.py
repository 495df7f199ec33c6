"""Write a small file whole or not at all.

``state.json``, ``sources.json``, the thread calibration and the systemd unit are
read by other processes at any moment: each is written to a temporary file beside
it and renamed over it (atomic within one directory), so a reader sees the old
file or the new one, never a part.  No ``fsync``: after a power cut the old file
may come back, which each of them tolerates (state.json is a mirror of the table).
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically; the temporary file never stays behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


__all__ = ["write_text"]
