"""A fleet of fake hosts for the console tests: live ones, a dead one, one that drops and returns.

Live hosts are `tests.ui.fakes.FakeHandle` (state changes only when the test
pushes it); `DeadHandle` never connects, like ssh to a host that is down;
`SwitchHandle` can be made to drop and come back; `ReplayHandle` serves every
subscriber, each starting with the daemon's recent events, as a daemon does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from gpuci_tui.core.command_types import Command, CommandResult
from gpuci_tui.core.config.fleet_host import parse_target
from gpuci_tui.core.engine.preview import CommandPreview
from gpuci_tui.core.fleet.link import Fleet, FleetMember
from gpuci_tui.core.fleet.ssh_command import DAEMON_CLOSED
from gpuci_tui.core.host.control.client import ControlError
from gpuci_tui.core.host.control.reconnect import Backoff
from gpuci_tui.core.host.handle import Update
from gpuci_tui.core.models import (
    HealthSnapshot,
    HealthState,
    PoolSummary,
    SupervisorEvent,
    SupervisorSnapshot,
)
from gpuci_tui.core.store.history import JobQuery, JobRecord
from gpuci_tui.services import Services
from tests.ui.fakes import FakeHandle, make_services
from tests.ui.scenarios import NOW, busy_slot, idle_slot, loaded_snapshot

REFUSED = "ssh: connect to host gpu4 port 22: Connection refused"
NO_DAEMON = (
    "no gpuci-tui daemon is running on this host (no socket at /run/user/1000/gpuci-tui/x.sock); "
    "start one there with: gpuci-tui run"
)
"""What a new attempt says when the host's daemon is gone (the bridge's words)."""
#: Slow enough that a down host is retried only once during a test (stable text).
SLOW = Backoff(base=600.0, cap=600.0, jitter=0.0)
FAST = Backoff(base=0.05, cap=0.2, jitter=0.0)


class DeadHandle:
    """A host that cannot be reached: every call fails like ssh to a powered-off machine."""

    mode = "daemon"

    def __init__(self, problem: str = REFUSED) -> None:
        """Fail every call with ``problem``."""
        self.problem = problem
        self.attempts = 0
        self.sent: list[Command] = []

    async def snapshot(self) -> SupervisorSnapshot:
        """Never reached."""
        raise ControlError(self.problem)

    async def send(self, command: Command) -> CommandResult:
        """Never delivered."""
        self.sent.append(command)
        raise ControlError(self.problem)

    async def preview(self, command: Command) -> CommandPreview:
        """Never answered."""
        raise ControlError(self.problem)

    async def updates(self) -> AsyncIterator[Update]:
        """Fails at once, every time."""
        self.attempts += 1
        raise ControlError(self.problem)
        yield  # pragma: no cover - makes this an async generator

    async def close(self) -> None:
        """Nothing to close."""


class SwitchHandle(FakeHandle):
    """A `FakeHandle` that can drop (its stream ends, new ones find no daemon) and come back."""

    def __init__(self, snapshot: SupervisorSnapshot, **kwargs: Any) -> None:
        """Start reachable."""
        super().__init__(snapshot, mode="daemon", **kwargs)
        self.down = False
        self.streams = 0
        self.jobs: list[JobRecord] | None = None
        """The daemon's finished jobs (None: it has no history yet)."""
        self.queries: list[JobQuery] = []

    async def history(self, query: JobQuery) -> list[JobRecord] | None:
        """The jobs matching ``query``'s filters, newest first, as a daemon answers."""
        if self.down:
            raise ControlError(NO_DAEMON)
        self.queries.append(query)
        if self.jobs is None:
            return None
        rows = [job for job in self.jobs if not query.failed_only or job.failed]
        if query.pipeline is not None:
            rows = [job for job in rows if job.pipeline == query.pipeline]
        return rows[: query.limit]

    def drop(self) -> None:
        """The host goes away: the open stream ends, new attempts fail."""
        self.down = True
        self.end_stream()

    def restore(self) -> None:
        """The host is back."""
        self.down = False

    def updates(self) -> AsyncIterator[Update]:
        """The current snapshot first (as a daemon sends it), then what is pushed."""
        return self._follow()

    async def _follow(self) -> AsyncIterator[Update]:
        if self.down:
            raise ControlError(NO_DAEMON)
        self.streams += 1
        yield self.current
        async for update in self._stream():
            yield update
        if self.down:
            raise ControlError("the daemon closed the connection (it stopped or restarted)")


