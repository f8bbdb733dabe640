"""Following each host of a fleet: one `HostLink` per host, reconnected with jittered backoff.

A link follows its handle's update stream and keeps the host's last snapshot
and whether it is reachable. When an attempt fails (ssh cannot connect, no
daemon runs, the host stops answering) the link says why at once and tries
again after 1 s, 2 s, 4 s … up to 30 s, each delay jittered so that a console
watching many hosts does not reconnect to all of them in the same instant;
`HostLink.retry_now` (the console's "reconnect now") cuts that wait short.
Links are independent: a dead host never holds up the others.

A stream that breaks rarely says why: ssh exits 255 without a word when its
session is lost, the daemon's side simply closes. Such words are no reason to
show (`WITHOUT_CAUSE`): the link reconnects at once and reads "connecting…"
until an attempt fails with its cause ("Connection refused", "no gpuci-tui
daemon is running") or works, for `UNSURE_FOR` seconds at most.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from gpuci_tui.core.config.fleet_host import FleetHost
from gpuci_tui.core.fleet import ssh_command
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo
from gpuci_tui.core.host.control.reconnect import Backoff, Reconnector, RetryNow
from gpuci_tui.core.host.handle import SupervisorHandle
from gpuci_tui.core.models import SupervisorEvent, SupervisorSnapshot

STREAM_ENDED = "the update stream ended"
WITHOUT_CAUSE = (*ssh_command.WITHOUT_CAUSE, STREAM_ENDED)
"""What a link that ended may say when nothing says why: never shown as a host's reason
while the next attempts may still tell it."""
UNSURE_FOR = 5.0
"""Seconds a link reads "connecting…" while its attempts end without a cause."""
UNSURE_RETRY = 0.5
"""Seconds between two such attempts (the first after a lost stream starts at once)."""
STEADY = 1.0
"""Seconds a link must have been up for its loss to be retried at once: a host whose
daemon takes each connection and drops it again is retried with the backoff's delays."""


class LinkState(StrEnum):
    """Whether the console reaches a host's daemon."""

    CONNECTING = "connecting"
    """Not reached yet, or reconnecting after a lost stream, the cause not known yet."""
    UP = "up"
    """The update stream runs."""
    DOWN = "down"
    """The last attempt failed or the stream broke; retrying with backoff."""


@dataclass(frozen=True)
class HostStatus:
    """What the console knows about one host right now."""

    state: LinkState = LinkState.CONNECTING
    problem: str = ""
    """Why the host is down (ssh's, the bridge's or the daemon's words)."""
    since: float | None = None
    """When the host went up or down."""
    retry_at: float | None = None
    """When the next attempt starts (None: one is under way, or the host is up)."""
    failures: int = 0
    """Consecutive failed attempts."""
    snapshot: SupervisorSnapshot | None = None
    """The last snapshot received (kept while down, then stale)."""
    updated_at: float | None = None
    """When that snapshot arrived."""


@dataclass(frozen=True)
class FleetMember:
    """One host of the console's fleet and the handle on its daemon."""

    label: str
    host: FleetHost
    handle: SupervisorHandle


@dataclass
class Fleet:
    """What the fleet console is given: its hosts, key bindings and reconnection delays."""

    members: tuple[FleetMember, ...]
    keys: Mapping[str, str] = field(default_factory=dict)
    """``[keys]`` of the configuration (binding id → keys)."""
    backoff: Backoff = field(default_factory=Backoff)


