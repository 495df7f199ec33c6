"""The control plane: the list of sources, and a Unix socket speaking JSON lines.

Sources come from three places, merged in this order: the paths given to
``codechunkd run``, ``[daemon] sources`` in the settings, and
``sources.json`` next to the index (edited by ``codechunkd add``/``remove``;
a running daemon re-reads it on ``reload``).

The socket lives in the runtime directory (mode 0700), is itself mode 0600,
and answers one JSON object per line with one JSON object per line.  Whoever
can replace the socket sees every query and forges every answer, so both sides
trust it only when its directory is not a symbolic link, is owned by this user
and grants nothing to anyone else, and (for the client) the socket is owned by
this user too; otherwise they refuse with a ``ConfigError`` that says why
(``/tmp/codechunkd-<uid>`` is used when ``XDG_RUNTIME_DIR`` is unset, and
another user may have made it first)::

    {"cmd": "status"}                      -> the status document
    {"cmd": "search", "query": "…", "k": 10, "repo": …, "branch": …, "path": …,
     "lang": …, "kind": …}                 -> {"hits": [...]}
    {"cmd": "reload"}                      -> {"ok": true}
    {"cmd": "ping"}                        -> {"ok": true, "pid": …}
    {"cmd": "unload"}                      -> {"ok": true}  (free the model now)

An error answers ``{"error": "…"}``.  The client side (``request``) is what
``codechunkd status`` and ``search`` use; it imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codechunkd import atomicfile, logs
from codechunkd.errors import ConfigError, StoreError
from codechunkd.platform import resolved
from codechunkd.storage.layout import IndexPaths, private_dir, trust_problem
from codechunkd.storage.lock import live_holder

MAX_REQUEST = 1 << 20
Handler = Callable[[Mapping[str, Any]], Any]


# -- sources ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceSpec:
    """A source the daemon should follow, as the user named it."""

    path: str
    """Absolute path of a working tree (or a bare repository)."""
    ref: str | None = None
    """A ref to follow instead of the working tree (bare mirrors)."""

    @classmethod
    def parse(cls, text: str) -> SourceSpec:
        """``PATH`` or ``PATH#REF``."""
        path, _, ref = text.partition("#")
        return cls(path=str(resolved(path)), ref=ref or None)

    def __str__(self) -> str:
        return f"{self.path}#{self.ref}" if self.ref else self.path


