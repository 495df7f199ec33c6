"""Hostile settings: each is refused at load time with one line naming the setting (exit 2),
never accepted and then broken at run time, never a hang.

A URL with a bad port or an unclosed IPv6 ``[`` passed validation and made the daemon exit
with "unexpected: ValueError"; a config file that is a FIFO hung for ever (``/dev/zero`` read
until memory ran out); a misspelt language in ``chunking.extensions`` chunked every such file
as plain text without a word; an ``ftp://`` object-store endpoint was used as https.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import Repo, scaled

from codechunkd.config import load_settings
from codechunkd.config.loader import MAX_CONFIG_BYTES, URL_SETTINGS, is_language
from codechunkd.config.settings import EmbeddingSettings, RerankSettings, SummarySettings
from codechunkd.errors import ConfigError
from codechunkd.httpclient import safe_url

EXE = str(Path(sys.executable).parent / "codechunkd")

#: A hang detector, set far above the need (the CLI answers in about a second): a command
#: still running then is blocked (on a FIFO with no writer), not slow.
HANG_S = 120.0


def run_cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI; a run past the hang detector is killed and fails the test."""
    try:
        return subprocess.run(
            [EXE, *argv],
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            timeout=scaled(HANG_S),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"codechunkd {' '.join(argv)} did not finish in {scaled(HANG_S):.0f} s")


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """Exit 2 and one ``codechunkd: error:`` line on stderr, no traceback: that line."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("codechunkd: error: "), done.stderr
    assert done.returncode == 2, done.stderr
    assert "unexpected" not in lines[0]
    return lines[0]


# -- URL settings: checked whole at load time ---------------------------------------------

ENV_OF = {key: f"CODECHUNKD_{key.replace('.', '_').upper()}" for key in URL_SETTINGS}

BAD_URLS = [
    ("http://127.0.0.1:99999/v1", "port 99999, out of range (1 to 65535)"),
    ("http://[::1", "Invalid IPv6 URL"),
    ("http://[::1]:0/v1", "port 0, out of range"),
    ("http://127.0.0.1:80a/v1", "not a number"),
    ("http://::1/v1", "IPv6 address outside brackets"),
    ("http://[::1]x/v1", "text after the bracketed IPv6 address"),
    ("http://:8080/v1", "has no host"),
    ("http://a..b/v1", "invalid host name"),
    ("http://127.0.0.1:8080/vé", "ASCII"),
    ("http://127.0.0.1:8080/v 1", "no spaces"),
    ("http://127.0.0.1:8080/v1?x=1", "no query"),
    ("ftp://127.0.0.1:1", "must be an http:// or https:// URL"),
    ("file:///etc/passwd", "must be an http:// or https:// URL"),
]


@pytest.mark.parametrize("key", URL_SETTINGS)
@pytest.mark.parametrize(("url", "says"), BAD_URLS)
def test_a_bad_url_is_refused_by_the_loader_naming_the_setting(
    key: str, url: str, says: str
) -> None:
    """Every URL setting, from the environment: a ConfigError naming the key and the problem
    (it was accepted, then a ValueError when the first request was built)."""
    with pytest.raises(ConfigError) as raised:
        load_settings(env={ENV_OF[key]: url, "CODECHUNKD_SUMMARIES_MODEL": "m"})
    assert raised.value.key == key
    assert f"setting {key!r}" in str(raised.value)
    assert says in str(raised.value)
    assert str(raised.value).endswith("(in environment)")


@pytest.mark.parametrize(
    ("key", "url", "says"),
    [
        ("summaries.url", "http://127.0.0.1:99999/v1", "port 99999, out of range"),
        ("summaries.url", "http://[::1", "Invalid IPv6 URL"),
        ("embedding.remote_url", "http://127.0.0.1:99999/v1", "port 99999, out of range"),
        ("embedding.remote_url", "http://[::1", "Invalid IPv6 URL"),
        ("object_store.endpoint", "http://[::1", "Invalid IPv6 URL"),
        ("object_store.endpoint", "ftp://127.0.0.1:1", "must be an http:// or https:// URL"),
        ("object_store.endpoint", "http://user:pw-0xC0FFEE@minio", "no user info"),
    ],
)
def test_a_bad_url_stops_the_cli_with_one_line(
    key: str, url: str, says: str, tmp_path: Path
) -> None:
    """The real CLI: exit 2, one line naming the setting and where it came from."""
    done = run_cli(
        "status",
        "--index-dir",
        str(tmp_path / "index"),
        env={ENV_OF[key]: url, "CODECHUNKD_SUMMARIES_MODEL": "m"},
    )
    line = refused(done)
    assert f"setting {key!r}" in line and says in line and "(in environment)" in line
    assert "0xC0FFEE" not in line
    assert not (tmp_path / "index").exists()


def test_a_bad_summaries_port_stops_the_daemon_before_it_starts(tmp_path: Path) -> None:
    """The auditor's case: `run` exited 1 with "unexpected: ValueError: Port out of range"
    once started; now it never starts."""
    repo = Repo(tmp_path / "repo")
    repo.write("a.py", "def f():\n    return 1\n")
    repo.commit()
    env = {
        "CODECHUNKD_SUMMARIES_URL": "http://127.0.0.1:99999/v1",
        "CODECHUNKD_SUMMARIES_MODEL": "m",
    }
    done = run_cli("run", str(repo.path), "--index-dir", str(tmp_path / "index"), env=env)
    assert "setting 'summaries.url' has port 99999" in refused(done)
    assert not (tmp_path / "index").exists()


def test_a_bad_url_in_the_config_file_names_the_file(tmp_path: Path) -> None:
    """From a TOML file, the error names the file as where the value came from."""
    config = tmp_path / "config.toml"
    config.write_text('[object_store]\nendpoint = "http://[::1"\n')
    with pytest.raises(ConfigError, match=r"'object_store\.endpoint' is not a valid URL") as raised:
        load_settings(config=config, env={})
    assert str(raised.value).endswith(f"(in {config})")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/v1",
        "https://api.example.com/v1/",
        "http://[::1]:8080/v1",
        "HTTP://Example.COM:65535",
        "http://localhost.:1/v1",
    ],
)
def test_good_urls_still_load(url: str) -> None:
    """Usual URLs (IPv6 in brackets, upper-case scheme, top port, trailing dot) still load."""
    models = {"CODECHUNKD_SUMMARIES_MODEL": "m", "CODECHUNKD_RERANK_MODEL": "m"}
    env = {ENV_OF[key]: url for key in URL_SETTINGS} | models
    s = load_settings(env=env)
    got = (s.summaries.url, s.embedding.remote_url, s.rerank.url, s.object_store.endpoint)
    assert got == (url,) * 4


def test_the_clients_refuse_a_bad_url_with_a_config_error() -> None:
    """Settings built without the loader meet the same check where the clients start (it
    was a ValueError from ``safe_url``)."""
    from codechunkd.embedding.embed_remote import RemoteEmbedder
    from codechunkd.llm.client import ChatClient
    from codechunkd.llm.rerank import Reranker

    with pytest.raises(ConfigError, match=r"'summaries\.url' has port 99999"):
        ChatClient(SummarySettings(url="http://127.0.0.1:99999/v1", model="m"))
    with pytest.raises(ConfigError, match=r"'embedding\.remote_url' is not a valid URL"):
        RemoteEmbedder(
            EmbeddingSettings(backend="remote", remote_url="http://[::1", remote_model="m")
        )
    with pytest.raises(ConfigError, match=r"'rerank\.url' has port 99999"):
        Reranker(RerankSettings(url="http://127.0.0.1:99999/v1", model="m"))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:secret@127.0.0.1:99999/v1?k=secret", "http://127.0.0.1:99999/v1"),
        ("http://u:secret@[::1/v1?k=secret", "http://[::1/v1"),
        ("https://[::1]:8443/v1#secret", "https://[::1]:8443/v1"),
    ],
)
def test_safe_url_never_raises_and_drops_what_may_be_secret(url: str, shown: str) -> None:
    """It shows URLs in errors, including a redirect's ``Location`` a server sent."""
    assert safe_url(url) == shown