class ReplayHandle(SwitchHandle):
    """A daemon as the control socket serves one: each subscription starts with its recent
    events, numbered as the daemon numbers them, and every subscriber gets every update."""

    def __init__(self, snapshot: SupervisorSnapshot, backlog: list[SupervisorEvent]) -> None:
        super().__init__(snapshot)
        self.recent = list(backlog)
        self.subscribers: list[asyncio.Queue[Update | None]] = []

    def emit(self, at: float, message: str, kind: str = "job_assigned") -> SupervisorEvent:
        """A new event, as the daemon reports it (kept among its recent ones, numbered)."""
        event = SupervisorEvent(at=at, kind=kind, message=message, slot=0, seq=len(self.recent) + 1)
        self.recent.append(event)
        for queue in self.subscribers:
            queue.put_nowait(event)
        return event

    def drop(self) -> None:
        """Every stream ends (the ssh channels were killed); new attempts fail until `restore`."""
        self.down = True
        for queue in self.subscribers:
            queue.put_nowait(None)

    async def _follow(self) -> AsyncIterator[Update]:
        if self.down:
            raise ControlError(NO_DAEMON)
        self.streams += 1
        queue: asyncio.Queue[Update | None] = asyncio.Queue()
        self.subscribers.append(queue)
        try:
            for event in list(self.recent):
                yield event
            yield self.current
            while (update := await queue.get()) is not None:
                yield update
        finally:
            self.subscribers.remove(queue)
        raise ControlError(DAEMON_CLOSED)


def healthy_snapshot(**changes: Any) -> SupervisorSnapshot:
    """Four slots: two busy on GPUs 0 and 1, two idle, every standby ready."""
    slots = (
        busy_slot(0, "train - main", "20261122.4", minutes=12, gpus=("0",)),
        busy_slot(1, "eval", "20261122.5", minutes=3, gpus=("1",)),
        idle_slot(2, gpus=("2",)),
        idle_slot(3, gpus=("3",)),
    )
    slots = tuple(replace(s, name=f"gpu3-{s.slot}", standby="ready") for s in slots)
    base = loaded_snapshot(
        slots=slots,
        desired_count=4,
        mode="daemon",
        pid=4321,
        instance="contoso/gpu-a100/gpu3",
        pool_summary=PoolSummary(pool_id=12, name="gpu-a100", online=8, queued_jobs=3),
        standby=True,
    )
    return replace(base, **changes)


def auth_failed_snapshot() -> SupervisorSnapshot:
    """The loaded host with its PAT rejected."""
    return loaded_snapshot(
        mode="daemon",
        pid=1234,
        azure=HealthSnapshot(HealthState.AUTH_FAILED, "HTTP 401", checked_at=NOW - 5),
    )


def member(label: str, target: str, handle: Any) -> FleetMember:
    """A fleet member around ``handle``."""
    return FleetMember(label, parse_target(target, "test"), handle)


def fleet_services(
    members: list[FleetMember],
    *,
    readonly: bool = False,
    backoff: Backoff = SLOW,
    keys: dict[str, str] | None = None,
) -> Services:
    """Services of a fleet console over ``members``."""
    return make_services(
        config=None,
        readonly=readonly,
        fleet=Fleet(tuple(members), keys=keys or {}, backoff=backoff),
    )


def three_hosts(**services: Any) -> tuple[Services, dict[str, Any]]:
    """gpu2 (loaded, parked agent), gpu3 (healthy), gpu4 (unreachable)."""
    handles: dict[str, Any] = {
        "gpu2": FakeHandle(loaded_snapshot(mode="daemon", pid=1234), mode="daemon"),
        "gpu3": SwitchHandle(healthy_snapshot()),
        "gpu4": DeadHandle(),
    }
    for handle in handles.values():
        if isinstance(handle, FakeHandle) and not isinstance(handle, SwitchHandle):
            handle.push(handle.current)  # a daemon's stream starts with its snapshot
    members = [
        member("gpu2", "ci@gpu2", handles["gpu2"]),
        member("gpu3", "ci@gpu3:2222", handles["gpu3"]),
        member("gpu4", "ci@gpu4", handles["gpu4"]),
    ]
    return fleet_services(members, **services), handles


FQDN = ("gpu-node-a.example.com", "gpu-node-b.example.com", "gpu-node-c.example.com")
FQDN_REFUSED = "ssh: connect to host gpu-node-c.example.com port 22: Connection refused"


def fqdn_hosts(**services: Any) -> tuple[Services, dict[str, Any]]:
    """Three hosts whose names differ in one letter: a loaded, b healthy, c unreachable."""
    a, b, c = FQDN
    handles: dict[str, Any] = {
        a: FakeHandle(loaded_snapshot(mode="daemon", pid=1234), mode="daemon"),
        b: SwitchHandle(healthy_snapshot()),
        c: DeadHandle(FQDN_REFUSED),
    }
    handles[a].push(handles[a].current)  # a daemon's stream starts with its snapshot
    members = [member(name, name, handles[name]) for name in FQDN]
    return fleet_services(members, **services), handles
