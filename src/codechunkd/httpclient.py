"""HTTP plumbing shared by the OpenAI-compatible clients (embeddings and chat).

Standard library only.  ``post_json`` sends one request and sorts what can go
wrong into two kinds: ``Retryable`` (429 and 5xx, honouring ``Retry-After``;
timeouts; refused or reset connections; answers cut short) and a final error
built by the caller's ``fail(reason)``.  ``retrying`` is the one retry loop of
both clients; ``backoff`` spaces the retries (a ``Retry-After`` is honoured up to the
caller's longest delay, never longer).

A peer is not trusted to be sane: ``read_capped`` reads every body in bounded pieces, at
most ``MAX_ANSWER_BYTES`` of an answer (``MAX_ERROR_BYTES`` of an error's), and no attempt
outlives its timeout however slowly the body trickles in, nor however many interim
``100 Continue`` answers come ahead of it (``BoundedResponse``).

The API key goes to the configured endpoint only: redirects are never followed
(a 3xx is a final error naming where it pointed: a bearer token must not follow
a redirect to another origin, nor an https URL down to http), and the key is
replaced by ``***`` in every error text before anyone can log it (a server may
echo the request's headers in its error body).
"""

from __future__ import annotations

import email.utils
import http.client
import json
import math
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from codechunkd import logs
from codechunkd.errors import ConfigError

T = TypeVar("T")

RETRYABLE = frozenset({408, 425, 429, 500, 502, 503, 504})

MAX_ANSWER_BYTES = 64 << 20
"""The largest answer read (an endless body grew to 1.5 GB before this cap)."""
MAX_ERROR_BYTES = 64 << 10
"""The most of an error's body read (only a short message is shown from it)."""
_PIECE = 64 << 10


class TooLarge(Exception):
    """A body longer than the cap ``read_capped`` was given."""


class _Body(Protocol):
    def read1(self, size: int = -1, /) -> bytes: ...


def read_capped(body: _Body, limit: int, deadline: float) -> bytes:
    """All of ``body``, read in bounded pieces: ``TooLarge`` past ``limit`` bytes,
    ``TimeoutError`` once ``time.monotonic()`` passes ``deadline`` (a body trickled in a
    byte at a time never times a socket read out; it ends within one more socket timeout),
    ``http.client.IncompleteRead`` when it ends short of its ``Content-Length``.
    """
    pieces: list[bytes] = []
    size = 0
    while piece := body.read1(_PIECE):
        size += len(piece)
        if size > limit:
            raise TooLarge(f"a body larger than {limit} bytes")
        pieces.append(piece)
        if time.monotonic() > deadline:
            raise TimeoutError("the body took longer than the timeout")
    left = getattr(body, "length", None)  # what an HTTPResponse's Content-Length still owes
    if left:
        raise http.client.IncompleteRead(b"".join(pieces), left)
    return b"".join(pieces)


