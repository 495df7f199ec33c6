"""One writer per object-store index, across machines: a lease object next to the tables.

A local index is guarded by ``flock`` (``lock.py``), which does not reach another
machine.  An ``s3://`` index is guarded by ``<index>/_codechunkd/writer.lease``, a small
JSON object naming its holder (id, host, pid, command) and when it expires:

- taking it is a ``PUT`` with ``If-None-Match: *`` (only one of two racing writers
  creates it; the other gets 412 and reads who holds it);
- an expired lease (its holder died without releasing it) is taken over with
  ``If-Match: <the etag read>``, so two writers cannot both take over one dead lease;
- the holder renews it every third of its lifetime with ``If-Match: <its own etag>``; a
  renewal answered 412 (404 on AWS: the object is gone) means another writer took it over
  (this one stalled past its expiry) or it was deleted: the lease is marked lost and logged;
- a writer also reads it back before each batch commit (``check``, a ``GET``): a takeover
  between two renewals stops the writer before its next write, not up to a third of the
  lease's life later (``LeaseLost``, exit 15; its state did not advance);
- releasing it deletes it (``If-Match`` again: never another writer's lease).

Lance's own commit conflict detection would keep two writers from corrupting a
table, but not from both writing: two writers replacing one file's rows were
measured to leave duplicate ids (FACTS.md).  Expiry compares the holder's clock with
the reader's: machines' clocks must agree to well within ``object_store.lease_s``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Protocol

from codechunkd import logs
from codechunkd.errors import ConfigError, IndexLocked, StoreError
from codechunkd.storage.layout import IndexPaths
from codechunkd.storage.lock import WriterLock
from codechunkd.storage.objectstore import ObjectStore, Response, S3Client, split_s3_uri

log = logs.get_logger("codechunkd.lease")

LEASE_KEY = "_codechunkd/writer.lease"


class WriterGuard(Protocol):
    """What ``WriterLock`` and ``Lease`` share: held between ``acquire`` and ``release``."""

    def acquire(self) -> None: ...
    def release(self) -> None: ...
    def __enter__(self) -> WriterGuard: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class Holder:
    """The body of a lease object."""

    id: str
    host: str
    pid: int
    what: str
    expires_at: float
    """Seconds since the epoch, by the holder's clock."""

    def describe(self) -> str:
        return f"{self.what} (pid {self.pid} on {self.host}, lease {self.id[:8]})"

    @classmethod
    def parse(cls, body: bytes) -> Holder | None:
        try:
            doc = json.loads(body)
            return cls(
                id=str(doc["id"]),
                host=str(doc["host"]),
                pid=int(doc["pid"]),
                what=str(doc["what"]),
                expires_at=float(doc["expires_at"]),
            )
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError):
            return None  # damaged (a pid of Infinity, JSON nested past the parser): unreadable


class LeaseHeld(IndexLocked):
    """Another writer, on this machine or another, holds the index's lease."""

    def __init__(self, uri: str, holder: Holder | None, now: float) -> None:
        super().__init__(uri, holder.pid if holder else None)
        self.holder = holder
        who = (
            f"{holder.describe()}, until it expires in {holder.expires_at - now:.0f} s"
            if holder
            else "another writer"
        )
        self.args = (f"{uri} is being written by {who}",)


class LeaseLost(StoreError):
    """This writer's lease was taken over or deleted: it must not write again."""

    exit_code = 15

    def __init__(self, uri: str, holder: Holder | None) -> None:
        self.uri = uri
        self.holder = holder
        now = f"now held by {holder.describe()}" if holder else "it was deleted or replaced"
        super().__init__(
            f"{uri}: this writer lost its lease ({now}); stopped before its next write, "
            "the source's state not advanced: run it again once the index is free"
        )