def read_sources(path: Path) -> list[SourceSpec]:
    """The sources listed in ``sources.json``: none when it is absent.

    A file that cannot be read, or is not the list ``write_sources`` writes (cut short,
    edited by hand, a folder in its place), raises ``ConfigError`` naming it: read as
    empty, it would start a daemon without its sources and the next ``add`` would write
    a list without them.  Nothing moves it aside (unlike ``state.json``, it is no copy of
    anything): the user fixes or removes it.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise _damaged(path, f"cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:  # not UTF-8
        raise _damaged(path, f"is damaged: not text ({exc})") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise _damaged(path, f"is damaged: not valid JSON, cut short? ({exc})") from None
    items = doc.get("sources") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise _damaged(path, 'is damaged: not a list of sources (no "sources" list)')
    out = []
    for n, item in enumerate(items, 1):
        ref = item.get("ref") if isinstance(item, dict) else None
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("path"), str)
            or not (ref is None or isinstance(ref, str))
        ):
            raise _damaged(
                path, f'is damaged: source {n} is not {{"path": "...", "ref": "..." or null}}'
            )
        if any(not _utf8_text(v) for v in (item["path"], ref or "")):
            raise _damaged(path, f"is damaged: source {n} has a NUL or a lone surrogate")
        out.append(SourceSpec(path=item["path"], ref=ref or None))
    return out


def _utf8_text(value: str) -> bool:
    """No NUL (no path or ref holds one) and no lone surrogate (JSON's ``"\\ud800"``)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\0" not in value


def _damaged(path: Path, reason: str) -> ConfigError:
    return ConfigError(
        f"the list of sources {path} {reason}; nothing was changed: fix it, "
        "or remove it and `codechunkd add` each source again"
    )


def write_sources(path: Path, specs: Iterable[SourceSpec]) -> None:
    """Replace ``sources.json`` whole (``atomicfile``: synced to disk before it is renamed)."""
    doc = {"sources": [{"path": s.path, "ref": s.ref} for s in specs]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomicfile.write_text(path, json.dumps(doc, indent=1) + "\n")
    except OSError as exc:
        raise StoreError(
            f"cannot write the list of sources {path}: {exc.strerror or exc}"
        ) from None


def merge_sources(*lists: Iterable[SourceSpec]) -> list[SourceSpec]:
    seen: dict[tuple[str, str | None], SourceSpec] = {}
    for specs in lists:
        for s in specs:
            seen.setdefault((s.path, s.ref), s)
    return list(seen.values())


# -- server -------------------------------------------------------------------

MAX_CONNECTIONS = 256
"""Connections served at once; more wait in the listen queue (``ControlServer``)."""
IDLE_S = 30.0
"""A connection with no request for this long is closed (clients send theirs at once)."""


class _RequestHandler(socketserver.StreamRequestHandler):
    server: ControlServer

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.idle_s)  # a client that neither asks nor closes

    def handle(self) -> None:
        while True:
            try:
                line = self.rfile.readline(MAX_REQUEST)
            except OSError:  # idle past IDLE_S, or reset
                return
            if not line:
                return
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise ValueError("a request is a JSON object")
                handler = self.server.handlers.get(str(req.get("cmd")))
                if handler is None:
                    answer: Any = {"error": f"unknown command {req.get('cmd')!r}"}
                else:
                    answer = handler(req)
            except Exception as exc:  # noqa: BLE001 - an error answer, never a dead server
                logs.get_logger("codechunkd.control").warning(
                    "control_request_failed", error=repr(exc)
                )
                answer = {"error": str(exc) or type(exc).__name__}
            try:
                self.wfile.write(json.dumps(answer, default=str).encode() + b"\n")
                self.wfile.flush()
            except OSError:
                return


class ControlServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A JSON-lines server on a Unix socket, one thread per connection.

    Its listen queue holds ``SOMAXCONN`` connections (socketserver's default is 5: twenty
    clients at once found it full, and a client with a timeout gets ``EAGAIN`` at once).
    """

    daemon_threads = True
    block_on_close = False
    request_queue_size = max(128, socket.SOMAXCONN)

    def __init__(
        self,
        path: Path,
        handlers: Mapping[str, Handler],
        *,
        max_connections: int = MAX_CONNECTIONS,
        idle_s: float = IDLE_S,
    ) -> None:
        self.path = path
        self.handlers = dict(handlers)
        self.idle_s = idle_s
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stopping = threading.Event()
        ensure_socket_dir(path.parent)
        try:
            path.unlink()  # a dead daemon's socket (we hold the writer lock)
        except FileNotFoundError:
            pass
        except OSError as exc:  # a directory in its place
            raise ConfigError(
                f"cannot use {path} for the control socket: {exc.strerror}; remove it"
            ) from None
        old = os.umask(0o177)
        try:
            super().__init__(str(path), _RequestHandler)
        finally:
            os.umask(old)
        path.chmod(0o600)
        self._thread: threading.Thread | None = None

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve it on a thread of its own, once fewer than ``MAX_CONNECTIONS`` are open:
        until then it waits, and the connections after it wait in the listen queue, which
        holds no file descriptor (1,100 idle clients used up the daemon's, and its writer
        failed with "Too many open files")."""
        while not self._slots.acquire(timeout=0.5):
            if self._stopping.is_set():
                self.shutdown_request(request)
                return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.5}, name="control"
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
        self.server_close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


# -- client -------------------------------------------------------------------


class DaemonUnavailable(Exception):
    """No daemon answered on the socket (``stalled`` is True when one is there but silent)."""

    def __init__(self, reason: str, *, stalled: bool = False) -> None:
        self.reason = reason
        self.stalled = stalled
        super().__init__(reason)


