"""The chat-completions client against a real server on 127.0.0.1, failure modes included."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs
from tests.chat_server import MODEL, Action, ChatServer, closed_port_url, error
from tests.conftest import scaled

from codechunkd.config.settings import SummarySettings
from codechunkd.errors import BadAnswer, ConfigError, EndpointUnavailable
from codechunkd.httpclient import retry_after
from codechunkd.llm.client import ChatClient, RateLimiter

MESSAGES = [
    {"role": "system", "content": "Summarize."},
    {"role": "user", "content": "Chunk: function load\n\ndef load(): ..."},
]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


def client(url: str, **kw: Any) -> ChatClient:
    values: dict[str, Any] = {
        "url": url,
        "model": MODEL,
        "timeout": 5.0,
        "retries": 2,
        "requests_per_minute": 0,
    }
    values.update(kw)
    return ChatClient(SummarySettings(**values), backoff=0.001)


def test_answer_and_request_shape(server: ChatServer) -> None:
    """One request: model, messages and max_tokens sent; text and usage returned."""
    answer = client(server.url, max_tokens=77).complete(MESSAGES)

    assert answer.text.startswith("Here is a summary:")
    assert answer.finish_reason == "stop"
    assert answer.prompt_tokens > 0
    assert answer.completion_tokens > 0
    (seen,) = server.seen
    assert seen.body["model"] == MODEL
    assert seen.body["messages"] == MESSAGES
    assert seen.body["max_tokens"] == 77
    assert seen.body["stream"] is False


def test_api_key_is_sent_and_never_logged(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key from the named variable is a bearer token; logs and errors never show it."""
    monkeypatch.setenv("TEST_CHAT_KEY", "sk-very-secret")
    server.script.extend([error(503), error(500), error(500)])
    with capture_logs() as logs, pytest.raises(EndpointUnavailable) as raised:
        client(server.url, api_key_env="TEST_CHAT_KEY").complete(MESSAGES)
    assert {"Bearer sk-very-secret"} == {s.headers["Authorization"] for s in server.seen}
    assert [entry["attempt"] + 1 for entry in logs] == [2, 3]
    assert "sk-very-secret" not in repr(logs) + str(raised.value) + repr(client(server.url))
    with pytest.raises(ConfigError, match="NOT_SET_KEY"):
        client(server.url, api_key_env="NOT_SET_KEY")


def test_refused_connection_is_retried_then_unavailable() -> None:
    """Nothing listening: every attempt is refused, then one EndpointUnavailable."""
    with capture_logs() as logs, pytest.raises(EndpointUnavailable, match="connection failed"):
        client(closed_port_url(), retries=2).complete(MESSAGES)
    assert len([e for e in logs if e["event"] == "summary_request_retry"]) == 2


def test_timeout_is_retried_then_unavailable(server: ChatServer) -> None:
    """A server that does not answer within the timeout counts as unavailable."""
    server.script.extend([Action(kind="hang"), Action(kind="hang")])
    t0 = time.monotonic()
    with pytest.raises(EndpointUnavailable, match="timed out"):
        client(server.url, timeout=0.3, retries=1).complete(MESSAGES)
    assert 0.6 <= time.monotonic() - t0 < scaled(4.0)
    assert server.requests == 2


def test_429_with_retry_after_waits_that_long(server: ChatServer) -> None:
    """A 429 with ``Retry-After`` is retried no sooner than asked, then answered."""
    server.script.append(error(429, "slow down", **{"Retry-After": "0.4"}))
    answer = client(server.url).complete(MESSAGES)
    assert answer.text
    first, second = server.seen
    assert second.at - first.at >= 0.4


def test_429_without_retry_after_backs_off(server: ChatServer) -> None:
    """A bare 429 is retried with exponential back-off; exhausted, it is unavailable."""
    server.script.append(error(429))
    assert client(server.url).complete(MESSAGES).text
    server.script.extend([error(429), error(429), error(429)])
    with pytest.raises(EndpointUnavailable, match="HTTP 429") as raised:
        client(server.url, retries=2).complete(MESSAGES)
    assert raised.value.retry_after is None
    assert server.requests == 5


def test_retry_after_of_the_last_429_is_reported(server: ChatServer) -> None:
    """Given up on a 429 that asked for a delay: the caller learns the delay."""
    server.script.append(error(429, **{"Retry-After": "120"}))
    c = ChatClient(SummarySettings(url=server.url, model=MODEL, retries=0, requests_per_minute=0))
    with pytest.raises(EndpointUnavailable) as raised:
        c.complete(MESSAGES)
    assert raised.value.retry_after == 120.0


