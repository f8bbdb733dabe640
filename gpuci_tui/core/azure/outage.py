"""Whether the organisation is known down, and what that does to a call's retries.

A 5xx or a dropped connection on a healthy organisation is most often a blip:
the transport retries it inside the call (0.5, 1, 2, 4 s, with jitter: up to
7.5 s). Once a call has failed that way (its retries spent, or unreachable), the
organisation is *known down* until any call gets an answer (any status below
500: a 429 or a 404 is the service answering). Meanwhile every call makes one
attempt: the daemon's next probe (the pool observer's read, once per poll
interval) is the retry, and a caller learns of the failure at once instead of
after the retries. The callers that wait on a call are the ones that matter:
a slot whose agent exited waits for its enable/disable before it may restart
the lane in place (`planning.refused`), so retries spent on an organisation
known down are intake lost.

A call already in its retries when another call finds the organisation down
ends them at its next pause: its backoff wait returns as the organisation is
marked down, and the retry it was waiting for is called off.

A 429's ``Retry-After`` is the service's own word on when to come back; its
short waits are kept whatever this says (`rate_limits`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


def may_retry(attempt: int, max_retries: int, down: bool) -> bool:
    """Whether a call whose attempt number ``attempt`` (0: the first) failed may try again.

    Args:
        attempt: The failed attempt (0-based).
        max_retries: The client's extra attempts after a 5xx or a dropped connection.
        down: The organisation is known down (`OutageWatch.down`).
    """
    return not down and attempt < max_retries


class OutageWatch:
    """The organisation's known-down flag, shared by every call of one client; thread-safe."""

    def __init__(self, sleep: Callable[[float], None] | None = None) -> None:
        """Create the watch (the organisation is not known down).

        Args:
            sleep: The backoff wait to use instead of one that the organisation
                going down cuts short (tests with a fake clock pass theirs).
        """
        self._down = threading.Event()
        self._sleep = sleep

    @property
    def down(self) -> bool:
        """A call failed with a 5xx or unreachable, and no call was answered since."""
        return self._down.is_set()

    def failed(self) -> None:
        """A call failed for good with a 5xx or unreachable: the organisation is down."""
        self._down.set()

    def answered(self) -> None:
        """The organisation answered a call (any status below 500): it is up."""
        self._down.clear()

    def back_off(self, delay: float) -> None:
        """Wait ``delay`` seconds before a retry, less if the organisation is found down meanwhile.

        The caller then asks `down` again: a retry waited for is called off.
        """
        if self._sleep is not None:
            self._sleep(delay)
        elif delay > 0:
            self._down.wait(delay)


__all__ = ["OutageWatch", "may_retry"]