# -- the config file: a regular file of at most 1 MiB, never a hang ------------------------


def test_a_fifo_config_is_refused_without_blocking(tmp_path: Path) -> None:
    """`--config FIFO` and `CODECHUNKD_CONFIG=FIFO` waited for a writer for ever."""
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    for done in (
        run_cli("status", "--config", str(fifo)),
        run_cli("status", env={"CODECHUNKD_CONFIG": str(fifo)}),
    ):
        line = refused(done)
        assert "named pipe (FIFO), not a regular file" in line and str(fifo) in line


def test_dev_zero_as_config_is_refused_without_reading(tmp_path: Path) -> None:
    """`--config /dev/zero` read until memory ran out (capped here, as the auditor did, so
    that a regression fails the test instead of taking the machine)."""

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    done = subprocess.run(
        [EXE, "status", "--config", "/dev/zero", "--index-dir", str(tmp_path / "index")],
        capture_output=True,
        text=True,
        preexec_fn=cap_memory,
        timeout=scaled(HANG_S),
    )
    assert "a character device, not a regular file" in refused(done)


def test_a_directory_as_config_is_refused(tmp_path: Path) -> None:
    """A directory gets the same one-line refusal as any other non-regular file."""
    line = refused(run_cli("status", "--config", str(tmp_path)))
    assert "a directory, not a regular file" in line


