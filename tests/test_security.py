"""Issue #15, hostile inputs: another user, a redirecting server, a loose umask, bad flags.

Another user is real here: the tests run as root and give the hostile directory or lock
file to uid 65534 (``nobody``) with ``os.chown``; they are skipped when that is not
possible.  Servers are real HTTP servers on 127.0.0.1; the CLI runs as a real process.
"""

from __future__ import annotations

import fnmatch
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
import pytest
from structlog.testing import capture_logs

from codechunkd.config.settings import EmbeddingSettings, SummarySettings
from codechunkd.daemon.control import ControlServer, DaemonUnavailable, request
from codechunkd.embedding.embed_remote import RemoteEmbedder
from codechunkd.errors import ConfigError, EmbeddingError, EndpointUnavailable, StoreError
from codechunkd.llm.client import ChatClient
from codechunkd.storage.globs import path_filter
from codechunkd.storage.layout import private_umask
from codechunkd.storage.lock import WriterLock
from tests.chat_server import MODEL, Action, ChatServer, error
from tests.conftest import Repo

EXE = str(Path(sys.executable).parent / "codechunkd")
OTHER_UID = 65534
KEY = "sk-hostile-test-key-0123456789"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")


def run_cli(
    *argv: str, umask: int = -1, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, *argv], capture_output=True, text=True, env={**os.environ, **(env or {})}, umask=umask
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The stderr of a refused command: one ``codechunkd: error:`` line, no traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("codechunkd: error: "), done.stderr
    return lines[0]


@pytest.fixture
def keep_umask() -> Iterator[None]:
    """Tests that set the process umask put it back."""
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


# -- row 3: the control socket ------------------------------------------------------------


def runtime_dir() -> Path:
    return Path(os.environ["XDG_RUNTIME_DIR"]) / "codechunkd"


@needs_root
def test_daemon_refuses_a_socket_directory_another_user_made(tmp_path: Path) -> None:
    """A 0777 directory of another user (made first, in /tmp) is refused, not chmod-ed."""
    hostile = tmp_path / "codechunkd-0"
    hostile.mkdir()
    hostile.chmod(0o777)
    os.chown(hostile, OTHER_UID, OTHER_UID)
    with pytest.raises(ConfigError, match=f"owned by uid {OTHER_UID}"):
        ControlServer(hostile / "x.sock", {})
    assert not (hostile / "x.sock").exists()
    assert stat.S_IMODE(hostile.stat().st_mode) == 0o777


def test_daemon_refuses_a_symlinked_or_loose_socket_directory(tmp_path: Path) -> None:
    """A symbolic link (to a private directory, even) and a 0755 directory are refused."""
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(ConfigError, match="symbolic link"):
        ControlServer(tmp_path / "link" / "x.sock", {})
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o755)
    with pytest.raises(ConfigError, match="mode 0755"):
        ControlServer(loose / "x.sock", {})


def test_socket_directory_is_0700_whatever_the_umask(tmp_path: Path, keep_umask: None) -> None:
    """Made by the server under umask 0 (the old chmod failure path): still 0700."""
    os.umask(0)
    server = ControlServer(tmp_path / "made" / "x.sock", {"ping": lambda _r: {"ok": True}})
    try:
        assert stat.S_IMODE((tmp_path / "made").stat().st_mode) == 0o700
    finally:
        server.server_close()


