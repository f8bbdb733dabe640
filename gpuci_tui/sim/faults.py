"""Fault injection for the simulated organisation.

A test or the demo arms a fault for a duration, for a number of requests, or
until it is cleared. By default a fault hits the public ``_apis`` endpoints only
(what the supervisor talks to); ``private=True`` also hits the emulator's
``/_sim`` endpoints and the in-process agents of `SimulatedRuntime`.

Example:
    >>> fault = org.faults.rate_limit(retry_after=3, duration=10)
    >>> org.faults.clear(fault)
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

FaultKind = Literal["status", "rate_limit", "html", "delay", "unreachable"]


@dataclass
class Fault:
    """One armed fault (mutable only under the injector's lock)."""

    id: int
    kind: FaultKind
    status: int = 200
    retry_after: float = 0.0
    delay: float = 0.0
    token: str | None = None
    """Only requests authenticated with this PAT are hit (None: all)."""
    until: float | None = None
    remaining: int | None = None
    """Requests still to hit; None means unlimited."""
    private: bool = False
    hits: int = 0


@dataclass(frozen=True)
class FaultHit:
    """What the server must do to one request."""

    kind: FaultKind
    status: int = 200
    retry_after: float = 0.0
    delay: float = 0.0


class FaultInjector:
    """Thread-safe registry of armed faults.

    Args:
        clock: Time source (tests may pass a fake one).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)

    # ------------------------------------------------------------------ arming

    def _arm(
        self,
        kind: FaultKind,
        duration: float | None,
        count: int | None,
        *,
        status: int = 200,
        retry_after: float = 0.0,
        delay: float = 0.0,
        token: str | None = None,
        private: bool = False,
    ) -> Fault:
        fault = Fault(
            id=next(self._ids),
            kind=kind,
            status=status,
            retry_after=retry_after,
            delay=delay,
            token=token,
            until=None if duration is None else self._clock() + duration,
            remaining=count,
            private=private,
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def server_error(
        self,
        status: int = 500,
        *,
        duration: float | None = None,
        count: int | None = None,
        private: bool = False,
    ) -> Fault:
        """Answer with ``status`` (a 5xx) and a VSS-style JSON error."""
        return self._arm("status", duration, count, status=status, private=private)

    def rate_limit(
        self,
        retry_after: float = 5.0,
        *,
        duration: float | None = None,
        count: int | None = None,
        private: bool = False,
    ) -> Fault:
        """Answer 429 with ``Retry-After`` and a ``TF400733`` message."""
        return self._arm(
            "rate_limit", duration, count, status=429, retry_after=retry_after, private=private
        )

    def html_signin(
        self,
        token: str | None = None,
        *,
        duration: float | None = None,
        count: int | None = None,
        private: bool = False,
    ) -> Fault:
        """Answer 203 with an HTML sign-in page (for ``token`` only, or for every request)."""
        return self._arm("html", duration, count, status=203, token=token, private=private)

    def slow(
        self,
        delay: float,
        *,
        duration: float | None = None,
        count: int | None = None,
        private: bool = False,
        throttled: bool = False,
    ) -> Fault:
        """Delay responses by ``delay`` seconds.

        With ``throttled`` the delayed responses carry ``X-RateLimit-Delay``, as
        Azure DevOps does when it slows a user down before it starts answering 429.
        """
        return self._arm(
            "delay",
            duration,
            count,
            delay=delay,
            private=private,
            retry_after=-1.0 if throttled else 0.0,
        )

    def unreachable(self, *, duration: float | None = None, private: bool = True) -> Fault:
        """Stop accepting connections (connection refused) until cleared or expired.

        `SimServer` closes its listening socket and re-binds the same port on
        resume. The emulator's endpoints share the socket, so an HTTP server
        can only be unreachable as a whole; ``private=False`` only matters to
        the in-process agents of `SimulatedRuntime`.
        """
        return self._arm("unreachable", duration, None, private=private)

    def clear(self, fault: Fault | None = None) -> None:
        """Disarm one fault, or all of them."""
        with self._lock:
            if fault is None:
                self._faults.clear()
            else:
                self._faults = [f for f in self._faults if f.id != fault.id]

    # ------------------------------------------------------------------ matching

    def _live(self, now: float) -> list[Fault]:
        self._faults = [
            f
            for f in self._faults
            if (f.until is None or f.until > now) and (f.remaining is None or f.remaining > 0)
        ]
        return self._faults

    def active(self) -> list[Fault]:
        """The faults armed right now (copies are not made: read, do not modify)."""
        with self._lock:
            return list(self._live(self._clock()))

    def unreachable_now(self, *, private: bool = False) -> bool:
        """Whether an unreachable fault is armed (for the private side when ``private``)."""
        with self._lock:
            return any(
                f.kind == "unreachable" and (f.private or not private)
                for f in self._live(self._clock())
            )

    def match(self, *, private: bool, token: str | None) -> FaultHit | None:
        """The fault that hits one request, consuming one of its counted hits.

        Args:
            private: Whether the request is for an emulator endpoint.
            token: The PAT the request carried (None if none / a session key).
        """
        with self._lock:
            for f in self._live(self._clock()):
                if f.kind == "unreachable":
                    continue
                if private and not f.private:
                    continue
                if f.token is not None and f.token != token:
                    continue
                f.hits += 1
                if f.remaining is not None:
                    f.remaining -= 1
                return FaultHit(f.kind, f.status, f.retry_after, f.delay)
        return None