def test_a_config_over_1_mib_is_refused(tmp_path: Path) -> None:
    """A huge regular file is refused by its size, before it is read (a sparse file here)."""
    config = tmp_path / "config.toml"
    with config.open("wb") as f:
        f.truncate(MAX_CONFIG_BYTES + 1)
    line = refused(run_cli("status", "--config", str(config)))
    assert "more than the 1 MiB a config file may be" in line and str(config) in line


def test_a_config_of_exactly_1_mib_is_read(tmp_path: Path) -> None:
    """The limit is inclusive: a file of exactly 1 MiB is read."""
    config = tmp_path / "config.toml"
    head = b"[chunking]\nbudget = 900\n"
    config.write_bytes(head + b"#" * (MAX_CONFIG_BYTES - len(head)))
    assert load_settings(config=config, env={}).chunking.budget == 900


def test_dev_null_still_reads_as_an_empty_config() -> None:
    """`--config /dev/null` (no settings file) keeps working: the defaults."""
    assert load_settings(config=Path(os.devnull), env={}).chunking.budget == 1500


# -- chunking.extensions: the values are languages ----------------------------------------


def test_a_misspelt_language_is_refused_with_did_you_mean(tmp_path: Path) -> None:
    """`{".py" = "pyhton"}` was accepted and every .py file was chunked as plain text."""
    config = tmp_path / "config.toml"
    config.write_text('[chunking]\nextensions = {".py" = "pyhton"}\n')
    line = refused(run_cli("status", "--config", str(config)))
    assert "setting 'chunking.extensions' maps '.py' to unknown language 'pyhton'" in line
    assert "did you mean 'python'" in line and str(config) in line


def test_an_empty_language_from_the_environment_is_refused() -> None:
    """``.tpl=`` in the environment maps to an empty name: refused, not chunked as text."""
    with pytest.raises(ConfigError, match=r"'chunking\.extensions' maps '\.tpl' to unknown"):
        load_settings(env={"CODECHUNKD_CHUNKING_EXTENSIONS": ".tpl="})


def test_every_language_the_chunker_names_is_accepted() -> None:
    """The loader keeps the grammar-less names (config may not import chunking): each name
    ``detect_language`` can give a file must be a valid value, so the two stay in step."""
    from codechunkd.chunking.languages import known_languages

    assert not [name for name in known_languages() if not is_language(name)]
    mapping = {f".x{i}": name for i, name in enumerate(sorted(known_languages()))}
    assert load_settings(overrides={"chunking.extensions": mapping}, env={}).chunking.extensions
    assert is_language("magik")  # a grammar of the pack no built-in table names