def _untrusted(problem: str) -> ConfigError:
    return ConfigError(
        f"not trusting the control socket's directory: {problem}; remove it, "
        "or set XDG_RUNTIME_DIR to a directory of your own",
        key="XDG_RUNTIME_DIR",
    )


def ensure_socket_dir(path: Path) -> None:
    """Make the socket's directory 0700, or refuse an existing one we cannot trust."""
    problem = private_dir(path)
    if problem:
        raise _untrusted(problem)


def check_socket(path: Path) -> None:
    """Refuse a socket that someone else could have put there (see the module docstring)."""
    try:
        problem = trust_problem(path.parent, os.lstat(path.parent))
        if problem:  # even with no socket in it: no daemon of ours can listen there
            raise _untrusted(problem)
        info = os.lstat(path)
    except FileNotFoundError as exc:
        raise DaemonUnavailable(f"no daemon listening on {path}") from exc
    except OSError as exc:
        raise DaemonUnavailable(f"cannot look at {path}: {exc.strerror}") from exc
    if not stat.S_ISSOCK(info.st_mode):
        raise _untrusted(f"{path} is not a socket")
    if info.st_uid != os.geteuid():
        raise _untrusted(f"{path} is owned by uid {info.st_uid}, not by you (uid {os.geteuid()})")


def daemon_pid(paths: IndexPaths) -> int | None:
    """The pid of a live ``codechunkd run`` holding the index's writer lock, or None.

    Read from the lock files (stdlib only): what tells a daemon that is starting, busy or
    stopping (its socket missing, refusing, or its queue full) from no daemon at all.
    """
    for lock in (paths.runtime_lock, paths.lock):
        found = live_holder(lock)
        if found is not None and found[1] == "codechunkd run":
            return found[0]
    return None


class _Busy(Exception):
    """The daemon did not take the connection yet: try again within the deadline."""


def request(
    path: Path,
    doc: Mapping[str, Any],
    *,
    timeout: float = 2.0,
    running: Callable[[], object] | None = None,
) -> Any:
    """Send one request and return the answer; ``DaemonUnavailable`` when nobody answers.

    A daemon whose connection queue is full (``EAGAIN``) is asked again until ``timeout``
    has passed, and so is one that ``running`` (e.g. ``daemon_pid``) says is alive while
    its socket is missing or refuses (starting, stopping; a full queue on macOS): neither
    is reported as no daemon, but as ``stalled`` once the time is spent.

    ``ConfigError`` when the socket or its directory cannot be trusted (``check_socket``).
    """
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            return _request_once(path, doc, deadline, running)
        except _Busy as busy:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DaemonUnavailable(
                    f"the daemon is running but did not take the request within {timeout} s "
                    f"({busy})",
                    stalled=True,
                ) from None
            time.sleep(min(pause, left))  # a retry's back-off, not a wait for a condition
            pause = min(2 * pause, 0.1)


def _request_once(
    path: Path, doc: Mapping[str, Any], deadline: float, running: Callable[[], object] | None
) -> Any:
    def refused(exc: DaemonUnavailable) -> Exception:
        return _Busy("its socket refused or was missing") if running and running() else exc

    try:
        check_socket(path)
    except DaemonUnavailable as exc:
        raise refused(exc) from None
    timeout = max(0.001, deadline - time.monotonic())
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            try:
                s.connect(str(path))
            except BlockingIOError:  # its listen queue is full: it is busy, not gone
                raise _Busy("its connection queue was full") from None
            s.sendall(json.dumps(doc).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
    except (FileNotFoundError, ConnectionRefusedError):
        raise refused(DaemonUnavailable(f"no daemon listening on {path}")) from None
    except TimeoutError as exc:
        raise DaemonUnavailable(
            f"the daemon did not answer within {timeout:.1f} s", stalled=True
        ) from exc
    except OSError as exc:
        raise DaemonUnavailable(f"cannot talk to the daemon: {exc}") from exc
    try:
        return json.loads(buf)
    except ValueError as exc:
        raise DaemonUnavailable("the daemon sent no answer", stalled=True) from exc
