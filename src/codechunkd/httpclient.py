"""HTTP plumbing shared by the OpenAI-compatible clients (embeddings and chat).

Standard library only.  ``post_json`` sends one request and sorts what can go
wrong into two kinds: ``Retryable`` (429 and 5xx, honouring ``Retry-After``;
timeouts; refused or reset connections; answers cut short) and a final error
built by the caller's ``fail(reason)``.  ``backoff`` spaces the retries.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping

from codechunkd.errors import ConfigError

RETRYABLE = frozenset({408, 425, 429, 500, 502, 503, 504})


class Retryable(Exception):
    """One failed attempt that may succeed later; ``delay`` is the server's Retry-After."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        self.reason = reason
        self.delay = delay
        super().__init__(reason)


def safe_url(url: str) -> str:
    """The URL without user info or query, for logs and errors."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def check_url(url: str, key: str) -> None:
    """A configured endpoint must be http(s): ``urlopen`` would also open ``file:`` URLs."""
    if urllib.parse.urlsplit(url).scheme not in {"http", "https"}:
        raise ConfigError(f"{key!r} must be an http(s) URL, got {safe_url(url)!r}", key=key)


def api_key(variable: str, key: str, environ: Mapping[str, str]) -> str | None:
    """The API key from the environment variable a setting names (None: no key wanted)."""
    if not variable:
        return None
    value = environ.get(variable)
    if not value:
        raise ConfigError(f"environment variable {variable} ({key}) is not set", key=key)
    return value


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def backoff(attempt: int, asked: float | None, *, base: float, limit: float) -> float:
    """Jittered exponential back-off; a server's Retry-After is honoured even past ``limit``."""
    delay = random.uniform(0.5, 1.0) * base * (2.0**attempt)
    if asked is not None:
        return min(max(asked, delay), max(limit, asked))
    return min(delay, limit)


def error_detail(body: bytes) -> str:
    """The server's error message (OpenAI shape ``{"error": {"message": …}}``), shortened."""
    text = body.decode("utf-8", "replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text.strip()[:200]
    if isinstance(parsed, dict):
        err = parsed.get("error", parsed)
        if isinstance(err, dict):
            return str(err.get("message", err))[:200]
        return str(err)[:200]
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
    """POST a JSON body; the answer's bytes, or ``Retryable``, or ``fail(reason)``."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    # callers check that the scheme is http(s) when they are configured
    request = urllib.request.Request(endpoint, data=payload, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            body: bytes = response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            detail = error_detail(exc.read())
            if exc.code in RETRYABLE:
                delay = retry_after(exc.headers.get("Retry-After"), now())
                raise Retryable(f"HTTP {exc.code} {detail}".strip(), delay) from None
        raise fail(f"HTTP {exc.code}: {detail}".strip(": ")) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise Retryable(f"timed out after {timeout} s") from None
        if isinstance(exc.reason, OSError):
            raise Retryable(f"connection failed: {exc.reason.strerror or exc.reason}") from None
        raise fail(str(exc.reason)) from None
    except TimeoutError:
        raise Retryable(f"timed out after {timeout} s") from None
    except http.client.HTTPException as exc:  # IncompleteRead: the body was cut short
        raise Retryable(f"answer cut short ({type(exc).__name__})") from None
    except OSError as exc:
        raise Retryable(f"connection failed: {exc.strerror or exc}") from None
    return body