@needs_root
def test_client_refuses_a_socket_another_user_planted(tmp_path: Path) -> None:
    """The other user's socket answers, but the client never connects to it."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    path = run / "x.sock"
    planted = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    planted.bind(str(path))
    planted.listen(1)
    try:
        os.chown(path, OTHER_UID, OTHER_UID)
        with pytest.raises(ConfigError, match=f"owned by uid {OTHER_UID}"):
            request(path, {"cmd": "status"}, timeout=0.5)
        os.chown(path, 0, 0)
        os.chown(run, OTHER_UID, OTHER_UID)
        with pytest.raises(ConfigError, match=f"owned by uid {OTHER_UID}"):
            request(path, {"cmd": "status"}, timeout=0.5)
    finally:
        planted.close()
    with pytest.raises(DaemonUnavailable):  # no socket at all: no daemon, as before
        request(tmp_path / "none" / "x.sock", {"cmd": "status"})


@needs_root
def test_status_and_run_refuse_a_hostile_runtime_directory(repo: Repo, tmp_path: Path) -> None:
    """`status` and the daemon stop with one line naming the problem, exit 2 (no restart)."""
    repo.write("a.py", "A = 1\n")
    repo.commit()
    index = tmp_path / "index"
    (index / "_codechunkd").mkdir(parents=True)
    hostile = runtime_dir()
    hostile.mkdir(mode=0o777)
    hostile.chmod(0o777)
    os.chown(hostile, OTHER_UID, OTHER_UID)
    status = run_cli("status", "--index-dir", str(index))
    assert status.returncode == 2
    assert "not trusting the control socket" in one_line_error(status)
    daemon = run_cli("run", str(repo.path), "--index-dir", str(index))
    assert daemon.returncode == 2, daemon.stderr
    assert "not trusting the control socket" in one_line_error(daemon)  # before it starts
    assert list(hostile.iterdir()) == []


def test_add_with_an_untrusted_runtime_directory_says_the_source_was_added(
    repo: Repo, tmp_path: Path
) -> None:
    """`add` writes the list, then cannot trust the socket's directory to tell a daemon:
    it says both (exit 2), instead of only the refusal, which read as "nothing added"."""
    repo.write("a.py", "A = 1\n")
    repo.commit()
    index = tmp_path / "index"
    loose = runtime_dir()
    loose.mkdir(mode=0o777)
    loose.chmod(0o777)
    done = run_cli("add", str(repo.path), "--index-dir", str(index))
    assert done.returncode == 2, done
    assert f"added {repo.path.resolve()}; the daemon was not told (not trusting" in done.stdout
    assert str(repo.path.resolve()) in (index / "_codechunkd" / "sources.json").read_text()


@pytest.mark.parametrize("where", ["a file", "under /proc", "/dev/null"])
def test_a_runtime_directory_that_cannot_be_made_is_one_line(
    repo: Repo, tmp_path: Path, where: str
) -> None:
    """XDG_RUNTIME_DIR naming a file, a device, or a place where nothing can be made:
    `index` says so in one line (exit 2), not "unexpected: [Errno 17] File exists"."""
    repo.write("a.py", "A = 1\n")
    repo.commit()
    rt = {"a file": tmp_path / "afile", "under /proc": Path("/proc/self/nothere")}.get(
        where, Path("/dev/null")
    )
    if where == "a file":
        rt.write_text("x\n")
    done = run_cli(
        "index",
        str(repo.path),
        "--index-dir",
        str(tmp_path / "i"),
        env={"XDG_RUNTIME_DIR": str(rt)},
    )
    assert done.returncode == 2, done.stderr
    assert f"cannot make {rt}/codechunkd" in one_line_error(done)


# -- row 9: the writer lock ---------------------------------------------------------------


def test_lock_does_not_follow_a_symlink(tmp_path: Path) -> None:
    """writer.lock pointing at a file outside: refused, and the file is not truncated."""
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me\n")
    meta = tmp_path / "index" / "_codechunkd"
    meta.mkdir(parents=True)
    (meta / "writer.lock").symlink_to(outside)
    with pytest.raises(StoreError, match="symbolic link"):
        WriterLock(meta / "writer.lock").acquire()
    assert outside.read_text() == "keep me\n"


@needs_root
def test_lock_owned_by_another_user_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    """Another user's lock file (which they could flock) is named, not reported as 'locked'."""
    lock = tmp_path / "index" / "_codechunkd" / "writer.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    os.chown(lock, OTHER_UID, OTHER_UID)
    with pytest.raises(StoreError, match=f"owned by uid {OTHER_UID}") as raised:
        WriterLock(lock).acquire()
    assert raised.value.exit_code == 4


@pytest.mark.parametrize("made_by", ["another user", "anyone"])
def test_an_index_whose_cache_another_user_can_change_is_refused(
    repo: Repo, tmp_path: Path, made_by: str
) -> None:
    """An index directory whose `_codechunkd/cache.sqlite` another user made (uid 65534,
    root only) or everyone may write: `index` refuses with one line naming it (exit 4)
    before any vector is read from it or written to it; the file is left as it was."""
    if made_by == "another user" and os.geteuid() != 0:
        pytest.skip("giving a file away needs root")
    repo.write("a.py", "A = 1\n")
    repo.commit()
    index = tmp_path / "index"
    cache = index / "_codechunkd" / "cache.sqlite"
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"")
    if made_by == "another user":
        os.chown(cache, OTHER_UID, OTHER_UID)
    else:
        cache.chmod(0o666)
    done = run_cli("index", str(repo.path), "--index-dir", str(index))
    assert done.returncode == 4, done.stderr
    line = one_line_error(done)
    assert str(cache) in line and "another user could change" in line, line
    assert cache.read_bytes() == b""


def test_lock_file_is_0600(tmp_path: Path, keep_umask: None) -> None:
    """Created 0600 under umask 022; an old 0644 lock of ours is tightened."""
    os.umask(0o022)
    lock = tmp_path / "index" / "_codechunkd" / "writer.lock"
    with WriterLock(lock):
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    lock.chmod(0o644)
    with WriterLock(lock):
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600


