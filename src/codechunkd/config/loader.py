"""Load settings: defaults, then a TOML file, then the environment, then CLI flags.

Each layer is a mapping of dotted keys (``"embedding.batch_size"``) to values;
later layers win.  Every value is checked against the field's type once, and an
error names the key, where the value came from, and the type expected.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import stat
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codechunkd.config.settings import (
    BUNDLED_MODEL,
    ENGINES,
    WATCHERS,
    Settings,
    default_config_path,
)
from codechunkd.errors import ConfigError
from codechunkd.regularfile import NotARegularFile, read_regular_file

ENV_PREFIX = "CODECHUNKD_"

# Layer values: raw values from TOML or flags, or strings from the environment.
Layer = Mapping[str, object]


def sections() -> dict[str, type[Any]]:
    """The section name → dataclass of every settings section."""
    hints = typing.get_type_hints(Settings)
    return {f.name: hints[f.name] for f in dataclasses.fields(Settings)}


def fields_of(section: str) -> dict[str, Any]:
    """The key → type of every setting in a section."""
    cls = sections()[section]
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def all_keys() -> list[str]:
    return [f"{s}.{k}" for s in sections() for k in fields_of(s)]


def _article(noun: str) -> str:
    """``noun`` with its indefinite article: "an integer", "a string"."""
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is tuple:
        return "list of strings"
    if origin is dict:
        return "table of strings"
    if isinstance(tp, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    return {int: "integer", float: "number", str: "string", bool: "boolean"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _coerce(key: str, tp: Any, value: object, origin: str) -> object:
    """Check (or, for strings from the environment, parse) one value."""
    from_env = origin.startswith("environment")
    bad = ConfigError(
        f"setting {key!r} must be {_article(_type_name(tp))}, got {value!r}", key=key, origin=origin
    )
    if isinstance(tp, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        return _coerce(key, next(a for a in args if a is not type(None)), value, origin)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if from_env and isinstance(value, str):
            low = value.strip().lower()
            if low in {"1", "true", "yes", "on"}:
                return True
            if low in {"0", "false", "no", "off", ""}:
                return False
        raise bad
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if from_env and isinstance(value, str):
            try:
                return int(value.replace("_", ""))
            except ValueError:
                raise bad from None
        raise bad
    if tp is float:
        number: float | None = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif from_env and isinstance(value, str):
            with contextlib.suppress(ValueError):
                number = float(value)
        if number is None:
            raise bad
        if not math.isfinite(number):  # TOML and float() both take nan and inf
            raise ConfigError(
                f"setting {key!r} must be a finite number, got {value!r}", key=key, origin=origin
            )
        return number
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, Path):
            return str(value)
        raise bad
    origin_t = typing.get_origin(tp)
    if origin_t is tuple:
        if from_env and isinstance(value, str):
            return tuple(p.strip() for p in value.split(",") if p.strip())
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise bad
    if origin_t is dict:
        if from_env and isinstance(value, str):
            pairs = [p.split("=", 1) for p in value.split(",") if p.strip()]
            if any(len(p) != 2 for p in pairs):
                raise bad
            return {k.strip(): v.strip() for k, v in pairs}
        if isinstance(value, Mapping) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            return dict(value)
        raise bad
    raise bad  # pragma: no cover - a field type this loader does not know


#: The largest config file read: a settings file is a few KB, and a bound keeps a
#: ``--config`` that names a huge file from filling memory.
MAX_CONFIG_BYTES = 1 << 20


def _is_devnull(st: os.stat_result) -> bool:
    """Whether ``st`` is the null device, which reads as empty (never blocks nor fills)."""
    try:
        null = os.stat(os.devnull)
    except OSError:  # pragma: no cover - a system without one
        return False
    return stat.S_ISCHR(st.st_mode) and stat.S_ISCHR(null.st_mode) and st.st_rdev == null.st_rdev


def _read_config(path: Path) -> bytes:
    """The bytes of a config file: a regular file of at most ``MAX_CONFIG_BYTES``."""
    if _is_devnull(os.stat(path)):  # ``--config /dev/null``: the usual "no settings file"
        return b""
    try:
        return read_regular_file(
            path, MAX_CONFIG_BYTES, limit_says="the 1 MiB a config file may be"
        )
    except NotARegularFile as exc:
        raise ConfigError(f"the config file is {exc}", origin=str(path)) from None


def read_toml(path: Path) -> dict[str, object]:
    """Flatten a TOML settings file into dotted keys, rejecting unknown ones."""
    import tomllib  # only when there is a file: `status` without one skips it

    try:
        data = tomllib.loads(_read_config(path).decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror}", origin=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"the config file is not UTF-8 text (byte {exc.start})", origin=str(path)
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", origin=str(path)) from exc
    known = sections()
    flat: dict[str, object] = {}
    for section, table in data.items():
        if section not in known:
            raise ConfigError(
                f"unknown section [{section}]; known sections: {', '.join(known)}",
                key=section,
                origin=str(path),
            )
        if not isinstance(table, dict):
            raise ConfigError(f"[{section}] must be a table", key=section, origin=str(path))
        for key, value in table.items():
            flat[f"{section}.{key}"] = value
    return flat


def read_env(env: Mapping[str, str]) -> dict[str, object]:
    """``CODECHUNKD_<SECTION>_<KEY>`` variables as dotted keys.

    Variables that do not name a setting are errors too, except the few the CLI
    itself reads (``CODECHUNKD_CONFIG``), so that a typo is never silently ignored.
    """
    by_env = {f"{ENV_PREFIX}{k.replace('.', '_').upper()}": k for k in all_keys()}
    flat: dict[str, object] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name in {f"{ENV_PREFIX}CONFIG"}:
            continue
        key = by_env.get(name)
        if key is None:
            import difflib

            close = difflib.get_close_matches(name, by_env, n=1)
            guess = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(f"unknown setting {name}{guess}", key=name, origin="environment")
        flat[key] = value
    return flat


def build(layers: list[tuple[str, Layer]]) -> Settings:
    """Apply layers (origin, values) over the defaults, then validate."""
    values: dict[str, dict[str, object]] = {s: {} for s in sections()}
    origins: dict[str, str] = {}  # where each key's value came from: errors name the file
    for origin, layer in layers:
        for dotted, raw in layer.items():
            section, _, key = dotted.partition(".")
            kinds = fields_of(section) if section in values else {}
            if key not in kinds:
                raise ConfigError(
                    f"unknown setting {dotted!r}"
                    + (f"; known in [{section}]: {', '.join(kinds)}" if kinds else ""),
                    key=dotted,
                    origin=origin,
                )
            values[section][key] = _coerce(dotted, kinds[key], raw, origin)
            origins[dotted] = origin
    settings = Settings(**{name: cls(**values[name]) for name, cls in sections().items()})
    try:
        validate(settings)
    except ConfigError as exc:
        if exc.origin is None and exc.key in origins:
            raise ConfigError(str(exc), key=exc.key, origin=origins[exc.key]) from None
        raise
    return settings


#: Every numeric setting's bounds, inclusive: (low, high), except that the settings in
#: ``ABOVE_ZERO`` must be more than 0.  Each field's docstring states the same bounds
#: (tests/config checks that they agree).
WEEK_S = 604_800.0
BOUNDS: dict[str, tuple[float, float]] = {
    "index.keep_versions_hours": (0, 8760),
    "index.compact_fragments": (1, 100_000),
    "index.fold_rows": (1, 100_000_000),
    "index.batch_files": (1, 1_000_000),
    "index.chunk_workers": (0, 256),
    "index.vector_index_rows": (1, 1_000_000_000),
    "index.ray_gpus_per_task": (0, 1),
    "object_store.lease_s": (5, 86_400),
    "object_store.retries": (0, 100),
    "object_store.retry_timeout_s": (1, 86_400),
    "embedding.batch_size": (1, 4096),
    "embedding.max_seq_length": (8, 8192),
    "embedding.threads": (0, 256),
    "embedding.sessions": (0, 256),
    "embedding.cache_size": (1, 1_000_000_000),
    "embedding.remote_dimension": (0, 65_536),
    "embedding.timeout": (0, 3600),
    "embedding.concurrency": (1, 64),
    "embedding.retries": (0, 100),
    "chunking.budget": (100, 1_000_000),
    "files.max_file_size": (1, 1 << 31),
    "daemon.debounce_ms": (1, 60_000),
    "daemon.max_delay_ms": (1, 600_000),
    "daemon.max_paths": (1, 10_000_000),
    "daemon.reconcile_interval_s": (0, WEEK_S),
    "daemon.degraded_reconcile_s": (0, WEEK_S),
    "daemon.compact_interval_s": (0, WEEK_S),
    "daemon.idle_unload_s": (0, WEEK_S),
    "daemon.recycle_growth_mb": (0, 1_048_576),
    "daemon.shutdown_timeout_s": (0, 3600),
    "daemon.stall_after_s": (0, WEEK_S),
    "daemon.nice": (0, 19),
    "daemon.max_watches": (0, 100_000_000),
    "summaries.timeout": (0, 3600),
    "summaries.concurrency": (1, 64),
    "summaries.requests_per_minute": (0, 100_000),
    "summaries.retries": (0, 100),
    "summaries.max_tokens": (1, 100_000),
    "summaries.max_input_tokens": (1, 1_000_000),
    "summaries.min_tokens": (0, 1_000_000),
    "summaries.max_chars": (1, 100_000),
    "summaries.interval_s": (0, WEEK_S),
    "summaries.max_chunks_per_run": (0, 1_000_000_000),
    "summaries.max_tokens_per_run": (0, 1_000_000_000_000),
    "summaries.max_chunks_per_day": (0, 1_000_000_000),
    "summaries.max_tokens_per_day": (0, 1_000_000_000_000),
    "rerank.depth": (2, 200),
    "rerank.timeout": (0, 600),
}

ABOVE_ZERO = frozenset(
    {
        "index.ray_gpus_per_task",
        "embedding.timeout",
        "daemon.reconcile_interval_s",
        "daemon.degraded_reconcile_s",
        "daemon.compact_interval_s",
        "daemon.shutdown_timeout_s",
        "daemon.stall_after_s",
        "summaries.timeout",
        "summaries.interval_s",
        "rerank.timeout",
    }
)

#: Positions the bundled model (all-MiniLM-L6-v2, a BERT) has embeddings for.
BUNDLED_MODEL_WINDOW = 512


def bounds_text(key: str) -> str:
    """How a docstring states a setting's bounds, e.g. ``1 to 4096``."""
    low, high = BOUNDS[key]
    return f"{'more than 0' if key in ABOVE_ZERO else _num(low)} to {_num(high)}"