class Retryable(Exception):
    """One failed attempt that may succeed later; ``delay`` is the server's Retry-After."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        self.reason = reason
        self.delay = delay
        super().__init__(reason)


def safe_url(url: str) -> str:
    """The URL without user info, query or fragment, for logs and errors.

    Never raises: it also shows URLs that are not valid (an out-of-range port, an
    unclosed ``[``), and a ``Location`` a server sent.
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # an unbalanced "[": cut what may be secret by hand
        head, sep, rest = url.partition("://")
        netloc, slash, path = rest.partition("/")
        path = path.partition("?")[0].partition("#")[0]
        return f"{head}{sep}{netloc.rpartition('@')[2]}{slash}{path}"
    hostport = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit((parts.scheme, hostport, parts.path, "", ""))


def url_problem(url: str) -> str | None:
    """What makes ``url`` unusable as a configured http(s) endpoint, or None.

    Worded to follow "setting 'KEY' ".  Everything that would otherwise fail only when
    a request is sent (an out-of-range port, an unclosed IPv6 ``[``, an empty or
    overlong host-name label, a non-ASCII path) is caught here, at load time.
    """
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        return (
            "must be ASCII with no spaces or control characters "
            "(percent-encode the path, write an international host name in punycode)"
        )
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL", a bracketed host that is no address
        return f"is not a valid URL ({exc})"
    if parts.scheme not in {"http", "https"}:
        return "must be an http:// or https:// URL"
    hostport = parts.netloc.rpartition("@")[2]
    if hostport.startswith("[") and hostport.partition("]")[2][:1] not in {"", ":"}:
        return "has text after the bracketed IPv6 address (write http://[ADDRESS]:PORT/…)"
    try:
        port = parts.port
    except ValueError:
        if not hostport.startswith("[") and hostport.count(":") > 1:
            return "has an IPv6 address outside brackets (write http://[ADDRESS]:PORT/…)"
        raw = hostport.rpartition("]")[2].partition(":")[2]
        if raw.isdigit():
            return f"has port {raw}, out of range (1 to 65535)"
        return f"has port {raw!r}, not a number (1 to 65535)"
    if port == 0:
        return "has port 0, out of range (1 to 65535)"
    if not parts.hostname:
        return "has no host (write http://HOST:PORT/…)"
    try:
        parts.hostname.encode("idna")  # what the resolver does: a bad name fails there
    except UnicodeError:
        return f"has an invalid host name {parts.hostname!r} (an empty or overlong label)"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "must have no query (?…) or fragment (#…): a path is appended to it"
    return None


def check_url(url: str, key: str) -> None:
    """A configured endpoint must be a usable http(s) URL (``urlopen`` would also open
    ``file:`` URLs, and a bad port or host would only fail once a request is sent)."""
    problem = url_problem(url)
    if problem is not None:
        raise ConfigError(f"setting {key!r} {problem}, got {safe_url(url)!r}", key=key)


def api_key(variable: str, key: str, environ: Mapping[str, str]) -> str | None:
    """The API key from the environment variable a setting names (None: no key wanted)."""
    if not variable:
        return None
    value = environ.get(variable)
    if not value:
        raise ConfigError(f"environment variable {variable} ({key}) is not set", key=key)
    return value


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date);
    None when it is missing or not a finite time (``backoff`` bounds what it returns)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - now
        except (TypeError, ValueError, OverflowError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def backoff(attempt: int, asked: float | None, *, base: float, limit: float) -> float:
    """Jittered exponential back-off, at least a server's Retry-After, never past ``limit``
    (a server asking for a day, or for 1e12 s, must not stall or crash the client)."""
    delay = random.uniform(0.5, 1.0) * base * (2.0 ** min(attempt, 64))
    if asked is not None:
        delay = max(asked, delay)
    return min(delay, limit)


class EndlessInterim(http.client.HTTPException):
    """Interim ``100 Continue`` answers for longer than the socket's timeout."""


class BoundedResponse(http.client.HTTPResponse):
    """An answer whose interim ``100 Continue``s end within the socket's timeout.

    ``http.client`` skips any number of them before the real status line, so a peer that
    sent one every half second, each within the socket timeout, held a request for ever.
    """

    def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self._until = time.monotonic() + (sock.gettimeout() or 60.0)

    def _read_status(self) -> tuple[str, int, str]:
        status: tuple[str, int, str] = super()._read_status()  # type: ignore[misc]
        if status[1] == http.client.CONTINUE and time.monotonic() > self._until:
            raise EndlessInterim("interim 100 Continue answers past the timeout")
        return status


class Connection(http.client.HTTPConnection):
    response_class = BoundedResponse


class TLSConnection(http.client.HTTPSConnection):
    response_class = BoundedResponse


class _Http(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(Connection, req)


class _Https(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(TLSConnection, req)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follow no redirect: the 3xx reaches ``post_json`` as an ``HTTPError``."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect, _Http, _Https)


def scrub(text: str, key: str | None) -> str:
    """``text`` with the API key replaced by ``***``."""
    return text.replace(key, "***") if key else text


def error_detail(body: bytes, key: str | None = None) -> str:
    """The server's error message (OpenAI shape ``{"error": {"message": …}}``), shortened.

    The key is scrubbed before shortening, so no prefix of it survives the cut, and again
    after JSON decoding (a server may echo it escaped, ``\\/`` for ``/``).
    """
    text = scrub(body.decode("utf-8", "replace"), key)
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return text.strip()[:200]
    if isinstance(parsed, dict):
        err = parsed.get("error", parsed)
        message = err.get("message", err) if isinstance(err, dict) else err
        return scrub(str(message), key)[:200]
    return text.strip()[:200]


def post_json(
    endpoint: str,
    payload: bytes,
    *,
    key: str | None,
    timeout: float,
    now: Callable[[], float],
    fail: Callable[[str], Exception],
) -> bytes:
    """POST a JSON body; the answer's bytes, or ``Retryable``, or ``fail(reason)``.

    No redirect is followed (see the module docstring); no reason carries the key.  The
    attempt ends within about ``timeout`` (twice it at worst) even when the answer trickles
    in (``Retryable``); an answer over ``MAX_ANSWER_BYTES`` is ``fail``: not retried, the
    server would likely send it again.
    """
    deadline = time.monotonic() + timeout
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    # callers check that the scheme is http(s) when they are configured
    request = urllib.request.Request(endpoint, data=payload, headers=headers)  # noqa: S310
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            body = read_capped(response, MAX_ANSWER_BYTES, deadline)
    except TooLarge:
        raise fail(f"the answer is larger than {MAX_ANSWER_BYTES >> 20} MiB") from None
    except urllib.error.HTTPError as exc:
        with exc:
            try:
                detail = error_detail(read_capped(exc, MAX_ERROR_BYTES, deadline), key)
            except (TooLarge, OSError, http.client.HTTPException) as why:
                detail = f"(its message unread: {type(why).__name__})"
            if exc.code in RETRYABLE:
                delay = retry_after(exc.headers.get("Retry-After"), now())
                raise Retryable(f"HTTP {exc.code} {detail}".strip(), delay) from None
            if 300 <= exc.code < 400:
                target = urllib.parse.urljoin(endpoint, exc.headers.get("Location") or "")
                raise fail(
                    f"HTTP {exc.code}: redirected to {safe_url(target)}, not followed "
                    "(credentials go to the configured URL only); configure that URL instead"
                ) from None
        raise fail(f"HTTP {exc.code}: {detail}".strip(": ")) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise Retryable(f"timed out after {timeout} s") from None
        if isinstance(exc.reason, OSError):
            raise Retryable(f"connection failed: {exc.reason.strerror or exc.reason}") from None
        raise fail(scrub(str(exc.reason), key)) from None
    except TimeoutError:
        raise Retryable(f"timed out after {timeout} s") from None
    except EndlessInterim as exc:
        raise Retryable(str(exc)) from None
    except http.client.HTTPException as exc:  # IncompleteRead: the body was cut short
        raise Retryable(f"answer cut short ({type(exc).__name__})") from None
    except OSError as exc:
        raise Retryable(f"connection failed: {exc.strerror or exc}") from None
    return body


def retrying(
    send: Callable[[], T],
    *,
    retries: int,
    delay: Callable[[int, float | None], float],
    stop: threading.Event,
    gave_up: Callable[[int, Retryable], Exception],
    cancelled: Callable[[], Exception],
    event: str,
    url: str,
    before: Callable[[], bool] = lambda: True,
    on_retryable: Callable[[Retryable], None] = lambda exc: None,
) -> T:
    """``send()`` until it returns, retrying ``Retryable`` up to ``retries`` times.

    ``delay(attempt, retry_after)`` spaces the tries, waiting on ``stop`` (a shutdown
    cuts a wait short and raises ``cancelled()``); each retry logs ``event``.  ``before``
    runs ahead of every try (a rate limiter: False means stopped); ``on_retryable`` sees
    every failed try (to pause other requests on a ``Retry-After``).  After the last try,
    ``gave_up(tries, last)`` is raised.
    """
    for attempt in range(retries + 1):
        if not before():
            raise cancelled()
        try:
            return send()
        except Retryable as exc:
            on_retryable(exc)
            if stop.is_set():
                raise cancelled() from None
            if attempt >= retries:
                raise gave_up(attempt + 1, exc) from None
            wait = delay(attempt, exc.delay)
            logs.get_logger("codechunkd.http").warning(
                event, url=url, reason=exc.reason, attempt=attempt + 1, delay_s=round(wait, 3)
            )
            if stop.wait(wait):
                raise cancelled() from None
    raise AssertionError("unreachable")  # pragma: no cover
