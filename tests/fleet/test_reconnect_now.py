"""Reconnect now, on a fake clock: a backoff wait cut short, an attempt under way, a live link kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from gpuci_tui.core.fleet.link import HostLink, HostStatus, LinkState
from gpuci_tui.core.host.control.reconnect import Backoff, Reconnector, RetryNow
from gpuci_tui.core.host.handle import Update
from tests.core.supervisor_env import wait_until
from tests.fleet.fakes import SwitchHandle, healthy_snapshot, member
from tests.ui.scenarios import NOW


class FakeClock:
    """A clock that moves only when told; its ``sleep`` returns once the clock passes the end."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now
        self.sleeping: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self.now + seconds, wake)
        self.sleeping.append(entry)
        try:
            await wake
        finally:
            self.sleeping.remove(entry)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for end, wake in list(self.sleeping):
            if end <= self.now and not wake.done():
                wake.set_result(None)


async def test_a_cut_wait_returns_at_once_and_an_uncut_one_when_the_clock_says() -> None:
    clock = FakeClock()
    reconnector = Reconnector(clock.sleep)
    assert reconnector.retry_now() is RetryNow.UNDER_WAY, "not up, not waiting: trying"
    waiting = asyncio.ensure_future(reconnector.wait(30.0))
    await wait_until(
        lambda: reconnector.waiting and bool(clock.sleeping), timeout=30, what="the wait"
    )
    assert reconnector.retry_now() is RetryNow.RETRYING
    assert await asyncio.wait_for(waiting, 20) is True
    assert clock.now == NOW and not clock.sleeping, "no time passed, no sleeper left behind"
    waiting = asyncio.ensure_future(reconnector.wait(2.0))
    await wait_until(lambda: bool(clock.sleeping), timeout=30, what="the second wait")
    clock.advance(2.0)
    assert await asyncio.wait_for(waiting, 20) is False
    reconnector.up()
    assert reconnector.retry_now() is RetryNow.CONNECTED


class GatedHandle(SwitchHandle):
    """A `SwitchHandle` whose connection attempts hang until the test lets them through."""

    def __init__(self) -> None:
        super().__init__(healthy_snapshot())
        self.attempts = 0
        self.gate = asyncio.Event()

    def updates(self) -> AsyncIterator[Update]:
        return self._gated()

    async def _gated(self) -> AsyncIterator[Update]:
        self.attempts += 1
        await self.gate.wait()
        async for update in self._follow():
            yield update


async def test_reconnect_now_cuts_the_backoff_and_never_drops_a_live_link() -> None:
    clock = FakeClock()
    handle = GatedHandle()
    handle.down = True  # unreachable from the start (no stream to end)
    statuses: list[HostStatus] = []
    link = HostLink(member("gpu3", "ci@gpu3", handle), statuses.append, clock=clock,
                    backoff=Backoff(base=30.0, cap=30.0, jitter=0.0), sleep=clock.sleep)  # fmt: skip
    task = asyncio.ensure_future(link.run())
    try:
        await wait_until(lambda: handle.attempts == 1, timeout=30, what="the first attempt")
        assert link.retry_now() is RetryNow.UNDER_WAY, "an attempt runs: nothing more started"
        handle.gate.set()
        await wait_until(lambda: bool(clock.sleeping), timeout=30, what="the 30 s wait")
        down = link.status
        assert (down.state, down.retry_at, down.failures) == (LinkState.DOWN, NOW + 30, 1)

        handle.restore()
        assert link.retry_now() is RetryNow.RETRYING
        await wait_until(lambda: link.status.state is LinkState.UP, timeout=30, what="up again")
        assert clock.now == NOW, "at once: the fake clock never moved"
        assert handle.attempts == 2 and handle.streams == 1

        seen = len(statuses)
        assert link.retry_now() is RetryNow.CONNECTED
        assert link.status.state is LinkState.UP and handle.streams == 1, "the live link stays"
        assert len(statuses) == seen and handle.attempts == 2

        # Lost at once (the fake clock never moves): it waits like a failure, and says no
        # reason yet; a manual retry that fails goes on with the backoff and says why.
        handle.drop()
        await wait_until(lambda: bool(clock.sleeping), timeout=30, what="waiting again")
        assert link.status.state is LinkState.CONNECTING
        assert link.retry_now() is RetryNow.RETRYING
        await wait_until(
            lambda: link.status.state is LinkState.DOWN and bool(clock.sleeping),
            timeout=30,
            what="tried, failed",
        )
        assert link.status.retry_at == NOW + 30 and handle.attempts == 3
        assert link.status.failures == 1 and "no gpuci-tui daemon" in link.status.problem
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_link_cancelled_while_waiting_leaves_no_sleeper() -> None:
    clock = FakeClock()
    handle = SwitchHandle(healthy_snapshot())
    handle.drop()
    link = HostLink(member("gpu3", "ci@gpu3", handle), lambda s: None, clock=clock,
                    sleep=clock.sleep)  # fmt: skip
    task = asyncio.ensure_future(link.run())
    await wait_until(lambda: bool(clock.sleeping), timeout=30, what="the wait")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert not clock.sleeping