def _num(value: float) -> str:
    if value != int(value):
        return str(value)
    return f"{int(value):,}".replace(",", "_") if value >= 10_000 else str(int(value))


def _check_bounds(s: Settings) -> None:
    for key, (low, high) in BOUNDS.items():
        section, _, name = key.partition(".")
        value = getattr(getattr(s, section), name)
        too_low = value <= low if key in ABOVE_ZERO else value < low
        if too_low or value > high:
            raise ConfigError(f"setting {key!r} must be {bounds_text(key)}, got {value}", key=key)


def validate(s: Settings) -> None:
    """Bounds and consistency, with specific messages (types are checked on the way in)."""
    _check_bounds(s)
    e = s.embedding
    if e.model == BUNDLED_MODEL and e.max_seq_length > BUNDLED_MODEL_WINDOW:
        raise ConfigError(
            f"setting 'embedding.max_seq_length' is {e.max_seq_length}, but the bundled model "
            f"reads at most {BUNDLED_MODEL_WINDOW} tokens",
            key="embedding.max_seq_length",
        )
    backends = {"torch", "onnx", "remote"}
    if e.backend not in backends:
        raise ConfigError(
            f"setting 'embedding.backend' must be one of {sorted(backends)}, got {e.backend!r}",
            key="embedding.backend",
        )
    if not s.index.dir:
        raise ConfigError("setting 'index.dir' must not be empty", key="index.dir")
    if s.index.engine not in ENGINES:
        raise ConfigError(
            f"setting 'index.engine' must be one of {', '.join(ENGINES)}, got {s.index.engine!r}",
            key="index.engine",
        )
    if s.daemon.watcher not in WATCHERS:
        raise ConfigError(
            f"setting 'daemon.watcher' must be one of {', '.join(WATCHERS)}, "
            f"got {s.daemon.watcher!r}",
            key="daemon.watcher",
        )
    if s.daemon.max_delay_ms < s.daemon.debounce_ms:
        raise ConfigError(
            "setting 'daemon.max_delay_ms' must be at least 'daemon.debounce_ms'",
            key="daemon.max_delay_ms",
        )
    _check_urls(s)
    _check_extensions(s)
    m = s.summaries
    if m.url and not m.model:
        raise ConfigError(
            "setting 'summaries.model' is needed when 'summaries.url' is set", key="summaries.model"
        )
    if s.rerank.protocol not in RERANK_PROTOCOLS:
        raise ConfigError(
            f"setting 'rerank.protocol' must be one of {', '.join(RERANK_PROTOCOLS)}, "
            f"got {s.rerank.protocol!r}",
            key="rerank.protocol",
        )
    if s.rerank.url and not s.rerank.model:
        raise ConfigError(
            "setting 'rerank.model' is needed when 'rerank.url' is set", key="rerank.model"
        )


