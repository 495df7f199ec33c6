"""Fixtures of the daemon tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.daemon.test_service_e2e import Daemon


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    """Daemons a test starts (append them): killed at its end, whatever happened."""
    started: list[Daemon] = []
    yield started
    for d in started:
        d.kill()