# -- row 7: redirects ---------------------------------------------------------------------


class Recorder:
    """An HTTP server that records the headers of every request, whatever its method."""

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                owner.headers.append(dict(self.headers))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="recorder")

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def servers() -> Iterator[tuple[ChatServer, Recorder]]:
    with ChatServer() as chat, Recorder() as other:
        yield chat, other


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_summaries_never_follow_a_redirect_with_the_key(
    servers: tuple[ChatServer, Recorder], status: int
) -> None:
    """A 3xx to another port: one clear error naming it; the other origin got nothing."""
    chat, other = servers
    chat.script.append(Action(kind="status", status=status, headers={"Location": other.url}))
    settings = SummarySettings(url=chat.url, model=MODEL, api_key_env="K", retries=2)
    client = ChatClient(settings, environ={"K": KEY}, backoff=0.001)
    with pytest.raises(EndpointUnavailable, match=r"redirected to http://127\.0\.0\.1") as raised:
        client.complete([{"role": "user", "content": "Chunk: f\n\nx"}])
    assert other.url in str(raised.value)
    assert other.headers == []
    assert chat.requests == 1  # a redirect is final, not retried
    assert chat.seen[0].headers["Authorization"] == f"Bearer {KEY}"


def test_embeddings_never_follow_a_redirect_with_the_key(
    servers: tuple[ChatServer, Recorder],
) -> None:
    """The embedding client shares the HTTP code: the same refusal."""
    chat, other = servers
    chat.script.append(Action(kind="status", status=302, headers={"Location": other.url}))
    settings = EmbeddingSettings(
        backend="remote", remote_url=chat.url, remote_model="m", api_key_env="K"
    )
    with pytest.raises(EmbeddingError, match="not followed"):
        RemoteEmbedder(settings, environ={"K": KEY}, backoff=0.001).embed(["x"])
    assert other.headers == []


# -- row 11: keys echoed in errors, and the umask -------------------------------------------


def test_a_key_echoed_by_the_server_is_scrubbed_from_errors_and_logs(
    servers: tuple[ChatServer, Recorder],
) -> None:
    """Retried 503s and a final 401 echo the key: no log entry and no error shows it."""
    chat, _ = servers
    echo = f"invalid token Bearer {KEY}"
    chat.script.extend([error(503, echo), error(401, echo)])
    settings = SummarySettings(url=chat.url, model=MODEL, api_key_env="K", retries=2)
    with capture_logs() as logs, pytest.raises(EndpointUnavailable) as raised:
        ChatClient(settings, environ={"K": KEY}, backoff=0.001).complete(
            [{"role": "user", "content": "x"}]
        )
    assert chat.requests == 2
    assert "invalid token Bearer ***" in str(raised.value)
    assert any("Bearer ***" in str(entry) for entry in logs)
    assert KEY not in repr(logs) + str(raised.value)
    assert KEY[:12] not in repr(logs) + str(raised.value)


def test_private_umask_keeps_a_chosen_group_mode(keep_umask: None) -> None:
    """022 and 002 become 077; 027 (the system unit's opt-in) and 077 stay."""
    for old, new in [(0o022, 0o077), (0o002, 0o077), (0o027, 0o027), (0o077, 0o077)]:
        os.umask(old)
        assert private_umask() == new
        assert os.umask(new) == new


@pytest.mark.slow
def test_index_is_private_under_umask_022(
    repo: Repo,
    tmp_path: Path,
    embedder: object,  # the model, exported once per session
) -> None:
    """`codechunkd index` under umask 022: every directory 0700, every file 0600."""
    repo.write("a.py", "def private_code():\n    return 42\n")
    repo.commit()
    index = tmp_path / "deep" / "index"
    done = run_cli("index", str(repo.path), "--index-dir", str(index), umask=0o022)
    assert done.returncode == 0, done.stderr
    assert (index / "_codechunkd" / "cache.sqlite").is_file()
    loose = [
        f"{p} {stat.S_IMODE(p.stat().st_mode):04o}"
        for p in [index.parent, index, *index.rglob("*")]
        if stat.S_IMODE(p.stat().st_mode) & 0o077
    ]
    assert loose == []


# -- row 10: bad flags and values -----------------------------------------------------------


