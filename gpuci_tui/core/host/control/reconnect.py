"""Between two attempts to reach a daemon: the backoff delays, and a wait the operator can cut short.

A link to a daemon (a fleet host's `HostLink`, a dashboard following its
handle) that breaks waits before trying again: 1 s, 2 s, 4 s … up to 30 s,
so that a host that is down is not hammered. An operator who knows the host
is back should not have to wait that out: `Reconnector.retry_now` ends the
wait under way and the next attempt starts at once. It never drops a link
that is up, and never starts a second attempt beside one that is running;
it says which of the three it found (`RetryNow`).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class Backoff:
    """Delays between reconnection attempts: ``base`` doubling up to ``cap``, ± ``jitter``."""

    base: float = 1.0
    cap: float = 30.0
    jitter: float = 0.2
    """Fraction of the delay added or taken away at random."""

    def delay(self, failures: int, rand: Callable[[], float] = random.random) -> float:
        """The wait after ``failures`` consecutive failures (1 for the first)."""
        raw = min(self.cap, self.base * 2.0 ** max(0, failures - 1))
        spread = 1.0 + self.jitter * (2.0 * rand() - 1.0)
        return max(0.0, min(self.cap, raw * spread))


class RetryNow(StrEnum):
    """What "reconnect now" found, and so what it did."""

    RETRYING = "retrying"
    """The link was waiting out its backoff: the wait ended, the next attempt starts now."""
    UNDER_WAY = "under way"
    """An attempt is already running: nothing more was started."""
    CONNECTED = "connected"
    """The link is up: it was left as it is."""


class Reconnector:
    """One link's state between attempts: up or not, and the backoff wait under way."""

    def __init__(self, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """Wait with ``sleep`` (tests pass one driven by a fake clock)."""
        self._sleep = sleep
        self._cut: asyncio.Event | None = None
        self.connected = False
        """The link is up (set by its owner: `up` and `wait`)."""

    @property
    def waiting(self) -> bool:
        """A backoff wait is under way."""
        return self._cut is not None

    def up(self) -> None:
        """The link works (until the next `wait`, or `lost`)."""
        self.connected = True

    def lost(self) -> None:
        """The link broke and is tried again at once (no wait to cut short)."""
        self.connected = False

    async def wait(self, seconds: float) -> bool:
        """The link is down: wait ``seconds``, or less if `retry_now` is called.

        Returns:
            True when the wait was cut short.
        """
        self.connected = False
        cut = self._cut = asyncio.Event()
        sleeper = asyncio.ensure_future(self._sleep(seconds))
        waker = asyncio.ensure_future(cut.wait())
        try:
            await asyncio.wait((sleeper, waker), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._cut = None
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)
        return cut.is_set()

    def retry_now(self) -> RetryNow:
        """End the backoff wait under way, if there is one; never touch a link that is up."""
        if self._cut is not None:
            self._cut.set()
            return RetryNow.RETRYING
        return RetryNow.CONNECTED if self.connected else RetryNow.UNDER_WAY
