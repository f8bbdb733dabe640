"""How a console or the CLI talks to a supervisor, wherever it runs.

`SupervisorHandle` is implemented by `InProcessHandle` (the supervisor runs in
this process's event loop) and by `control.SocketHandle` (a ``gpuci-tui run``
daemon reached over its Unix control socket). Both speak only the dataclasses
of `models`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from .models import Command, CommandResult, SupervisorEvent, SupervisorSnapshot

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
