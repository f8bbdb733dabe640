"""How a console or the CLI talks to a supervisor, wherever it runs.

`SupervisorHandle` is implemented by `InProcessHandle` (the supervisor runs in
this process's event loop) and by `control.SocketHandle` (a ``gpuci-tui run``
daemon reached over its Unix control socket). Both speak only the dataclasses
of `models`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Protocol

from gpuci_tui.core.command_types import Command, CommandResult
from gpuci_tui.core.engine.preview import CommandPreview
from gpuci_tui.core.models import SupervisorEvent, SupervisorSnapshot

if TYPE_CHECKING:
    from gpuci_tui.core.host.gpus.gates import GpuGatekeeper
    from gpuci_tui.core.host.reporter import Reporter

Update = SupervisorSnapshot | SupervisorEvent


class Supervised(Protocol):
    """What serves a console: a `Supervisor`, or a `GroupSupervisor` over several groups."""

    instance: str

    @property
    def gatekeeper(self) -> GpuGatekeeper | None:
        """The host's `GpuGatekeeper` (GPU admission and health), or None."""
        ...

    @property
    def reporter(self) -> Reporter:
        """Where its events go (a `Broadcaster`)."""
        ...

    @property
    def events(self) -> Iterable[SupervisorEvent]:
        """The recent events."""
        ...

    def snapshot(self) -> SupervisorSnapshot:
        """The current state."""
        ...

    async def execute(self, command: Command) -> CommandResult:
        """Carry out a command."""
        ...

    def preview(self, command: Command) -> CommandPreview:
        """What a command would do."""
        ...

    def subscribe(self) -> asyncio.Queue[Update]:
        """Events and snapshots as they happen."""
        ...

    def unsubscribe(self, queue: asyncio.Queue[Update]) -> None:
        """Stop feeding ``queue``."""
        ...

    def request_stop(self, drain: bool = False) -> None:
        """Stop (agents stay running unless ``drain``)."""
        ...

    async def run(self) -> None:
        """Supervise until stopped."""
        ...


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

    async def preview(self, command: Command) -> CommandPreview:
        """What ``command`` would do now, slot by slot (the supervisor's own rules)."""
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

    def __init__(self, supervisor: Supervised) -> None:
        """Wrap ``supervisor`` (its `run` is driven by whoever created it)."""
        self._supervisor = supervisor
        self._queues: list[asyncio.Queue[Update]] = []

    async def snapshot(self) -> SupervisorSnapshot:
        """The supervisor's current state."""
        return self._supervisor.snapshot()

    async def send(self, command: Command) -> CommandResult:
        """Execute ``command`` on the supervisor."""
        return await self._supervisor.execute(command)

    async def preview(self, command: Command) -> CommandPreview:
        """What ``command`` would do now."""
        return self._supervisor.preview(command)

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
