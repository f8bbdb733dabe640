"""Events of several daemons, or of one over reconnects, merged: each once, in time order.

A daemon sends its recent events again to every new subscription (`control`'s
``subscribe``). A console that reconnects would show them twice, and one that
follows many hosts would show each host's backlog as one block, the newest
line no longer at the bottom. `MergedEvents` keeps every event once, by its
source and `SupervisorEvent.identity`, ordered by time (then by source and by
the daemon's own numbering), and only the newest `keep`: an event older than
all of those, once the log is full, is not taken back in.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Generic, TypeVar

from gpuci_tui.core.models import SupervisorEvent

T = TypeVar("T")


@dataclass(frozen=True)
class Placed(Generic[T]):
    """One event in the merge: where it came from, and what its reader keeps with it."""

    source: int
    """The host (its index) the event came from; 0 for a single daemon."""
    event: SupervisorEvent
    extra: T


class MergedEvents(Generic[T]):
    """The newest ``keep`` events of every source, each once, oldest first."""

    def __init__(self, keep: int) -> None:
        """Keep at most ``keep`` events (the oldest go first)."""
        self.keep = keep
        self.entries: list[Placed[T]] = []
        self._order: list[tuple[float, int, int]] = []
        """The sort key of each entry, in the same order (for bisection)."""
        self._seen: set[tuple[int, tuple[object, ...]]] = set()

    def add(self, source: int, event: SupervisorEvent, extra: T) -> int | None:
        """Place ``event`` of ``source`` by its time; return its position in `entries`.

        None when it is there already (a reconnect's replay), or when the log is full
        and the event is older than every event kept.
        """
        identity = (source, event.identity)
        if identity in self._seen:
            return None
        key = (event.at, source, event.seq)
        position = bisect_right(self._order, key)
        if position == 0 and len(self.entries) >= self.keep:
            return None
        self.entries.insert(position, Placed(source, event, extra))
        self._order.insert(position, key)
        self._seen.add(identity)
        while len(self.entries) > self.keep:
            dropped = self.entries.pop(0)
            self._order.pop(0)
            self._seen.discard((dropped.source, dropped.event.identity))
            position -= 1
        return position

    def __len__(self) -> int:
        """How many events are kept."""
        return len(self.entries)
