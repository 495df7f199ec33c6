"""Settings: defaults, TOML, environment and flags, in that order; errors name the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from codechunkd.config import BUNDLED_MODEL, all_keys, load_settings
from codechunkd.errors import ConfigError


def test_defaults_use_xdg_data_home_and_bundled_model(tmp_path: Path) -> None:
    """With nothing configured the index lives under XDG_DATA_HOME and the model is bundled."""
    s = load_settings(env={})
    assert s.index.dir.endswith("codechunkd/index")
    assert s.embedding.model == BUNDLED_MODEL
    assert s.chunking.budget == 1500


def test_layers_apply_in_order(tmp_path: Path) -> None:
    """TOML overrides defaults, the environment overrides TOML, flags override both."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('[embedding]\nbatch_size = 8\nthreads = 2\n[index]\ndir = "/from/toml"\n')
    s = load_settings(
        config=cfg,
        env={"CODECHUNKD_EMBEDDING_BATCH_SIZE": "16", "CODECHUNKD_INDEX_DIR": "/from/env"},
        overrides={"index.dir": "/from/flag"},
    )
    assert s.embedding.batch_size == 16
    assert s.embedding.threads == 2
    assert s.index.dir == "/from/flag"


def test_xdg_config_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --config, $XDG_CONFIG_HOME/codechunkd/config.toml is used when present."""
    xdg = tmp_path / "xdg"
    (xdg / "codechunkd").mkdir(parents=True)
    (xdg / "codechunkd" / "config.toml").write_text("[chunking]\nbudget = 900\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    assert load_settings(env={}).chunking.budget == 900


def test_env_parses_lists_tables_and_booleans() -> None:
    """Environment values are parsed into tuples, booleans and tables (``k=v,k=v``)."""
    s = load_settings(
        env={
            "CODECHUNKD_FILES_EXCLUDE": "*.min.js, vendor/*",
            "CODECHUNKD_CHUNKING_MERGE_SIBLINGS": "yes",
            "CODECHUNKD_CHUNKING_EXTENSIONS": ".tpl=html,Jenkinsfile=groovy",
        }
    )
    assert s.files.exclude == ("*.min.js", "vendor/*")
    assert s.chunking.merge_siblings is True
    assert s.chunking.extensions == {".tpl": "html", "Jenkinsfile": "groovy"}


def test_unknown_key_in_file_names_key_and_file(tmp_path: Path) -> None:
    """An unknown key in the config file is a ConfigError naming the dotted key and the file."""
    cfg = tmp_path / "c.toml"
    cfg.write_text("[embedding]\nbatchsize = 8\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config=cfg, env={})
    assert "embedding.batchsize" in str(err.value)
    assert str(cfg) in str(err.value)
    assert err.value.key == "embedding.batchsize"


def test_unknown_section_is_an_error(tmp_path: Path) -> None:
    """A misspelled section of the config file is a ConfigError naming it."""
    cfg = tmp_path / "c.toml"
    cfg.write_text("[embeddings]\nmodel = 'x'\n")
    with pytest.raises(ConfigError, match=r"unknown section \[embeddings\]"):
        load_settings(config=cfg, env={})


def test_wrong_type_names_expected_type(tmp_path: Path) -> None:
    """A value of the wrong type is a ConfigError naming the key, the expected type and
    the file."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('[chunking]\nbudget = "big"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(config=cfg, env={})
    message = str(err.value)
    assert "chunking.budget" in message
    assert "integer" in message
    assert str(cfg) in message


def test_bool_is_not_an_integer(tmp_path: Path) -> None:
    """``true`` is refused where an integer is expected (bool is not taken for int)."""
    cfg = tmp_path / "c.toml"
    cfg.write_text("[embedding]\nbatch_size = true\n")
    with pytest.raises(ConfigError, match="must be an integer"):
        load_settings(config=cfg, env={})


def test_bad_env_value_and_unknown_env_variable() -> None:
    """A bad environment value and a misspelled ``CODECHUNKD_*`` variable are both
    ConfigErrors naming their origin."""
    with pytest.raises(ConfigError, match="environment"):
        load_settings(env={"CODECHUNKD_EMBEDDING_BATCH_SIZE": "many"})
    with pytest.raises(ConfigError, match="CODECHUNKD_EMBEDING_MODEL"):
        load_settings(env={"CODECHUNKD_EMBEDING_MODEL": "x"})


def test_range_checks() -> None:
    """Out-of-range values (batch size 0, a budget under 100) are ConfigErrors naming the key."""
    with pytest.raises(ConfigError, match=r"embedding\.batch_size"):
        load_settings(env={"CODECHUNKD_EMBEDDING_BATCH_SIZE": "0"})
    with pytest.raises(ConfigError, match=r"chunking\.budget"):
        load_settings(env={"CODECHUNKD_CHUNKING_BUDGET": "10"})


