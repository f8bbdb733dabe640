"""Request accounting for the simulated organisation (what a rate budget is checked against)."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable

from gpuci_tui.sim.records import RequestLogEntry


class RequestStats:
    """A bounded, thread-safe log of requests with counting helpers.

    Args:
        clock: Time source for the entries.
        keep: How many entries to keep (the oldest are dropped; counts stay exact).
    """

    def __init__(self, clock: Callable[[], float] = time.time, keep: int = 200_000) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._log: deque[RequestLogEntry] = deque(maxlen=keep)
        self._counts: Counter[tuple[str, str]] = Counter()
        self._private_counts: Counter[tuple[str, str]] = Counter()

    def record(
        self,
        method: str,
        route: str,
        status: int,
        *,
        private: bool = False,
        detail: str = "",
        size: int = 0,
    ) -> None:
        """Log one request (``route`` is the template, not the concrete path; ``size``: the
        bytes of its answer's body).
        """
        entry = RequestLogEntry(self._clock(), method, route, status, private, detail, size)
        with self._lock:
            self._log.append(entry)
            (self._private_counts if private else self._counts)[(method, route)] += 1

    def counts(self, *, private: bool = False) -> dict[tuple[str, str], int]:
        """Requests per ``(method, route template)`` since the start (public ones by default)."""
        with self._lock:
            return dict(self._private_counts if private else self._counts)

    def log(self, since: float | None = None) -> list[RequestLogEntry]:
        """The kept entries, oldest first (only those at or after ``since`` if given)."""
        with self._lock:
            entries = list(self._log)
        if since is None:
            return entries
        return [e for e in entries if e.at >= since]

    def per_minute(self, since: float | None = None, *, private: bool = False) -> float:
        """Average rate of (public) requests per minute from ``since`` until now.

        Args:
            since: Start of the window (Unix time); default: the first kept entry.
            private: Count the emulator's private endpoints instead of the public API.
        """
        now = self._clock()
        entries = [e for e in self.log(since) if e.private == private]
        if not entries:
            return 0.0
        start = since if since is not None else entries[0].at
        minutes = max(now - start, 1e-9) / 60.0
        return len(entries) / minutes


class RequestMetricsMixin:
    """The organisation's request figures, as `SimOrg` answers them (from its `RequestStats`)."""

    stats: RequestStats

    def request_counts(self, *, private: bool = False) -> dict[tuple[str, str], int]:
        """Requests per ``(method, route template)``; public API only unless ``private``."""
        return self.stats.counts(private=private)

    def requests_per_minute(self, since: float | None = None, *, private: bool = False) -> float:
        """Average public requests per minute since ``since`` (see `RequestStats.per_minute`)."""
        return self.stats.per_minute(since, private=private)

    def request_log(self, since: float | None = None) -> list[RequestLogEntry]:
        """Every request kept in memory, oldest first."""
        return self.stats.log(since)