class HostLink:
    """Follows one host's daemon; reports every change of its `HostStatus`."""

    def __init__(
        self,
        member: FleetMember,
        on_change: Callable[[HostStatus], None],
        *,
        clock: Callable[[], float],
        backoff: Backoff | None = None,
        on_event: Callable[[SupervisorEvent], None] | None = None,
        rand: Callable[[], float] = random.random,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """Prepare to follow ``member`` (see `run`).

        Args:
            member: The host and its handle.
            on_change: Called with the new status after every change (in the loop).
            clock: Wall clock (Unix seconds) for ``since`` and ``retry_at``.
            backoff: Reconnection delays (default: 1 s doubling to 30 s, ±20 %).
            on_event: Called with each supervisor event of the host.
            rand: Random numbers in [0, 1) for the jitter.
            sleep: How to wait (tests may replace it).
            monotonic: The clock that measures how long the link was up, or unsure
                (``clock`` is the wall clock shown, which may step).
        """
        self.member = member
        self.status = HostStatus()
        self._on_change = on_change
        self._on_event = on_event
        self._clock = clock
        self._backoff = backoff or Backoff()
        self._rand = rand
        self._reconnect = Reconnector(sleep)
        self._monotonic = monotonic

    def _set(self, **changes: object) -> None:
        self.status = replace(self.status, **changes)  # type: ignore[arg-type]
        self._on_change(self.status)

    async def run(self) -> None:
        """Follow the host until cancelled, reconnecting after every failure."""
        unsure_since: float | None = self._monotonic()  # no cause known since then
        flaps = 0  # links in a row that were lost within STEADY of coming up
        while True:
            problem, up_at = await self._follow()
            now, moment = self._clock(), self._monotonic()
            if up_at is not None:
                steady = moment - up_at >= STEADY
                flaps = 0 if steady else flaps + 1
                if steady or unsure_since is None:
                    unsure_since = moment
            if (
                unsure_since is not None
                and moment - unsure_since < UNSURE_FOR
                and problem.startswith(WITHOUT_CAUSE)
            ):
                self._reconnect.lost()
                since = now if up_at is not None else self.status.since
                self._set(state=LinkState.CONNECTING, problem="", since=since, retry_at=None)
                if up_at is None:
                    await self._reconnect.wait(UNSURE_RETRY)
                elif flaps:  # it drops every connection at once: not in a tight loop
                    await self._reconnect.wait(self._backoff.delay(flaps, self._rand))
                continue
            unsure_since = None
            failures = self.status.failures + 1
            delay = self._backoff.delay(failures, self._rand)
            earlier = self.status.state is not LinkState.UP and self.status.since is not None
            since = self.status.since if earlier else now
            self._set(
                state=LinkState.DOWN,
                problem=problem,
                since=since,
                retry_at=now + delay,
                failures=failures,
            )
            await self._reconnect.wait(delay)
            self._set(retry_at=None)

    def retry_now(self) -> RetryNow:
        """Reconnect now: end the backoff wait if the host is down (a link that is up is kept).

        The next attempt starts at once; if it fails too, the backoff goes on
        from where it was (the failures are still counted).
        """
        return self._reconnect.retry_now()

    async def _follow(self) -> tuple[str, float | None]:
        """Follow one update stream; return why it ended, and when it came up.

        The time is the `monotonic` clock's; None: it never came up.
        """
        up_at: float | None = None
        try:
            async for update in self.member.handle.updates():
                if isinstance(update, SupervisorSnapshot):
                    self._reconnect.up()
                    if up_at is None:
                        up_at = self._monotonic()
                    now = self._clock()
                    if self.status.state is LinkState.UP:
                        self._set(snapshot=update, updated_at=now)
                    else:
                        self._set(
                            state=LinkState.UP,
                            problem="",
                            since=now,
                            retry_at=None,
                            failures=0,
                            snapshot=update,
                            updated_at=now,
                        )
                elif self._on_event is not None:
                    self._on_event(update)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of one host is that host's state
            return str(exc) or type(exc).__name__, up_at
        return STREAM_ENDED, up_at


class RemoteGpus:
    """A `GpuSampler` for a host seen through the fleet: its GPUs are not sampled from here."""

    def __init__(self, label: str, clock: Callable[[], float]) -> None:
        """Explain, for host ``label``, why no GPU cards are shown."""
        self._info = GpuHostInfo(
            available=False,
            reason=f"GPU cards are sampled on {label} itself, not over ssh "
            f"(open the console there to see them)",
        )
        self._clock = clock

    def host_info(self) -> GpuHostInfo:
        """Never available from here."""
        return self._info

    def sample(self) -> GpuFrame:
        """An empty frame that says why."""
        return GpuFrame(taken_at=self._clock(), host=self._info)

    def close(self) -> None:
        """Nothing to release."""
