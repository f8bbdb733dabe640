"""What Azure DevOps has said about its rate limits, and when not to send at all.

Azure DevOps limits each user's requests (`X-RateLimit-*` headers on every answer,
``Retry-After`` on a delayed or refused one, HTTP 429 when the budget is spent).
`RateLimits` keeps, thread-safe, the latest figures (shown to operators) and the
time until which the organisation refuses us: a short ``Retry-After`` is slept
through by the transport, a longer one blocks every request until it passes,
answered from memory, since sending anyway would only extend the block.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from gpuci_tui.core.azure.parse import RateLimitState, parse_retry_after
from gpuci_tui.core.errors import AzureRateLimitError

LOG = logging.getLogger("gpuci_tui.azure")

MAX_INLINE_WAIT = 5.0
"""Longest ``Retry-After`` the client sleeps through itself; longer ones are raised."""

DEFAULT_RATE_LIMIT_WAIT = 30.0
"""Assumed wait after a 429 that names no ``Retry-After`` and no reset time."""


class RateLimits:
    """The rate-limit figures of one organisation's answers, and its block; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rate = RateLimitState()
        self._blocked_until = 0.0

    @property
    def state(self) -> RateLimitState:
        """The latest rate-limit figures (a frozen copy)."""
        with self._lock:
            return self._rate

    def raise_if_blocked(self, now: float) -> None:
        """Refuse to send while a long ``Retry-After`` runs.

        Raises:
            AzureRateLimitError: The organisation still refuses us (with the time left).
        """
        with self._lock:
            blocked_until = self._blocked_until
        if now < blocked_until:
            wait = blocked_until - now
            # Sending anyway would only extend the block: answer from memory.
            raise AzureRateLimitError(
                f"Azure DevOps is rate-limiting this PAT's user; not sending requests for "
                f"another {wait:.0f} s. Polling less often avoids this.",
                retry_after=wait,
            )

    def note(self, headers: Mapping[str, str], now: float) -> None:
        """Fold the rate-limit headers of one answer in (every answer carries them)."""
        with self._lock:
            self._rate = state = self._rate.updated(headers, now)
        if state.delay_s is not None and state.throttled_until is not None:
            LOG.info(
                "Azure DevOps delayed a request by %.1f s (rate limit %s); slow down until %s",
                state.delay_s,
                state.resource or "unknown",
                time.strftime("%H:%M:%S", time.localtime(state.throttled_until)),
            )

    def too_many(
        self, headers: Mapping[str, str], now: float, *, may_retry: bool, what: str
    ) -> float:
        """A 429 answer to ``what`` (``METHOD /path``): the wait to sleep through, or raise.

        Args:
            headers: the answer's headers (``Retry-After``, ``X-RateLimit-*``).
            now: wall-clock time of the answer.
            may_retry: the request has attempts left.
            what: the request, for the log.

        Raises:
            AzureRateLimitError: The wait is too long to sleep through (or no attempt is
                left): every request is refused until it passes.
        """
        wait = parse_retry_after(headers, now)
        if wait is None:
            wait = DEFAULT_RATE_LIMIT_WAIT
        with self._lock:
            self._rate = self._rate.throttled_to(now + wait, now)
        if wait <= MAX_INLINE_WAIT and may_retry:
            LOG.warning("%s rate-limited; retrying in %.1f s", what, wait)
            return wait
        with self._lock:
            self._blocked_until = max(self._blocked_until, now + wait)
        resource = headers.get("X-RateLimit-Resource")
        limit = f" (limit: {resource})" if resource else ""
        raise AzureRateLimitError(
            f"Azure DevOps is rate-limiting this PAT's user{limit}; retry in {wait:.0f} s. "
            "Polling less often, or a PAT of a user that no other tool uses, avoids this.",
            retry_after=wait,
        )