RERANK_PROTOCOLS = ("cohere", "tei")

#: The settings that hold an http(s) URL, checked whole at load time (scheme, host,
#: port): what would fail only when the first request is sent fails here instead.
URL_SETTINGS = ("embedding.remote_url", "summaries.url", "rerank.url", "object_store.endpoint")


def _check_urls(s: Settings) -> None:
    urls = {key: getattr(getattr(s, key.split(".")[0]), key.split(".")[1]) for key in URL_SETTINGS}
    if not any(urls.values()):
        return
    from codechunkd.httpclient import check_url, safe_url  # only when a URL is set

    for key, url in urls.items():
        if url:
            check_url(url, key)
    endpoint = s.object_store.endpoint
    if "@" in endpoint.partition("://")[2].partition("/")[0]:
        raise ConfigError(
            "setting 'object_store.endpoint' must have no user info (USER@): the credentials "
            "come from the variables 'object_store.access_key_env' and "
            f"'object_store.secret_key_env' name, got {safe_url(endpoint)!r}",
            key="object_store.endpoint",
        )


#: The names the chunker gives files it has no grammar for (chunked as text, but a search
#: can filter on them), from ``codechunkd.chunking.languages``, which this layer may not
#: import: tests/config checks that the names it detects are all accepted here.
GRAMMARLESS_LANGUAGES = frozenset(
    {"text", "awk", "batch", "diff", "jinja2", "lean", "mojo", "pug", "rescript"}
)