def test_a_misspelled_env_variable_gets_a_did_you_mean() -> None:
    """``CODECHUNKD_EMBEDDING_BATCHSIZE`` is answered with the variable it was meant to be."""
    with pytest.raises(ConfigError) as exc:
        load_settings(env={"CODECHUNKD_EMBEDDING_BATCHSIZE": "8"})
    assert "did you mean CODECHUNKD_EMBEDDING_BATCH_SIZE?" in str(exc.value)


def test_out_of_range_and_enum_errors_name_the_config_file(tmp_path: Path) -> None:
    """A value of config.toml out of bounds or outside its choices names that file; the same
    value from the environment says so instead."""
    cfg = tmp_path / "config.toml"
    for table in (
        "[embedding]\nbatch_size = 0\n",
        '[embedding]\nbackend = "onxx"\n',
        '[daemon]\nwatcher = "inotfy"\n',
        "[embedding]\nmax_seq_length = 4096\n",
    ):
        cfg.write_text(table)
        with pytest.raises(ConfigError) as exc:
            load_settings(config=cfg, env={})
        assert str(exc.value).endswith(f"(in {cfg})"), (table, str(exc.value))
    with pytest.raises(ConfigError) as exc:
        load_settings(config=cfg, env={"CODECHUNKD_EMBEDDING_MAX_SEQ_LENGTH": "1000"})
    assert str(exc.value).endswith("(in environment)"), str(exc.value)


def test_missing_explicit_config_is_an_error(tmp_path: Path) -> None:
    """A config file named explicitly but missing is an error, not silently skipped."""
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(config=tmp_path / "nope.toml", env={})


def test_every_setting_is_documented() -> None:
    """docs/settings.md lists every setting key, generated from the field docstrings."""
    root = Path(__file__).parents[2]
    doc = (root / "docs" / "settings.md").read_text()
    missing = [k for k in all_keys() if f"`{k}`" not in doc]
    assert not missing, f"undocumented settings: {missing}"
    check = subprocess.run(
        [sys.executable, str(root / "scripts" / "settings_doc.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "+nan"])
def test_numbers_must_be_finite_in_toml_and_env(tmp_path: Path, text: str) -> None:
    """NaN and infinity pass every `<=` check, so they are refused by type, from both layers."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[daemon]\nshutdown_timeout_s = {text}\n")
    with pytest.raises(ConfigError, match="finite number"):
        load_settings(config=cfg, env={})
    with pytest.raises(ConfigError, match="finite number"):
        load_settings(env={"CODECHUNKD_DAEMON_RECONCILE_INTERVAL_S": text})


def test_every_numeric_setting_has_bounds_and_documents_them() -> None:
    """BOUNDS covers every number; each field's docstring states its bounds; both ends hold."""
    import dataclasses

    from codechunkd.config.loader import ABOVE_ZERO, BOUNDS, bounds_text, fields_of, sections

    numeric = {f"{s}.{k}" for s in sections() for k, t in fields_of(s).items() if t in (int, float)}
    assert numeric == set(BOUNDS)
    docs = {}
    for section, cls in sections().items():
        source = Path(sys.modules[cls.__module__].__file__ or "").read_text()
        for f in dataclasses.fields(cls):
            start = source.index(f"    {f.name}: ", source.index(f"class {cls.__name__}"))
            docs[f"{section}.{f.name}"] = " ".join(source[start:].split('"""')[1].split())
    for key, (low, high) in BOUNDS.items():
        assert f"Bounds: {bounds_text(key)}" in docs[key], key
        env = f"CODECHUNKD_{key.replace('.', '_').upper()}"
        for bad in (high + 1, low if key in ABOVE_ZERO else low - 1):
            with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
                load_settings(env={env: str(bad)})


def test_model_window_and_threads_are_bounded() -> None:
    """max_seq_length past the bundled model's 512 positions, and 100000 threads, are refused."""
    with pytest.raises(ConfigError, match="at most 512 tokens"):
        load_settings(env={"CODECHUNKD_EMBEDDING_MAX_SEQ_LENGTH": "4096"})
    assert load_settings(env={"CODECHUNKD_EMBEDDING_MAX_SEQ_LENGTH": "512"})
    with pytest.raises(ConfigError, match="0 to 256"):
        load_settings(env={"CODECHUNKD_EMBEDDING_THREADS": "100000"})


def test_config_file_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    """Invalid UTF-8 is a ConfigError naming the file (it was a UnicodeDecodeError)."""
    cfg = tmp_path / "c.toml"
    cfg.write_bytes(b"[index]\ndir = '\xff'\n")
    with pytest.raises(ConfigError, match="not UTF-8") as raised:
        load_settings(config=cfg, env={})
    assert str(cfg) in str(raised.value)
