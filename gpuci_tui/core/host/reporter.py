"""How the supervisor tells the world: events as they happen, snapshots after changes.

`Reporter` is what the engine needs (an event sink and a "something changed"
signal). `Broadcaster` is the implementation used everywhere: it keeps the
recent events, logs them, and feeds subscriber queues (the console, the
control socket) with each event and a coalesced snapshot after changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Callable
from typing import Protocol

from gpuci_tui.core.engine.steps import Note
from gpuci_tui.core.models import SupervisorEvent, SupervisorSnapshot

log = logging.getLogger("gpuci_tui.supervisor")

Update = SupervisorSnapshot | SupervisorEvent


class Reporter(Protocol):
    """Where a supervisor reports to (and where its subscribers listen)."""

    @property
    def events(self) -> deque[SupervisorEvent]:
        """The recent events, oldest first."""
        ...

    def bind(self, snapshot: Callable[[], SupervisorSnapshot]) -> None:
        """Where snapshots come from."""
        ...

    def event(
        self,
        kind: str,
        message: str,
        slot: int | None = None,
        *,
        agent: str = "",
        seconds: float | None = None,
    ) -> None:
        """Record and publish an event (``agent``: the agent it is about, if one;
        ``seconds``: a duration it measures, for the metrics).
        """
        ...

    def changed(self) -> None:
        """The state changed: a new snapshot is due."""
        ...

    def publish_now(self) -> None:
        """Send the current snapshot to every subscriber."""
        ...

    def subscribe(self) -> asyncio.Queue[Update]:
        """A queue that receives every event and a snapshot after every change."""
        ...

    def unsubscribe(self, queue: asyncio.Queue[Update]) -> None:
        """Stop feeding ``queue``."""
        ...


def report_note(reporter: Reporter, note: Note) -> None:
    """Report an engine note as an event, with the duration it measures (if any)."""
    reporter.event(note.kind, note.message, note.slot, agent=note.agent, seconds=note.seconds)


class Broadcaster:
    """Keeps recent events and feeds subscribers; snapshots are coalesced per loop turn."""

    def __init__(self, clock: Callable[[], float], *, keep: int = 200) -> None:
        """Create it; `bind` gives it the snapshot source before use."""
        self.clock = clock
        self.events: deque[SupervisorEvent] = deque(maxlen=keep)
        self._numbers = itertools.count(1)
        """Every event's `SupervisorEvent.seq`: a console keeps each event once by it."""
        self._snapshot: Callable[[], SupervisorSnapshot] | None = None
        self._subscribers: set[asyncio.Queue[Update]] = set()
        self._scheduled = False

    def bind(self, snapshot: Callable[[], SupervisorSnapshot]) -> None:
        """Where snapshots come from."""
        self._snapshot = snapshot

    def subscribe(self) -> asyncio.Queue[Update]:
        """A queue that receives every event and a snapshot after every change."""
        queue: asyncio.Queue[Update] = asyncio.Queue(maxsize=1000)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Update]) -> None:
        """Stop feeding ``queue``."""
        self._subscribers.discard(queue)

    def event(
        self,
        kind: str,
        message: str,
        slot: int | None = None,
        group: str = "",
        *,
        agent: str = "",
        seconds: float | None = None,
    ) -> None:
        """Record, log and broadcast an event (``agent``: the agent it is about)."""
        item = SupervisorEvent(
            at=self.clock(),
            kind=kind,
            message=message,
            slot=slot,
            group=group,
            agent=agent,
            seconds=seconds,
            seq=next(self._numbers),
        )
        self.events.append(item)
        log.info("%s", message)
        self._broadcast(item)

    def changed(self) -> None:
        """Publish a snapshot soon (one per loop turn, however many changes)."""
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not running (tests calling transitions directly)
        self._scheduled = True
        loop.call_soon(self.publish_now)

    def publish_now(self) -> None:
        """Send the current snapshot to every subscriber."""
        self._scheduled = False
        if not self._subscribers or self._snapshot is None:
            return
        self._broadcast(self._snapshot())

    def _broadcast(self, item: Update) -> None:
        for queue in list(self._subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(item)


class GroupTap:
    """A group supervisor's `Reporter`: its events, tagged with the group, go to the parent's
    `Broadcaster`; its changes make the parent publish (the parent's snapshot covers all).
    """

    def __init__(self, parent: Broadcaster, group: str) -> None:
        """Report into ``parent`` as ``group``."""
        self.parent = parent
        self.group = group

    @property
    def events(self) -> deque[SupervisorEvent]:
        """The parent's recent events."""
        return self.parent.events

    def bind(self, snapshot: Callable[[], SupervisorSnapshot]) -> None:
        """Ignored: the parent publishes its own merged snapshot."""

    def event(
        self,
        kind: str,
        message: str,
        slot: int | None = None,
        *,
        agent: str = "",
        seconds: float | None = None,
    ) -> None:
        """Report an event of this group."""
        self.parent.event(kind, message, slot, self.group, agent=agent, seconds=seconds)

    def changed(self) -> None:
        """The group changed: the parent publishes."""
        self.parent.changed()

    def publish_now(self) -> None:
        """Publish the parent's snapshot now."""
        self.parent.publish_now()

    def subscribe(self) -> asyncio.Queue[Update]:
        """The parent's stream."""
        return self.parent.subscribe()

    def unsubscribe(self, queue: asyncio.Queue[Update]) -> None:
        """Leave the parent's stream."""
        self.parent.unsubscribe(queue)
