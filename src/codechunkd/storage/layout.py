"""Where the files of one index live.

A local index directory holds the LanceDB tables and, in ``_codechunkd/``, the
writer's private files: the embedding cache, the writer lock and ``state.json``
(a copy of the ``repos`` table that ``codechunkd status`` reads without
importing LanceDB, whose import alone costs ~2 s).  For an object-store URI
those private files live under ``$XDG_STATE_HOME/codechunkd/<hash of the URI>``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from codechunkd.config.settings import Settings, default_runtime_dir


def _is_local(uri: str) -> bool:
    return "://" not in uri or uri.startswith("file://")


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexPaths:
    uri: str
    """The LanceDB URI (a local directory or an object-store URI)."""
    meta: Path
    """Private files of the writer."""
    runtime: Path
    """Runtime files of a daemon (its control socket)."""

    @property
    def cache(self) -> Path:
        return self.meta / "cache.sqlite"

    @property
    def lock(self) -> Path:
        return self.meta / "writer.lock"

    @property
    def state_file(self) -> Path:
        return self.meta / "state.json"

    @property
    def socket(self) -> Path:
        return self.runtime / f"{self.key}.sock"

    @property
    def key(self) -> str:
        return hashlib.sha256(self.uri.encode()).hexdigest()[:12]

    @classmethod
    def of(cls, settings: Settings) -> IndexPaths:
        uri = settings.index.dir
        if _is_local(uri):
            uri = str(Path(uri.removeprefix("file://")).expanduser().resolve())
            meta = Path(uri) / "_codechunkd"
        else:
            state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local/state")
            meta = Path(state) / "codechunkd" / hashlib.sha256(uri.encode()).hexdigest()[:12]
        return cls(uri=uri, meta=meta, runtime=Path(default_runtime_dir()))
