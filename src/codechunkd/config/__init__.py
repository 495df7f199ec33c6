"""Settings: defaults, a TOML file, environment variables, CLI flags; validated once."""

from codechunkd.config.loader import all_keys, load_settings
from codechunkd.config.settings import (
    BUNDLED_MODEL,
    ChunkingSettings,
    EmbeddingSettings,
    FilesSettings,
    IndexSettings,
    Settings,
)

__all__ = [
    "BUNDLED_MODEL",
    "ChunkingSettings",
    "EmbeddingSettings",
    "FilesSettings",
    "IndexSettings",
    "Settings",
    "all_keys",
    "load_settings",
]
