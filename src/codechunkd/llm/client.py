"""A client of OpenAI-compatible chat-completions servers, for chunk summaries.

Works with anything that speaks ``POST {url}/chat/completions`` (Ollama,
llama.cpp server, vLLM, LM Studio, hosted APIs).  Standard library only
(``urllib``).  ``ChatClient.complete(messages)`` returns one
:class:`Completion` or raises:

- :class:`~codechunkd.errors.EndpointUnavailable` when the server cannot be
  reached or keeps failing: a refused connection, a timeout, HTTP 429 (with or
  without ``Retry-After``), 408/425/5xx, or a body cut short are retried
  ``summaries.retries`` times with exponential back-off (full jitter, at least
  what ``Retry-After`` asks up to ``max_delay``, which also pauses every other
  request of the client), then given up; any other 4xx (a wrong model, a bad
  key) or an answer over ``MAX_ANSWER_BYTES`` at once;
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

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codechunkd.config.settings import SummarySettings
from codechunkd.errors import BadAnswer, ConfigError, EndpointUnavailable
from codechunkd.httpclient import (
    Retryable,
    api_key,
    backoff,
    check_url,
    error_detail,
    post_json,
    retrying,
    safe_url,
)

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
        check_url(settings.url, "summaries.url")
        env = os.environ if environ is None else environ
        self._key = api_key(settings.api_key_env, "summaries.api_key_env", env)
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

        def pause(exc: Retryable) -> None:
            if exc.delay is not None:  # a server's Retry-After, bounded as a retry's wait
                self.limiter.pause(min(exc.delay, self._max_delay))

        body = retrying(
            lambda: self._post(payload),
            retries=self.settings.retries,
            delay=self._delay,
            stop=self._stop,
            gave_up=lambda tries, exc: EndpointUnavailable(
                self.shown, f"failed {tries} times, last: {exc.reason}", retry_after=exc.delay
            ),
            cancelled=lambda: EndpointUnavailable(self.shown, "cancelled: shutting down"),
            event="summary_request_retry",
            url=self.shown,
            before=self.limiter.acquire,
            on_retryable=pause,
        )
        return self._completion(body, payload)

    def _delay(self, attempt: int, asked: float | None) -> float:
        return backoff(attempt, asked, base=self._backoff, limit=self._max_delay)

    def _post(self, payload: bytes) -> bytes:
        return post_json(
            self.endpoint,
            payload,
            key=self._key,
            timeout=self.settings.timeout,
            now=self._wall,
            fail=lambda reason: EndpointUnavailable(self.shown, reason),
        )

    def _completion(self, body: bytes, payload: bytes) -> Completion:
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            raise BadAnswer("the answer is not JSON") from None
        if not isinstance(answer, dict):
            raise BadAnswer(f"the answer is a JSON {type(answer).__name__}, not an object")
        if "error" in answer and "choices" not in answer:
            raise BadAnswer(f"the server answered an error: {error_detail(body, self._key)}")
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


__all__ = [
    "ChatClient",
    "Completion",
    "Message",
    "RateLimiter",
    "estimate_tokens",
]
