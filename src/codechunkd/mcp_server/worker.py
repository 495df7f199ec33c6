"""The backend in a process of its own: the reader the MCP server asks, over a pipe.

Owns ``BackendProcess``.  ``codechunkd mcp`` starts it before it imports the MCP SDK: a
forked child opens the index and loads the query model (``Backend.warm``) while the server
imports the SDK (~0.8 s of pydantic models), so the two run on two cores instead of taking
turns at one interpreter lock, and an agent's first search finds both ready (bench/startup.py:
~0.45x the first answer of the code before #33, against ~0.7x with a thread).  The server's own
process then never loads Lance or onnxruntime: what crashes in native code (a segfault, an
abort, the kernel's OOM killer) takes the reader down, not the agent's connection.

A call is ``(method, args, kwargs)`` for one of ``CALLS`` (``Backend``'s tool methods), and
its answer ``("ok", value)``, ``("failure", text)`` (a ``ToolFailure``: the agent reads it)
or ``("error", text)`` (anything else: a bug, reported as the SDK reports a crash).  Calls
are answered one at a time, in order.  When the reader dies, the call in flight is a tool
failure that says so, and the next call starts a new reader (spawned: the server has
threads by then, and forking a process with threads is not safe).  The reader ends when
the server closes its end of the pipe, or exits.  Nothing here imports the MCP SDK.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import threading
from multiprocessing.connection import Connection
from typing import Any

from codechunkd import logs
from codechunkd.config import Settings
from codechunkd.mcp_server.backend import Backend, ToolFailure
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.request import SearchRequest

log = logs.get_logger("codechunkd.mcp")

CALLS = frozenset(
    {
        *("search", "outline", "values", "chunk_at", "chunks", "status"),
        *("definitions", "uses", "repo_map", "scope_note"),
    }
)
"""The ``Backend`` methods the tools call (tools.py, refs.py)."""


def serve(conn: Connection, settings: Settings, inherited: int | None) -> None:
    """The reader's loop (the child's target): warm up, then answer calls until the pipe
    closes.  ``inherited`` is the server's end of the pipe, which a forked child holds too:
    closed here, so that the server's exit is this end's EOF."""
    if inherited is not None:
        os.close(inherited)
    else:  # spawned: a fresh interpreter, whose records go where the server's do
        logs.configure(lazy=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the server's to handle
    os.dup2(2, 1)  # stdout is the agent's protocol: what a library prints goes to stderr
    backend = Backend(settings)
    backend.warm()
    gc.freeze()  # what warming loaded lives as long as the reader: no collection walks it again
    while True:
        try:
            name, args, kwargs = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[str, Any] = ("ok", getattr(backend, name)(*args, **kwargs))
        except ToolFailure as exc:
            answer = ("failure", str(exc))
        except Exception as exc:  # sent to the server, which reports it as a crash
            log.exception("mcp_reader_error", call=name)
            answer = ("error", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(answer)
        except (OSError, ValueError):  # the server went; an answer that cannot be pickled
            return


class BackendProcess:
    """``Backend``'s tool methods, answered by a reader process (``serve``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.paths = IndexPaths.of(settings)
        self._lock = threading.Lock()
        self._conn: Connection | None = None
        self._proc: Any = None
        self._start("fork")

    def _start(self, method: str) -> None:
        """A new reader: forked at the server's start (before any thread), spawned after."""
        ours, theirs = mp.Pipe()
        inherited = ours.fileno() if method == "fork" else None
        context: Any = mp.get_context(method)
        proc = context.Process(
            target=serve, args=(theirs, self.settings, inherited), name="codechunkd-mcp-reader"
        )
        proc.daemon = True
        proc.start()
        theirs.close()
        self._conn, self._proc = ours, proc
        log.info("mcp_reader_started", pid=proc.pid, how=method)

    def close(self) -> None:
        """End the reader: its pipe closes, it returns; killed if it does not within 10 s."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._proc is not None:
                self._proc.join(10)
                if self._proc.is_alive():
                    self._proc.kill()
                    self._proc.join()

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``Backend.<name>(*args, **kwargs)``, in the reader."""
        if name not in CALLS:
            raise ValueError(f"not a backend call: {name}")
        with self._lock:
            if self._conn is not None and not self._proc.is_alive():  # died between calls
                self._died(EOFError("gone while idle"))
            try:
                self._send((name, args, kwargs))
            except OSError as exc:  # it was exiting: the call never reached it
                self._died(exc)
                self._send((name, args, kwargs))
            assert self._conn is not None
            try:
                kind, value = self._conn.recv()
            except (EOFError, OSError) as exc:
                raise ToolFailure(self._died(exc)) from exc
        if kind == "failure":
            raise ToolFailure(value)
        if kind == "error":
            raise RuntimeError(f"the index reader failed: {value}")
        return value

    def _send(self, call: tuple[str, tuple[Any, ...], dict[str, Any]]) -> None:
        """Send a call to the reader, started first if there is none (spawned)."""
        if self._conn is None:
            self._start("spawn")
        assert self._conn is not None
        self._conn.send(call)

    def _died(self, exc: BaseException) -> str:
        """Reap a reader that stopped answering; what the agent is told (the next call starts
        a new one)."""
        assert self._conn is not None and self._proc is not None
        self._conn.close()
        self._conn = None
        self._proc.join(10)
        code = self._proc.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        log.warning("mcp_reader_died", pid=self._proc.pid, how=how, error=str(exc)[:200])
        return (
            f"the index reader stopped ({how}) while answering; ask again: a new one starts "
            "with the next call"
        )

    # -- Backend's tool methods ------------------------------------------------------

    def search(
        self, req: SearchRequest, *, every: bool = False
    ) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
        result: tuple[list[dict[str, Any]], str, dict[str, Any]] = self.call(
            "search", req, every=every
        )
        return result

    def outline(self, path: str, repo: str | None) -> list[Any]:
        rows: list[Any] = self.call("outline", path, repo)
        return rows

    def values(self, path: str, ids: list[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = self.call("values", path, list(ids))
        return found

    def chunk_at(self, path: str, line: int, repo: str | None) -> str:
        return str(self.call("chunk_at", path, line, repo))

    def chunks(self, ids: list[str]) -> list[tuple[Any, list[Any]]]:
        found: list[tuple[Any, list[Any]]] = self.call("chunks", list(ids))
        return found

    def status(self) -> tuple[dict[str, Any], str]:
        doc: tuple[dict[str, Any], str] = self.call("status")
        return doc

    def definitions(self, name: str, repo: str | None) -> list[dict[str, Any]]:
        defs: list[dict[str, Any]] = self.call("definitions", name, repo)
        return defs

    def scope_note(self, repo: str | None) -> str:
        return str(self.call("scope_note", repo))

    def uses(
        self,
        name: str,
        repo: str | None,
        *,
        calls_only: bool,
        callees: bool,
        limit: int,
        depth: int = 1,
    ) -> tuple[list[dict[str, Any]], int]:
        found: tuple[list[dict[str, Any]], int] = self.call(
            "uses", name, repo, calls_only=calls_only, callees=callees, limit=limit, depth=depth
        )
        return found

    def repo_map(
        self, path: str, budget: int, repo: str | None
    ) -> tuple[str, list[dict[str, Any]]]:
        found: tuple[str, list[dict[str, Any]]] = self.call("repo_map", path, budget, repo)
        return found
