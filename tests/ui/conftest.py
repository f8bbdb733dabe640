"""Console test fixtures: a pinned time zone and apps built from fakes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.ui.fakes import FakeHandle
from tests.ui.scenarios import loaded_snapshot


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Event and exit times render in local time: pin it so text and snapshots are stable."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def handle() -> FakeHandle:
    """A handle reporting the six-slot `loaded_snapshot`."""
    return FakeHandle(loaded_snapshot())
