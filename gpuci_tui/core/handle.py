"""How a console or the CLI talks to a supervisor, wherever it runs.

`SupervisorHandle` is implemented by `InProcessHandle` (the supervisor runs in
this process's event loop) and by `control.SocketHandle` (a ``gpuci-tui run``
daemon reached over its Unix control socket). Both speak only the dataclasses
of `models`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from .models import Command, CommandResult, SupervisorEvent, SupervisorSnapshot

if TYPE_CHECKING:
    from .supervisor import Supervisor

Update = SupervisorSnapshot | SupervisorEvent


class SupervisorHandle(Protocol):
    """A connection to a running supervisor."""

    @property
    def mode(self) -> str:
        """``in-process`` or ``daemon``."""
        ...

    async def snapshot(self) -> SupervisorSnapshot:
        """The current state."""
        ...

    async def send(self, command: Command) -> CommandResult:
        """Send one command and wait for its result."""
        ...

    def updates(self) -> AsyncIterator[Update]:
        """Snapshots (on every change, coalesced) and events, until closed."""
        ...

    async def close(self) -> None:
        """Disconnect (never stops a daemon)."""
        ...


class InProcessHandle:
    """A handle on a `Supervisor` running in this process's event loop."""

    mode = "in-process"

    def __init__(self, supervisor: Supervisor) -> None:
        """Wrap ``supervisor`` (its `run` is driven by whoever created it)."""
        self._supervisor = supervisor
        self._queues: list[asyncio.Queue[Update]] = []

    async def snapshot(self) -> SupervisorSnapshot:
        """The supervisor's current state."""
        return self._supervisor.snapshot()

    async def send(self, command: Command) -> CommandResult:
        """Execute ``command`` on the supervisor."""
        return await self._supervisor.execute(command)

    async def updates(self) -> AsyncIterator[Update]:
        """Snapshots and events as they happen (starting with the current snapshot)."""
        queue = self._supervisor.subscribe()
        self._queues.append(queue)
        try:
            yield self._supervisor.snapshot()
            while True:
                yield await queue.get()
        finally:
            self._supervisor.unsubscribe(queue)

    async def close(self) -> None:
        """Stop feeding updates (the supervisor keeps running)."""
        for queue in self._queues:
            self._supervisor.unsubscribe(queue)
        self._queues.clear()
