"""A daemon's own cap on its calls to the organisation: a sliding minute, shared by priority.

Azure DevOps meters an identity over a sliding five minutes, and every host that
signs in as that identity spends the same budget (azure-devops-api.md §3). ``[azure]
max_requests_per_minute`` keeps one daemon's share: `RequestBudget` counts the
attempts of the last 60 seconds and lets a call go while the count is under the
share its priority may use. Periodic reads (the pool observer's) give way first,
then other reads (a job's history, a prune's re-read), and the writes that take
jobs in (enabling, disabling a lane) last: each lower priority leaves a reserve
for the ones above it, so a busy minute delays the next poll, never a lane's
enable. Pure: the caller passes the time and keeps the lock.
"""

from __future__ import annotations

import enum
import math
from collections import deque
from dataclasses import dataclass

WINDOW = 60.0
"""Seconds the cap is counted over."""
RESERVE_SHARE = 0.1
"""Of the cap, what each priority leaves for the priorities above it (at least one call)."""


class Priority(enum.IntEnum):
    """Who gives way first when the cap is near: the lowest value."""

    PERIODIC = 0
    """A read that comes again on its own (the pool observer's cycle): skipped, read later."""
    READ = 1
    """A read someone waits for (a finished job's row, a prune, a command)."""
    INTAKE = 2
    """A write that takes jobs in or out (enable, disable): waits for nothing but the cap."""


@dataclass(frozen=True)
class Admission:
    """The answer to one call: go now (``wait`` 0), or how long until it may."""

    wait: float = 0.0

    @property
    def go(self) -> bool:
        """Whether the call may be sent now."""
        return self.wait <= 0.0


class RequestBudget:
    """The attempts of the last `WINDOW` seconds against a cap per minute (None: no cap)."""

    def __init__(self, cap: int | None = None) -> None:
        self.cap = cap
        self._sent: deque[float] = deque()
        self._held: deque[float] = deque()

    def share(self, priority: Priority) -> int | None:
        """How many calls of the minute ``priority`` may use (None: no cap)."""
        if self.cap is None:
            return None
        reserve = max(1, math.floor(self.cap * RESERVE_SHARE))
        return max(1, self.cap - reserve * (Priority.INTAKE - priority))

    def admit(self, now: float, priority: Priority) -> Admission:
        """Whether a call of ``priority`` may go at ``now``; a call that goes is counted."""
        self._forget(now)
        share = self.share(priority)
        if share is None or len(self._sent) < share:
            self._sent.append(now)
            return Admission()
        self._held.append(now)
        # The call may go once enough of the minute's calls have left the window.
        leaving = self._sent[len(self._sent) - share]
        return Admission(max(leaving + WINDOW - now, 1e-3))

    def sent_last_minute(self, now: float) -> int:
        """Calls counted in the last `WINDOW` seconds."""
        self._forget(now)
        return len(self._sent)

    def held_last_minute(self, now: float) -> int:
        """Calls the cap held back in the last `WINDOW` seconds (each try counts)."""
        self._forget(now)
        return len(self._held)

    def _forget(self, now: float) -> None:
        for times in (self._sent, self._held):
            while times and times[0] <= now - WINDOW:
                times.popleft()
