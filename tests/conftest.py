"""Shared fixtures: real git repositories, real index directories, the real model."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from codechunkd.chunking.chunker import CountTokens
from codechunkd.chunking.tokens import counter_for
from codechunkd.config import Settings, load_settings

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``torch`` need the torch extra: skipped on the default (torch-free) install."""
    if importlib.util.find_spec("torch") is not None:
        return
    skip = pytest.mark.skip(reason="needs the torch extra (make test-torch)")
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test reads or writes the developer's HOME, config or git settings."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for var, sub in [
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_RUNTIME_DIR", "run"),
    ]:
        (home / sub).mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(var, str(home / sub))
    (home / "run").chmod(0o700)
    for key in [k for k in os.environ if k.startswith("CODECHUNKD_")]:
        monkeypatch.delenv(key)
    # one ONNX export per test session, shared by every test and the processes they start
    onnx_dir = tmp_path_factory.getbasetemp() / "onnx-models"
    monkeypatch.setenv("CODECHUNKD_EMBEDDING_ONNX_DIR", str(onnx_dir))
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()


LIBRARY_THREADS = ("LanceDBBackgroundEventLoop", "tqdm_monitor")
"""Threads a library starts once per process and never stops: lancedb's event loop (at its
import) and tqdm's monitor (one per progress-bar class, at the first bar, e.g. the torch
backend's "Loading weights")."""


@pytest.fixture(autouse=True)
def _no_thread_leaks() -> Iterator[None]:
    """Every thread a test starts has ended when it ends, daemon threads included.

    As watchdog's own fixture does: the writer, the prepare thread and the inotify reader
    are daemon threads, so skipping daemon threads would miss the likeliest leaks.  A thread
    already told to stop may still be on its way out (AnyIO's workers get their stop
    message when ``anyio.run`` returns, and exit a moment later): each is given until a
    short deadline to end, and only one still running then is a leak.
    """
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5.0
    leaked = []
    for t in threading.enumerate():
        if t in before or t.name.startswith(LIBRARY_THREADS):
            continue
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            leaked.append(t)
    assert not leaked, f"threads left running: {leaked}"


class Repo:
    """A real git repository in a temporary folder, driven with the git CLI."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        out = subprocess.run(
            ["git", *args], cwd=self.path, check=True, capture_output=True, text=True
        )
        return out.stdout.strip()

    def write(self, rel: str, text: str | bytes) -> Path:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
        return p

    def remove(self, rel: str) -> None:
        (self.path / rel).unlink()

    def commit(self, message: str = "change", *, add: bool = True) -> str:
        if add:
            self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "repo")


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    return tmp_path / "index"


@pytest.fixture
def settings(index_dir: Path) -> Settings:
    return load_settings(env={}, overrides={"index.dir": str(index_dir)})


@pytest.fixture(scope="session")
def count_tokens() -> CountTokens:
    """The bundled model's real tokenizer (no torch)."""
    return counter_for()


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The real bundled model on the default backend, loaded once per test session."""
    from codechunkd.config.settings import EmbeddingSettings
    from codechunkd.embedding.embedder import make_embedder

    onnx_dir = tmp_path_factory.getbasetemp() / "onnx-models"
    return make_embedder(EmbeddingSettings(onnx_dir=str(onnx_dir)))


class Indexer:
    """A real Syncer on a real index directory, as `codechunkd index` builds it."""

    def __init__(self, settings: Settings, embedder) -> None:  # type: ignore[no-untyped-def]
        from codechunkd.pipeline.sync import Syncer
        from codechunkd.storage.cache import EmbeddingCache
        from codechunkd.storage.layout import IndexPaths
        from codechunkd.storage.store import IndexStore

        self.paths = IndexPaths.of(settings)
        self.store = IndexStore(self.paths.uri, state_file=self.paths.state_file)
        self.cache = EmbeddingCache(self.paths.cache, max_entries=settings.embedding.cache_size)
        self.syncer = Syncer(settings, self.store, embedder, self.cache)

    def sync(self, path: Path, **kw):  # type: ignore[no-untyped-def]
        from codechunkd.git.changes import GitSource

        return self.syncer.sync(GitSource(path), **kw)

    def rows(self) -> list[dict]:  # type: ignore[type-arg]
        tbl = self.store.chunks_table()
        cols = ["id", "path", "start_byte", "end_byte", "content_hash", "symbol", "kind", "blob"]
        return tbl.search().select(cols).limit(None).to_arrow().to_pylist()

    def close(self) -> None:
        self.cache.close()


@pytest.fixture
def indexer(settings: Settings, embedder) -> Iterator[Indexer]:  # type: ignore[no-untyped-def]
    ix = Indexer(settings, embedder)
    yield ix
    ix.close()
