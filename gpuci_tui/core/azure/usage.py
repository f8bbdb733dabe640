"""What the daemon's calls cost the organisation: each attempt, by route, and the last minute.

Every HTTP attempt of the transport is one `HttpAttempt`: its route (a small fixed
set of names, never ids, so metrics stay bounded), its status (None: no answer)
and the bytes of its answer. `RequestLedger` keeps the last minute of them and
the client's `budget.RequestBudget` (``[azure] max_requests_per_minute``) under one
lock, and says it all as an `AzureUsage` for the snapshot: the rate, the bytes,
the cap and what it held back, and what the service said of the identity's budget.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from gpuci_tui.core.azure.budget import WINDOW, Admission, Priority, RequestBudget
from gpuci_tui.core.azure.parse import RateLimitState
from gpuci_tui.core.errors import AzureHeldBackError
from gpuci_tui.core.host_readings import AzureUsage

LOG = logging.getLogger("gpuci_tui.azure")

#: (pattern of the path below the organisation, route name): first match wins.
_ROUTES = tuple(
    (re.compile(pattern, re.IGNORECASE), name)
    for pattern, name in (
        (r"_apis/distributedtask/pools/\d+/agents/\d+", "agent"),
        (r"_apis/distributedtask/pools/\d+/agents", "agents"),
        (r"_apis/distributedtask/pools/\d+/jobrequests/\d+", "jobrequest"),
        (r"_apis/distributedtask/pools/\d+/jobrequests", "jobrequests"),
        (r"_apis/distributedtask/pools/\d+", "pool"),
        (r"_apis/distributedtask/pools", "pools"),
        (r"_apis/distributedtask/packages/.*", "packages"),
        (r"_apis/connectiondata", "connectionData"),
    )
)
ROUTES = (*(name for _, name in _ROUTES), "other")
"""Every route name `route_of` gives (the ``route`` label of the request metrics)."""


def route_of(path: str) -> str:
    """The route name of a request path (``_apis/distributedtask/pools/42/agents`` -> ``agents``)."""
    bare = path.split("?", 1)[0].strip("/")
    return next((name for pattern, name in _ROUTES if pattern.fullmatch(bare)), "other")


@dataclass(frozen=True)
class HttpAttempt:
    """One HTTP attempt to the organisation, as metrics count it."""

    method: str
    route: str
    """A `ROUTES` name."""
    status: int | None
    """The HTTP status; None: no answer (refused, timed out, reset)."""
    response_bytes: int = 0

    @property
    def code(self) -> str:
        """The ``code`` label: the status, or ``unreachable``."""
        return "unreachable" if self.status is None else str(self.status)


class RequestLedger:
    """The last minute of attempts and the request cap; thread-safe."""

    def __init__(self, cap: int | None = None) -> None:
        self._lock = threading.Lock()
        self._budget = RequestBudget(cap)
        self._received: deque[tuple[float, int]] = deque()

    @property
    def cap(self) -> int | None:
        """``[azure] max_requests_per_minute`` (None: no cap)."""
        return self._budget.cap

    def set_cap(self, cap: int | None) -> None:
        """Change the cap (a reload); the minute counted so far still counts."""
        with self._lock:
            self._budget.cap = cap

    def admit(self, now: float, priority: Priority) -> Admission:
        """Whether an attempt of ``priority`` may go now (counted when it does)."""
        with self._lock:
            return self._budget.admit(now, priority)

    def clear_to_send(
        self,
        priority: Priority,
        what: str,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        """Return once an attempt of ``priority`` may go (counted); a periodic read is skipped.

        Other calls wait (in the caller's thread): the cap frees a place within a minute.

        Raises:
            AzureHeldBackError: A periodic read the cap holds back (it comes again by itself).
        """
        while True:
            admission = self.admit(clock(), priority)
            if admission.go:
                return
            if priority is Priority.PERIODIC:
                raise AzureHeldBackError(
                    f"{what} held back: [azure] max_requests_per_minute = {self.cap} is "
                    f"reached; read again in {admission.wait:.0f} s",
                    retry_after=admission.wait,
                )
            LOG.info(
                "%s waits %.1f s: [azure] max_requests_per_minute = %s is reached",
                what,
                admission.wait,
                self.cap,
            )
            sleep(admission.wait)

    def received(self, now: float, response_bytes: int) -> None:
        """An answer of ``response_bytes`` bytes came."""
        with self._lock:
            self._received.append((now, response_bytes))
            self._forget(now)

    def usage(self, now: float, rate: RateLimitState) -> AzureUsage:
        """The last minute as the snapshot shows it, with the service's word on the budget."""
        with self._lock:
            self._forget(now)
            received = sum(size for _, size in self._received)
            sent = self._budget.sent_last_minute(now)
            held = self._budget.held_last_minute(now)
        return AzureUsage(
            requests_last_minute=sent,
            bytes_last_minute=received,
            cap_per_minute=self._budget.cap,
            held_last_minute=held,
            rate_limit_remaining=rate.remaining,
            rate_limit_limit=rate.limit,
            rate_limit_reset_at=rate.reset_at,
            retry_after_until=rate.throttled_until
            if rate.throttled_until is not None and rate.throttled_until > now
            else None,
            read_at=now,
        )

    def _forget(self, now: float) -> None:
        while self._received and self._received[0][0] <= now - WINDOW:
            self._received.popleft()
