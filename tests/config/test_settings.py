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
    cfg = tmp_path / "c.toml"
    cfg.write_text("[embedding]\nbatchsize = 8\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config=cfg, env={})
    assert "embedding.batchsize" in str(err.value)
    assert str(cfg) in str(err.value)
    assert err.value.key == "embedding.batchsize"


def test_unknown_section_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[embeddings]\nmodel = 'x'\n")
    with pytest.raises(ConfigError, match=r"unknown section \[embeddings\]"):
        load_settings(config=cfg, env={})


def test_wrong_type_names_expected_type(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[chunking]\nbudget = "big"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(config=cfg, env={})
    message = str(err.value)
    assert "chunking.budget" in message
    assert "integer" in message
    assert str(cfg) in message


def test_bool_is_not_an_integer(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[embedding]\nbatch_size = true\n")
    with pytest.raises(ConfigError, match="must be a integer"):
        load_settings(config=cfg, env={})


def test_bad_env_value_and_unknown_env_variable() -> None:
    with pytest.raises(ConfigError, match="environment"):
        load_settings(env={"CODECHUNKD_EMBEDDING_BATCH_SIZE": "many"})
    with pytest.raises(ConfigError, match="CODECHUNKD_EMBEDING_MODEL"):
        load_settings(env={"CODECHUNKD_EMBEDING_MODEL": "x"})


def test_range_checks() -> None:
    with pytest.raises(ConfigError, match=r"embedding\.batch_size"):
        load_settings(env={"CODECHUNKD_EMBEDDING_BATCH_SIZE": "0"})
    with pytest.raises(ConfigError, match=r"chunking\.budget"):
        load_settings(env={"CODECHUNKD_CHUNKING_BUDGET": "10"})


def test_missing_explicit_config_is_an_error(tmp_path: Path) -> None:
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
