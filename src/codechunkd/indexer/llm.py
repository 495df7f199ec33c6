"""A client of OpenAI-compatible chat-completions servers, for chunk summaries.

Works with anything that speaks ``POST {url}/chat/completions`` (Ollama,
llama.cpp server, vLLM, LM Studio, hosted APIs).  Standard library only
(``urllib``).  ``ChatClient.complete(messages)`` returns one
:class:`Completion` or raises:

- :class:`~codechunkd.errors.EndpointUnavailable` when the server cannot be
  reached or keeps failing: a refused connection, a timeout, HTTP 429 (with or
  without ``Retry-After``), 408/425/5xx, or a body cut short are retried
  ``summaries.retries`` times with exponential back-off (full jitter, at least
  what ``Retry-After`` asks, which also pauses every other request of the
  client), then given up; any other 4xx (a wrong model, a bad key) at once;
- :class:`~codechunkd.errors.BadAnswer` when the answer is not usable: not
  JSON, not the chat-completions shape, no text, or cut short by the model
  (``finish_reason == "length"``).  Never retried in the same run: the same
  prompt would likely give the same answer.

Requests start at most ``summaries.requests_per_minute`` a minute (evenly
spaced), ``summaries.concurrency`` at a time (the caller's pool).  The API key
is read from the environment variable named by ``summaries.api_key_env`` and
sent as a bearer token; it is never logged and never part of an error.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from codechunkd.config.settings import SummarySettings
from codechunkd.errors import BadAnswer, ConfigError, EndpointUnavailable

log = structlog.get_logger("codechunkd.llm")

#: Status codes worth another try: rate limited, or the server is (briefly) unwell.
RETRYABLE = frozenset({408, 425, 429, 500, 502, 503, 504})

Message = Mapping[str, str]
"""One chat message: ``{"role": "system" | "user", "content": "..."}``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """One usable answer of the model."""

    text: str
    """The message content, as the model wrote it (hygiene is the caller's)."""
    prompt_tokens: int
    """Tokens the server counted in the prompt (estimated when it does not say)."""
    completion_tokens: int
    """Tokens the model wrote (estimated when the server does not say)."""
    finish_reason: str
    """``stop`` for a complete answer."""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def estimate_tokens(text: str) -> int:
    """Tokens of a text for budgeting, about 4 characters each (no tokenizer of the LLM)."""
    return max(1, (len(text) + 3) // 4)


def safe_url(url: str) -> str:
    """The URL without user info or query, for logs and errors."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


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


class _Retryable(Exception):
    """One failed attempt that may succeed later; ``delay`` is the server's Retry-After."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        self.reason = reason
        self.delay = delay
        super().__init__(reason)


class RateLimiter:
    """Starts at most ``per_minute`` requests a minute, evenly spaced; 0 means no limit.

    ``pause(seconds)`` holds every later start back (a server's ``Retry-After``).
    Waits go through ``stop.wait`` so shutdown never waits one out.
    """

    def __init__(
        self,
        per_minute: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        stop: threading.Event | None = None,
    ) -> None:
        self._interval = 60.0 / per_minute if per_minute > 0 else 0.0
        self._clock = clock
        self._stop = stop or threading.Event()
        self._lock = threading.Lock()
        self._next = 0.0

    def pause(self, seconds: float) -> None:
        with self._lock:
            self._next = max(self._next, self._clock() + seconds)

    def acquire(self) -> bool:
        """Wait for a slot; False when stopped while waiting."""
        with self._lock:
            now = self._clock()
            start = max(now, self._next)
            self._next = start + self._interval
        delay = start - now
        return not (delay > 0 and self._stop.wait(delay))


class ChatClient:
    """``POST {summaries.url}/chat/completions``, with retries, a rate limit and no key in logs."""

    def __init__(
        self,
        settings: SummarySettings,
        *,
        environ: Mapping[str, str] | None = None,
        backoff: float = 0.5,
        max_delay: float = 30.0,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """``backoff``: first retry's delay (doubling after); ``stop`` cuts every wait short."""
        if not settings.url or not settings.model:
            raise ConfigError(
                "LLM summaries need 'summaries.url' and 'summaries.model'", key="summaries.url"
            )
        if urllib.parse.urlsplit(settings.url).scheme not in {"http", "https"}:
            raise ConfigError(
                f"'summaries.url' must be an http(s) URL, got {safe_url(settings.url)!r}",
                key="summaries.url",
            )
        env = os.environ if environ is None else environ
        self._key: str | None = None
        if settings.api_key_env:
            self._key = env.get(settings.api_key_env)
            if not self._key:
                raise ConfigError(
                    f"environment variable {settings.api_key_env} (summaries.api_key_env) "
                    "is not set",
                    key="summaries.api_key_env",
                )
        self.settings = settings
        self.endpoint = settings.url.rstrip("/") + "/chat/completions"
        self.shown = safe_url(self.endpoint)
        self._backoff = backoff
        self._max_delay = max_delay
        self._stop = stop or threading.Event()
        self._wall = wall
        self.limiter = RateLimiter(settings.requests_per_minute, clock=clock, stop=self._stop)

    def __repr__(self) -> str:
        return f"ChatClient({self.shown!r}, model={self.settings.model!r})"

    @property
    def model(self) -> str:
        return self.settings.model

    def complete(self, messages: Sequence[Message]) -> Completion:
        """One answer to ``messages`` (see the module docstring for what it raises)."""
        payload = json.dumps(
            {
                "model": self.settings.model,
                "messages": [dict(m) for m in messages],
                "max_tokens": self.settings.max_tokens,
                "temperature": 0,
                "stream": False,
            }
        ).encode()
        attempts = self.settings.retries + 1
        for attempt in range(attempts):
            if not self.limiter.acquire():
                raise EndpointUnavailable(self.shown, "cancelled: shutting down")
            try:
                answer = self._post(payload)
            except _Retryable as exc:
                if exc.delay is not None:
                    self.limiter.pause(exc.delay)
                if self._stop.is_set():
                    raise EndpointUnavailable(self.shown, "cancelled: shutting down") from None
                if attempt + 1 >= attempts:
                    raise EndpointUnavailable(
                        self.shown,
                        f"failed {attempt + 1} times, last: {exc.reason}",
                        retry_after=exc.delay,
                    ) from None
                delay = self._delay(attempt, exc.delay)
                log.warning(
                    "summary_request_retry",
                    url=self.shown,
                    reason=exc.reason,
                    attempt=attempt + 1,
                    delay_s=round(delay, 3),
                )
                if self._stop.wait(delay):
                    raise EndpointUnavailable(self.shown, "cancelled: shutting down") from None
                continue
            return self._completion(answer, payload)
        raise AssertionError("unreachable")  # pragma: no cover

    def _delay(self, attempt: int, asked: float | None) -> float:
        backoff = random.uniform(0.5, 1.0) * self._backoff * (2.0**attempt)
        if asked is not None:
            return min(max(asked, backoff), max(self._max_delay, asked))
        return min(backoff, self._max_delay)

    def _post(self, payload: bytes) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        # The scheme was checked to be http(s) in __init__.
        request = urllib.request.Request(self.endpoint, data=payload, headers=headers)  # noqa: S310
        timeout = self.settings.timeout
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                body: bytes = response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                detail = _error_detail(exc.read())
                if exc.code in RETRYABLE:
                    delay = retry_after(exc.headers.get("Retry-After"), self._wall())
                    raise _Retryable(f"HTTP {exc.code} {detail}".strip(), delay) from None
            raise EndpointUnavailable(
                self.shown, f"HTTP {exc.code}: {detail}".strip(": ")
            ) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise _Retryable(f"timed out after {timeout} s") from None
            if isinstance(exc.reason, OSError):
                raise _Retryable(
                    f"connection failed: {exc.reason.strerror or exc.reason}"
                ) from None
            raise EndpointUnavailable(self.shown, str(exc.reason)) from None
        except TimeoutError:
            raise _Retryable(f"timed out after {timeout} s") from None
        except http.client.HTTPException as exc:  # IncompleteRead: the body was cut short
            raise _Retryable(f"answer cut short ({type(exc).__name__})") from None
        except OSError as exc:
            raise _Retryable(f"connection failed: {exc.strerror or exc}") from None
        return body

    def _completion(self, body: bytes, payload: bytes) -> Completion:
        try:
            answer = json.loads(body)
        except ValueError:
            raise BadAnswer("the answer is not JSON") from None
        if not isinstance(answer, dict):
            raise BadAnswer(f"the answer is a JSON {type(answer).__name__}, not an object")
        if "error" in answer and "choices" not in answer:
            raise BadAnswer(f"the server answered an error: {_error_detail(body)}")
        choices = answer.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise BadAnswer("the answer has no choices")
        choice: dict[str, Any] = choices[0]
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else None
        if not isinstance(text, str):
            raise BadAnswer("the answer has no message content")
        finish = str(choice.get("finish_reason") or "stop")
        if finish == "length":
            raise BadAnswer(f"cut short at max_tokens={self.settings.max_tokens}")
        if finish not in {"stop", "eos", "end_turn"}:
            raise BadAnswer(f"finish_reason {finish!r}")
        usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
        assert isinstance(usage, dict)
        prompt = _int(usage.get("prompt_tokens")) or estimate_tokens(payload.decode())
        completion = _int(usage.get("completion_tokens")) or estimate_tokens(text)
        return Completion(
            text=text, prompt_tokens=prompt, completion_tokens=completion, finish_reason=finish
        )


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _error_detail(body: bytes) -> str:
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


__all__ = [
    "ChatClient",
    "Completion",
    "Message",
    "RateLimiter",
    "estimate_tokens",
    "retry_after",
    "safe_url",
]
