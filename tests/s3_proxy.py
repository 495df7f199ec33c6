"""A TCP proxy on 127.0.0.1 that slows or stalls a real server's answers (fault tests).

``SlowProxy(upstream_port)`` forwards every connection to ``127.0.0.1:<upstream_port>``
(the S3 server of ``tests/conftest.py``) byte for byte, except that:

- ``delay_s``: the first bytes of each answer (each response of a keep-alive
  connection) are held this long, as a slow or distant server's are;
- ``stall()``: nothing moves in either direction, on any connection, old or new, until
  ``resume()``: requests are not passed on (the server does no work) and answers are
  not passed back, so a client sees connections accepted and then silence, as from a
  hung server.  ``stalled_seen`` counts the chunks held back by a stall, so a test can
  wait until a client has run into it.

Real sockets and threads, no HTTP parsing: what LanceDB's Rust client and our lease
client see is exactly a slow server.  ``close()`` ends every thread (the thread-leak
fixture checks).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

CHUNK = 64 * 1024


class SlowProxy:
    """A delaying, stallable TCP proxy to one port of 127.0.0.1 (see the module docstring)."""

    def __init__(self, upstream_port: int, *, delay_s: float = 0.0) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.delay_s = delay_s
        self.stalled_seen = 0
        """Chunks (requests or answers) a stall has held back so far."""
        self.responses = 0
        """Answers delayed (or passed on) so far: each is the start of one response."""
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._conns: set[_Connection] = set()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="s3-proxy-accept")
        self._acceptor.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- faults -------------------------------------------------------------------

    def stall(self) -> None:
        """From now on nothing passes, either way, until ``resume``."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    # -- forwarding ---------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:  # the listener was closed
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            conn = _Connection(client, server)
            with self._lock:
                if self._closed.is_set():
                    conn.close()
                    return
                self._conns.add(conn)
                self._threads = [t for t in self._threads if t.is_alive()]
                for answers in (False, True):
                    t = threading.Thread(
                        target=self._pump, args=(conn, answers), name="s3-proxy-pump"
                    )
                    self._threads.append(t)
                    t.start()

    def _pump(self, conn: _Connection, answers: bool) -> None:
        """Copy one direction of ``conn`` until either end closes; ``answers``: server to
        client."""
        src, dst = (conn.server, conn.client) if answers else (conn.client, conn.server)
        asked = conn.asked
        try:
            while True:
                data = src.recv(CHUNK)
                if not data:
                    break
                self._wait_while_stalled()
                if not answers:
                    asked.set()
                elif asked.is_set():  # the first bytes of an answer: the server is slow
                    asked.clear()
                    with self._lock:
                        self.responses += 1
                    if self.delay_s and self._closed.wait(self.delay_s):
                        break
                if self._closed.is_set():
                    break
                dst.sendall(data)
        except OSError:
            pass  # either end went away (or close() closed it)
        finally:
            conn.shutdown()  # one side ended: so does the connection
            with self._lock:
                if conn.ended():  # the other pump is done too
                    self._conns.discard(conn)
                    conn.close()

    def _wait_while_stalled(self) -> None:
        if self._flowing.is_set():
            return
        with self._lock:
            self.stalled_seen += 1
        self._flowing.wait()

    # -- lifetime -----------------------------------------------------------------

    def close(self) -> None:
        """Stop accepting, cut every connection, end every thread."""
        with self._lock:
            self._closed.set()
            self._flowing.set()  # release pumps held by a stall
            conns = list(self._conns)
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
        self._listener.close()
        for conn in conns:
            conn.shutdown()
        self._acceptor.join()
        for t in list(self._threads):
            t.join()
        for conn in conns:
            conn.close()

    def __enter__(self) -> SlowProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Connection:
    """One client connection and its connection to the server."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.asked = threading.Event()
        """Set when the client sent something: the server's next bytes start an answer."""
        self._ended = 0

    def shutdown(self) -> None:
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def ended(self) -> bool:
        """Count one pump as done; True once both are (call under the proxy's lock)."""
        self._ended += 1
        return self._ended == 2

    def close(self) -> None:
        self.client.close()
        self.server.close()