def language_names() -> frozenset[str]:
    """The language names ``chunking.extensions`` may map to: those of the grammars
    tree-sitter-language-pack bundles, and the grammar-less ones above."""
    import tree_sitter_language_pack as pack

    return GRAMMARLESS_LANGUAGES.union(typing.get_args(getattr(pack, "SupportedLanguage", ())))


def is_language(name: str) -> bool:
    """Whether the chunker knows ``name`` (a grammar the pack bundles, or a grammar-less name)."""
    if name in language_names():
        return True
    if not name.isidentifier():  # the pack imports a module of this name
        return False
    import tree_sitter_language_pack as pack

    try:  # a pack whose names are not listed in SupportedLanguage
        pack.get_language(name)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - the pack raises LookupError/ValueError/OSError by version
        return False
    return True


def _check_extensions(s: Settings) -> None:
    """Every ``chunking.extensions`` value must be a language: a typo would chunk as text."""
    for name, language in s.chunking.extensions.items():
        if is_language(language):
            continue
        import difflib

        close = difflib.get_close_matches(language, sorted(language_names()), n=3)
        guess = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ConfigError(
            f"setting 'chunking.extensions' maps {name!r} to unknown language {language!r}"
            f"{guess} (a tree-sitter-language-pack name such as 'python', or 'text')",
            key="chunking.extensions",
        )


def load_settings(
    *,
    config: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Layer | None = None,
) -> Settings:
    """Defaults ← TOML file ← environment ← CLI overrides.

    ``config`` names the file; without it ``$CODECHUNKD_CONFIG`` or
    ``$XDG_CONFIG_HOME/codechunkd/config.toml`` is read when it exists.  A file
    named explicitly must exist.
    """
    import os

    env = os.environ if env is None else env
    layers: list[tuple[str, Layer]] = []
    explicit = config or (
        Path(env[f"{ENV_PREFIX}CONFIG"]) if env.get(f"{ENV_PREFIX}CONFIG") else None
    )
    path = explicit or default_config_path()
    if explicit is not None or path.is_file():
        layers.append((str(path), read_toml(path)))
    layers.append(("environment", read_env(env)))
    if overrides:
        layers.append(("command line", {k: v for k, v in overrides.items() if v is not None}))
    return build(layers)
