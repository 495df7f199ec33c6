"""Load settings: defaults, then a TOML file, then the environment, then CLI flags.

Each layer is a mapping of dotted keys (``"embedding.batch_size"``) to values;
later layers win.  Every value is checked against the field's type once, and an
error names the key, where the value came from, and the type expected.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codechunkd.config.settings import Settings, default_config_path
from codechunkd.errors import ConfigError

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
        f"setting {key!r} must be a {_type_name(tp)}, got {value!r}", key=key, origin=origin
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
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if from_env and isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise bad from None
        raise bad
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


def read_toml(path: Path) -> dict[str, object]:
    """Flatten a TOML settings file into dotted keys, rejecting unknown ones."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror}", origin=str(path)) from exc
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
            raise ConfigError(f"unknown setting {name}", key=name, origin="environment")
        flat[key] = value
    return flat


def build(layers: list[tuple[str, Layer]]) -> Settings:
    """Apply layers (origin, values) over the defaults, then validate."""
    values: dict[str, dict[str, object]] = {s: {} for s in sections()}
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
    settings = Settings(**{name: cls(**values[name]) for name, cls in sections().items()})
    validate(settings)
    return settings


def validate(s: Settings) -> None:
    """Range checks with specific messages (types are checked on the way in)."""
    positive = {
        "index.batch_files": s.index.batch_files,
        "index.compact_fragments": s.index.compact_fragments,
        "index.fold_rows": s.index.fold_rows,
        "index.vector_index_rows": s.index.vector_index_rows,
        "embedding.batch_size": s.embedding.batch_size,
        "embedding.max_seq_length": s.embedding.max_seq_length,
        "embedding.cache_size": s.embedding.cache_size,
        "files.max_file_size": s.files.max_file_size,
    }
    for key, value in positive.items():
        if value <= 0:
            raise ConfigError(f"setting {key!r} must be positive, got {value}", key=key)
    if s.embedding.threads < 0:
        raise ConfigError(
            f"setting 'embedding.threads' must be 0 (measured) or positive, got "
            f"{s.embedding.threads}",
            key="embedding.threads",
        )
    if s.chunking.budget < 100:
        raise ConfigError(
            f"setting 'chunking.budget' must be at least 100, got {s.chunking.budget}",
            key="chunking.budget",
        )
    if s.index.keep_versions_hours < 0:
        raise ConfigError("setting 'index.keep_versions_hours' must not be negative")
    backends = {"torch", "onnx", "remote"}
    if s.embedding.backend not in backends:
        raise ConfigError(
            f"setting 'embedding.backend' must be one of {sorted(backends)}, "
            f"got {s.embedding.backend!r}",
            key="embedding.backend",
        )
    if not s.index.dir:
        raise ConfigError("setting 'index.dir' must not be empty", key="index.dir")
    d = s.daemon
    daemon_positive: dict[str, float] = {
        "daemon.debounce_ms": d.debounce_ms,
        "daemon.max_delay_ms": d.max_delay_ms,
        "daemon.max_paths": d.max_paths,
        "daemon.reconcile_interval_s": d.reconcile_interval_s,
        "daemon.degraded_reconcile_s": d.degraded_reconcile_s,
        "daemon.compact_interval_s": d.compact_interval_s,
        "daemon.shutdown_timeout_s": d.shutdown_timeout_s,
        "daemon.stall_after_s": d.stall_after_s,
    }
    for key, number in daemon_positive.items():
        if number <= 0:
            raise ConfigError(f"setting {key!r} must be positive, got {number}", key=key)
    if d.max_delay_ms < d.debounce_ms:
        raise ConfigError(
            "setting 'daemon.max_delay_ms' must be at least 'daemon.debounce_ms'",
            key="daemon.max_delay_ms",
        )
    if d.idle_unload_s < 0 or d.max_watches < 0:
        raise ConfigError(
            "settings 'daemon.idle_unload_s' and 'daemon.max_watches' must not be negative"
        )
    if not 0 <= d.nice <= 19:
        raise ConfigError(
            f"setting 'daemon.nice' must be between 0 and 19, got {d.nice}", key="daemon.nice"
        )
    _validate_summaries(s)


def _validate_summaries(s: Settings) -> None:
    m = s.summaries
    summary_positive: dict[str, float] = {
        "summaries.timeout": m.timeout,
        "summaries.concurrency": m.concurrency,
        "summaries.max_tokens": m.max_tokens,
        "summaries.max_input_tokens": m.max_input_tokens,
        "summaries.max_chars": m.max_chars,
        "summaries.interval_s": m.interval_s,
    }
    for key, number in summary_positive.items():
        if number <= 0:
            raise ConfigError(f"setting {key!r} must be positive, got {number}", key=key)
    not_negative: dict[str, int] = {
        "summaries.requests_per_minute": m.requests_per_minute,
        "summaries.retries": m.retries,
        "summaries.min_tokens": m.min_tokens,
        "summaries.max_chunks_per_run": m.max_chunks_per_run,
        "summaries.max_tokens_per_run": m.max_tokens_per_run,
        "summaries.max_chunks_per_day": m.max_chunks_per_day,
        "summaries.max_tokens_per_day": m.max_tokens_per_day,
    }
    for key, count in not_negative.items():
        if count < 0:
            raise ConfigError(f"setting {key!r} must not be negative, got {count}", key=key)
    if m.url and not m.url.startswith(("http://", "https://")):
        raise ConfigError("setting 'summaries.url' must be an http(s) URL", key="summaries.url")
    if m.url and not m.model:
        raise ConfigError(
            "setting 'summaries.model' is needed when 'summaries.url' is set", key="summaries.model"
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
