"""An index on S3 (or an S3-compatible server): its storage options and a tiny S3 client.

LanceDB reads and writes the tables itself (its Rust ``object_store``); codechunkd
only builds the ``storage_options`` it is given, from the ``[object_store]``
settings and the environment variables they name (the settings hold variable
names, never secrets; ``ObjectStore`` keeps the secrets out of its ``repr``).

The client here (standard library only: SigV4 signing over ``http.client``) does the
one thing LanceDB does not expose: a conditional ``PUT``/``GET``/``DELETE`` of one
small object, which the writer's lease (``lease.py``) is made of.  ``If-None-Match: *``
creates an object only when it is absent and ``If-Match: <etag>`` replaces only the
version one has read: S3 (since 2024), MinIO and SeaweedFS answer 412 otherwise.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import http.client
import os
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from codechunkd.config.settings import ObjectStoreSettings
from codechunkd.errors import ConfigError, StoreError
from codechunkd.httpclient import (
    MAX_ERROR_BYTES,
    Connection,
    TLSConnection,
    TooLarge,
    read_capped,
)

_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

ATTEMPT_TIMEOUT_S = 30
"""The longest one request to the object store may take (object_store's own default), or
``object_store.retry_timeout_s`` when that is shorter."""


def is_local(uri: str) -> bool:
    """Whether ``uri`` is a local directory (a path or ``file://``), not an object store."""
    return "://" not in uri or uri.startswith("file://")


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectStore:
    """Where and as whom to reach an object store (secrets are never in the ``repr``)."""

    endpoint: str = ""
    region: str = ""
    allow_http: bool = False
    access_key_id: str = field(default="", repr=False)
    secret_access_key: str = field(default="", repr=False)
    session_token: str = field(default="", repr=False)
    retries: int = 10
    retry_timeout_s: int = 180

    @classmethod
    def from_settings(
        cls, s: ObjectStoreSettings, env: Mapping[str, str] | None = None
    ) -> ObjectStore:
        """The settings, with the credentials read from the variables they name."""
        env = os.environ if env is None else env

        def secret(name: str) -> str:
            return env.get(name, "") if name else ""

        return cls(
            endpoint=s.endpoint.rstrip("/"),
            region=s.region,
            allow_http=s.allow_http,
            access_key_id=secret(s.access_key_env),
            secret_access_key=secret(s.secret_key_env),
            session_token=secret(s.session_token_env),
            retries=s.retries,
            retry_timeout_s=s.retry_timeout_s,
        )

    def storage_options(self) -> dict[str, str]:
        """LanceDB's ``storage_options`` (keys of Rust ``object_store``'s S3 builder)."""
        opts = {
            "aws_endpoint": self.endpoint,
            "aws_region": self.region,
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "aws_session_token": self.session_token,
        }
        out = {k: v for k, v in opts.items() if v}
        out["client_max_retries"] = str(self.retries)
        out["client_retry_timeout"] = str(self.retry_timeout_s)
        # each attempt waits 30 s by default, which alone outlasts a small retry budget: a
        # stalled server held a write for 30 s with retry_timeout_s = 2 (measured); no
        # attempt outlives the budget now (unchanged at the default budget of 180 s)
        out["timeout"] = f"{min(ATTEMPT_TIMEOUT_S, self.retry_timeout_s)}s"
        if self.allow_http:
            out["allow_http"] = "true"
        return out


def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (``bucket``, ``some/prefix``)."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ConfigError(f"{uri!r} is not an s3://bucket/prefix URI", key="index.dir")
    return parsed.netloc, parsed.path.strip("/")


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def etag(self) -> str:
        return self.headers.get("etag", "")


class S3Client:
    """Signed requests for single objects of one bucket (SigV4, path style on an endpoint)."""

    def __init__(self, store: ObjectStore, bucket: str, *, timeout: float = 10.0) -> None:
        if not (store.access_key_id and store.secret_access_key):
            raise ConfigError(
                "writing an s3:// index needs credentials: set the variables that "
                "object_store.access_key_env and object_store.secret_key_env name",
                key="object_store.access_key_env",
            )
        self.store = store
        self.bucket = bucket
        self.timeout = timeout
        self.region = store.region or "us-east-1"
        if store.endpoint:
            url = urllib.parse.urlsplit(store.endpoint)
            if url.scheme == "http" and not store.allow_http:
                raise ConfigError(
                    f"object_store.endpoint {store.endpoint} is http: set "
                    "object_store.allow_http to use it",
                    key="object_store.allow_http",
                )
            self.https = url.scheme != "http"
            self.host = url.netloc
            self.prefix = f"{url.path.rstrip('/')}/{bucket}"
        else:
            self.https = True
            self.host = f"{bucket}.s3.{self.region}.amazonaws.com"
            self.prefix = ""

    def request(
        self, method: str, key: str, body: bytes = b"", headers: Mapping[str, str] | None = None
    ) -> Response:
        """One signed request for ``key``; a connection failure is a one-line ``StoreError``.

        So is an answer over ``MAX_ERROR_BYTES`` (64 KiB: the objects here are small) or
        one whose body is still arriving ``timeout`` seconds after the request began: a
        hostile or broken server costs one bounded, failed request (a lease's caller
        retries or gives up as for an unreachable server).
        """
        deadline = time.monotonic() + self.timeout
        path = f"{self.prefix}/{urllib.parse.quote(key, safe='/-_.~')}"
        hdrs = {k.lower(): v for k, v in (headers or {}).items()}
        hdrs.update(self._sign(method, path, body, hdrs))
        cls = TLSConnection if self.https else Connection
        conn = cls(self.host, timeout=self.timeout)
        try:
            conn.request(method, path, body=body or None, headers=hdrs)
            resp = conn.getresponse()
            body = read_capped(resp, MAX_ERROR_BYTES, deadline)
            return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
        except (OSError, http.client.HTTPException, TooLarge) as exc:
            where = f"{'https' if self.https else 'http'}://{self.host}"
            raise StoreError(f"cannot reach the object store at {where}: {exc}") from None
        finally:
            conn.close()

    def _sign(
        self, method: str, path: str, body: bytes, headers: Mapping[str, str]
    ) -> dict[str, str]:
        """The SigV4 headers of a request (``Authorization`` and what it signs)."""
        now = dt.datetime.now(dt.UTC)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        payload = hashlib.sha256(body).hexdigest() if body else _EMPTY_SHA256
        signed = {
            **headers,
            "host": self.host,
            "x-amz-date": stamp,
            "x-amz-content-sha256": payload,
        }
        if self.store.session_token:
            signed["x-amz-security-token"] = self.store.session_token
        names = sorted(signed)
        canonical = "\n".join(
            [
                method,
                path,
                "",
                *(f"{n}:{str(signed[n]).strip()}" for n in names),
                "",
                ";".join(names),
                payload,
            ]
        )
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = f"AWS4{self.store.secret_access_key}".encode()
        for part in (day, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        out = {k: v for k, v in signed.items() if k != "host"}
        out["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.store.access_key_id}/{scope}, "
            f"SignedHeaders={';'.join(names)}, Signature={signature}"
        )
        return out


_DENIED = ("SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied", "403 Forbidden")
_UNREACHABLE = ("Connection refused", "error sending request", "dns error", "timed out")


def failure_reason(text: str) -> str | None:
    """What an object-store error of LanceDB's (a long Rust debug text) means, if known."""
    if any(s in text for s in _DENIED):
        return (
            "the object store refused the credentials: check the variables "
            "object_store.access_key_env and object_store.secret_key_env name"
        )
    if "NoSuchBucket" in text:
        return "the bucket does not exist"
    if any(s.lower() in text.lower() for s in _UNREACHABLE):
        return "the object store cannot be reached: check object_store.endpoint"
    return None