def test_500_is_retried(server: ChatServer) -> None:
    """A 500 then an answer: the answer."""
    server.script.append(error(500))
    assert client(server.url).complete(MESSAGES).text
    assert server.requests == 2


def test_other_4xx_fail_at_once(server: ChatServer) -> None:
    """A 404 (wrong model or path) is not retried."""
    server.script.append(error(404, "model not found"))
    with pytest.raises(EndpointUnavailable, match="HTTP 404: model not found"):
        client(server.url).complete(MESSAGES)
    assert server.requests == 1


def test_malformed_json_is_a_bad_answer(server: ChatServer) -> None:
    """A body that is not JSON is rejected (not retried: never stored)."""
    server.script.append(Action(kind="raw", body=b'{"choices": [{"message": '))
    with pytest.raises(BadAnswer, match="not JSON"):
        client(server.url).complete(MESSAGES)
    server.script.append(Action(kind="raw", body=b'{"object": "chat.completion"}'))
    with pytest.raises(BadAnswer, match="no choices"):
        client(server.url).complete(MESSAGES)
    assert server.requests == 2


def test_body_cut_short_is_retried(server: ChatServer) -> None:
    """A body shorter than its Content-Length is a transport failure: retried."""
    server.script.append(Action(kind="cut"))
    assert client(server.url).complete(MESSAGES).text
    server.script.extend([Action(kind="cut"), Action(kind="cut")])
    with pytest.raises(EndpointUnavailable, match="cut short"):
        client(server.url, retries=1).complete(MESSAGES)


def test_answer_cut_by_max_tokens_is_rejected(server: ChatServer) -> None:
    """``finish_reason: length`` is a truncated summary: rejected."""
    server.script.append(Action(kind="length"))
    with pytest.raises(BadAnswer, match="cut short at max_tokens"):
        client(server.url).complete(MESSAGES)
    assert server.requests == 1


def test_rate_limit_spaces_requests(server: ChatServer) -> None:
    """600 requests a minute: the third request starts no sooner than 0.2 s after the first
    one was asked for. (The limiter spaces the starts; the server's arrival times carry
    each connection's own latency, so a gap between arrivals can be shorter on a busy
    machine: the first request's connect delayed, the second's not.)"""
    c = client(server.url, requests_per_minute=600)
    t0 = time.monotonic()
    for _ in range(3):
        c.complete(MESSAGES)
    assert time.monotonic() - t0 >= 0.2
    assert len(server.seen) == 3


def test_rate_limiter_releases_the_kth_start_k_intervals_after_the_first() -> None:
    """The limiter itself, on the real clock: the k-th ``acquire`` returns no sooner than
    k intervals after the first was asked for (a late return of one, on a busy machine,
    does not let the next one in early either)."""
    limiter = RateLimiter(600)
    t0 = time.monotonic()
    for k in range(4):
        assert limiter.acquire()
        assert time.monotonic() - t0 >= k * 0.1 - 1e-3


def test_rate_limiter_pause_and_stop() -> None:
    """``pause`` holds later starts back; a set stop event ends a wait at once."""
    now = [100.0]
    stop = threading.Event()
    limiter = RateLimiter(0, clock=lambda: now[0], stop=stop)
    assert limiter.acquire()
    limiter.pause(30.0)
    stop.set()
    t0 = time.monotonic()
    assert not limiter.acquire()
    assert time.monotonic() - t0 < scaled(1.0)


def test_retry_after_forms() -> None:
    """Delta-seconds and HTTP dates; garbage is ignored."""
    assert retry_after("3", 0.0) == 3.0
    assert retry_after("Thu, 01 Jan 1970 00:01:00 GMT", 0.0) == 60.0
    assert retry_after("soon", 0.0) is None
    assert retry_after(None, 0.0) is None


def test_configuration_errors() -> None:
    """No URL or model, or a non-http URL, is a ConfigError naming the setting."""
    with pytest.raises(ConfigError, match=r"summaries\.url"):
        ChatClient(SummarySettings())
    with pytest.raises(ConfigError, match="http"):
        ChatClient(SummarySettings(url="ftp://example.invalid/v1", model="m"))