class Lease:
    """The writer's lease on an ``s3://`` index (see the module docstring)."""

    def __init__(
        self,
        uri: str,
        store: ObjectStore,
        *,
        what: str = "codechunkd",
        ttl: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        bucket, prefix = split_s3_uri(uri)
        self.uri = uri
        self.key = f"{prefix}/{LEASE_KEY}" if prefix else LEASE_KEY
        self.client = S3Client(store, bucket, timeout=max(1.0, min(10.0, ttl / 6)))
        self.what = what
        self.ttl = ttl
        self.clock = clock
        self.id = uuid.uuid4().hex
        self.lost = False
        """Set when a renewal found another writer's lease: this writer must stop."""
        self._etag: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # -- the object ------------------------------------------------------------

    def _body(self) -> bytes:
        holder = Holder(
            id=self.id,
            host=socket.gethostname(),
            pid=os.getpid(),
            what=self.what,
            expires_at=self.clock() + self.ttl,
        )
        return json.dumps(asdict(holder)).encode()

    def _put(self, condition: dict[str, str]) -> Response:
        resp = self.client.request(
            "PUT", self.key, self._body(), {"content-type": "application/json", **condition}
        )
        self._refuse_denied(resp)
        return resp

    def _refuse_denied(self, resp: Response) -> None:
        if resp.status in (401, 403):
            code = _error_code(resp.body)
            raise StoreError(
                f"the object store refused the credentials for {self.uri} ({code}): check the "
                "variables object_store.access_key_env and object_store.secret_key_env name"
            )
        if resp.status >= 500 or (resp.status == 404 and _error_code(resp.body) == "NoSuchBucket"):
            raise StoreError(
                f"the object store answered {resp.status} {_error_code(resp.body)} for {self.uri}"
            )

    def holder(self) -> tuple[Holder | None, str] | None:
        """The lease's holder and etag as stored now (None: no lease)."""
        resp = self.client.request("GET", self.key)
        self._refuse_denied(resp)
        if resp.status == 404:
            return None
        if resp.status != 200:
            raise StoreError(f"reading the lease of {self.uri}: HTTP {resp.status}")
        return Holder.parse(resp.body), resp.etag

    # -- acquire, renew, release -------------------------------------------------

    def acquire(self) -> None:
        """Take the lease or raise ``LeaseHeld`` naming its holder; then keep renewing it."""
        for _ in range(3):  # a lease released or taken between our PUT and GET: look again
            resp = self._put({"if-none-match": "*"})
            if resp.status == 200:
                self._held(resp.etag)
                return
            if resp.status not in (409, 412):
                raise StoreError(f"taking the lease of {self.uri}: HTTP {resp.status}")
            found = self.holder()
            if found is None:
                continue
            holder, etag = found
            now = self.clock()
            if holder is not None and holder.expires_at > now:
                raise LeaseHeld(self.uri, holder, now)
            resp = self._put({"if-match": etag})  # expired (or unreadable): take it over
            if resp.status == 200:
                log.warning(
                    "lease taken over",
                    index=self.uri,
                    expired=holder.describe() if holder else "unreadable lease",
                )
                self._held(resp.etag)
                return
        raise LeaseHeld(self.uri, None, self.clock())

    def _held(self, etag: str) -> None:
        self._etag = etag
        self.lost = False
        self._stop.clear()
        self._renewer = threading.Thread(
            target=self._renew_loop, name="codechunkd-lease", daemon=True
        )
        self._renewer.start()

    def renew(self) -> bool:
        """Extend the lease; False when it is no longer ours (or could not be reached)."""
        if self._etag is None or self.lost:
            return False
        try:
            resp = self._put({"if-match": self._etag})
        except StoreError as exc:
            log.warning("lease renewal failed", index=self.uri, error=str(exc))
            return False
        if resp.status == 200:
            self._etag = resp.etag
            return True
        if resp.status in (404, 412):
            self.lost = True
            log.error("lease lost: another writer took over the index", index=self.uri)
        return False

    def check(self) -> None:
        """Raise ``LeaseLost`` unless the lease object, read now, is still this writer's.

        Called before each batch commit and before a source's state advances: renewals
        notice a takeover only every third of the lease's life.  Compared by lease id,
        not etag, so a renewal racing this read cannot make it look lost.  A read that
        fails (the server unreachable) raises its ``StoreError``: no write is attempted
        on an index whose lease cannot be confirmed.
        """
        found: tuple[Holder | None, str] | None = None
        if self.lost:  # known already (a renewal): read the new holder only to name it
            with contextlib.suppress(StoreError):
                found = self.holder()
        else:
            found = self.holder()
        holder = found[0] if found else None
        if self.lost or holder is None or holder.id != self.id:
            self.lost = True  # the raise is the report: the caller stops and says why
            raise LeaseLost(self.uri, holder)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            if not self.renew() and self.lost:
                return

    def release(self) -> None:
        """Stop renewing and delete the lease (only if it is still ours).

        A renewal in flight is waited for at most the client's timeout (each of its
        requests ends by then); past that, the renewer is left behind (a daemon thread).
        """
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=2 * self.client.timeout)
            self._renewer = None
        if self._etag is not None and not self.lost:
            with contextlib.suppress(StoreError):  # unreachable: it expires by itself
                self.client.request("DELETE", self.key, headers={"if-match": self._etag})
        self._etag = None

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _error_code(body: bytes) -> str:
    """The ``<Code>`` of an S3 error document (or ``?``)."""
    text = body.decode("utf-8", "replace")
    start = text.find("<Code>")
    end = text.find("</Code>", start)
    return text[start + 6 : end] if start >= 0 and end > start else "?"


def lease_check(guard: WriterGuard) -> Callable[[], None] | None:
    """What a writer calls before each commit to learn that it lost the index: a lease's
    ``check``, or a ``flock``'s (its ``writer.lock`` removed with the index directory)."""
    return guard.check if isinstance(guard, Lease | WriterLock) else None


def writer_problem(guard: WriterGuard) -> str | None:
    """Why a writer holding ``guard`` cannot write now, known without a round trip: its
    lease lost, or its index directory deleted; None when nothing is known to be wrong."""
    if isinstance(guard, WriterLock):
        return guard.problem()
    if isinstance(guard, Lease) and guard.lost:
        return f"{guard.uri}: this writer lost its lease to another writer"
    return None


def writer_lock(paths: IndexPaths, *, what: str) -> WriterGuard:
    """The one-writer guard of an index: ``flock`` for a directory, a lease for ``s3://``.

    A local directory is made when the lock is taken, once the lock beside the socket is
    ours, if missing (``IndexPaths.make_local``: a clear error when a file or an impossible
    path is in the way)."""
    if paths.store is None:
        return WriterLock(
            paths.lock,
            what=what,
            outer=paths.runtime_lock,
            index=paths.uri,
            make_dir=paths.make_local,
        )
    if not paths.uri.startswith("s3://"):
        raise ConfigError(
            f"cannot write {paths.uri}: codechunkd writes to a local directory or an s3:// "
            "index (other object stores can be read)",
            key="index.dir",
        )
    return Lease(paths.uri, paths.store, what=what, ttl=paths.lease_s)