@pytest.mark.parametrize("command", ["search", "status", "verify"])
def test_read_commands_refuse_a_missing_or_non_index_dir(
    command: str, tmp_path: Path, repo: Repo
) -> None:
    """A typo'd --index-dir, a file, an empty folder: one line, exit 4, nothing created."""
    repo.write("a.py", "A = 1\n")
    repo.commit()
    extra = ["x"] if command == "search" else [str(repo.path)] if command == "verify" else []
    empty = tmp_path / "empty"
    empty.mkdir()
    for where, says in [
        (tmp_path / "typo", "no index at"),
        (Path("/etc/passwd"), "is a file, not an index directory"),
        (empty, "is not a codechunkd index"),
    ]:
        done = run_cli(command, *extra, "--index-dir", str(where))
        assert done.returncode == 4, done.stderr
        assert says in one_line_error(done)
    assert not (tmp_path / "typo").exists()
    assert list(empty.iterdir()) == []


@pytest.mark.parametrize("k", ["-5", "0", "1001"])
def test_search_k_out_of_bounds_is_a_usage_error(k: str, tmp_path: Path) -> None:
    """-k -5 used to return all hits but 5; now exit 2 with the bounds."""
    (tmp_path / "index" / "_codechunkd").mkdir(parents=True)
    done = run_cli("search", "x", "-k", k, "--index-dir", str(tmp_path / "index"))
    assert done.returncode == 2
    assert "-k must be between 1 and 1000" in one_line_error(done)


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"CODECHUNKD_DAEMON_RECONCILE_INTERVAL_S": "nan"}, "finite number"),
        ({"CODECHUNKD_DAEMON_RECONCILE_INTERVAL_S": "inf"}, "finite number"),
        ({"CODECHUNKD_DAEMON_SHUTDOWN_TIMEOUT_S": "nan"}, "finite number"),
        ({"CODECHUNKD_EMBEDDING_THREADS": "100000"}, "0 to 256"),
        ({"CODECHUNKD_EMBEDDING_MAX_SEQ_LENGTH": "4096"}, "at most 512 tokens"),
    ],
)
def test_bad_values_stop_the_daemon_with_one_line(
    env: dict[str, str], says: str, tmp_path: Path
) -> None:
    """What made the daemon crash-loop (or hang) is refused before it starts: exit 2."""
    done = run_cli("run", str(tmp_path), "--index-dir", str(tmp_path / "index"), env=env)
    assert done.returncode == 2
    assert says in one_line_error(done)
    assert not (tmp_path / "index").exists()


def test_invalid_utf8_config_is_one_line(tmp_path: Path) -> None:
    """A config file that is not UTF-8: exit 2 naming the file, no traceback."""
    config = tmp_path / "config.toml"
    config.write_bytes(b"[index]\ndir = '\xff\xfe'\n")
    done = run_cli("status", "--config", str(config))
    assert done.returncode == 2
    assert str(config) in one_line_error(done)


def test_path_glob_character_classes_match(tmp_path: Path) -> None:
    """`--path '[ab]*.py'` matches as fnmatch does, on a real LanceDB table."""
    paths = ["a1.py", "b2.py", "c.py", "src/a.py", "x[ab].py", "a.b1"]
    table = lancedb.connect(tmp_path).create_table("t", pa.table({"path": paths}))

    def match(glob: str) -> list[str]:
        return sorted(r["path"] for r in table.search().where(path_filter(glob)).to_list())

    assert match("[ab]*.py") == ["a1.py", "b2.py"]
    assert match("*/[!b].py") == ["src/a.py"]
    assert match("x[[]ab].py") == ["x[ab].py"]
    assert match("*.py") == ["a1.py", "b2.py", "c.py", "src/a.py", "x[ab].py"]
    assert match("x[ab") == []  # an unclosed class is literal text
    assert match("a.b?") == ["a.b1"]


def test_path_glob_classes_with_dashes_and_reversed_ranges_match_as_fnmatch(
    tmp_path: Path,
) -> None:
    """A class's ``-`` is a range or a literal, never Rust regex's ``--`` set difference, and a
    reversed range (``[z-a]``) matches nothing, as fnmatch reads them: `[!+--]*` once let
    through the very files it excludes, and `[z-a]` was a regex parse error."""
    paths = ["+plus.py", ",comma.py", "-dash.py", "a.py", "z.py", "&.py", "~.py", "\\.py"]
    table = lancedb.connect(tmp_path).create_table("t", pa.table({"path": paths}))
    globs = [
        "[!+--]*", "[+--]*", "[a-]*", "[-a]*", "[a--]*", "[z-a]*", "[!z-a]*", "[a-b-z]*",
        "[&&a]*", "[~~a]*", "[!&-~]*", "[\\]*", "[,--]*", "[--/]*",
    ]  # fmt: skip
    for glob in globs:
        got = sorted(r["path"] for r in table.search().where(path_filter(glob)).to_list())
        assert got == sorted(p for p in paths if fnmatch.fnmatchcase(p, glob)), glob
