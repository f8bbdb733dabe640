"""A host that goes down reads its cause from the first frame, never "ssh failed (exit 255)".

A stream that breaks says nothing of why (ssh exits 255 without a word, the
daemon's side just closes): the link reconnects at once and reads
"reconnecting…" until an attempt fails with its cause. On a fake clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from gpuci_tui.core.fleet.link import STEADY, UNSURE_FOR, HostLink, HostStatus, LinkState
from gpuci_tui.core.fleet.rows import host_row
from gpuci_tui.core.fleet.ssh_command import DAEMON_CLOSED, SSH_ENDED, explain_exit
from gpuci_tui.core.host.control.client import ControlError
from gpuci_tui.core.host.control.reconnect import Backoff
from gpuci_tui.core.host.handle import Update
from tests.core.supervisor_env import wait_until
from tests.fleet.fakes import healthy_snapshot, member
from tests.fleet.test_reconnect_now import FakeClock
from tests.ui.scenarios import NOW

REFUSED = "ssh: connect to host gpu3 port 22: Connection refused"


class ScriptedHandle:
    """Each attempt does what the script says next: ``"up"`` (a snapshot, then the stream
    breaks with ``breaks``) or an error's words (the attempt fails with them)."""

    mode = "daemon"

    def __init__(self, clock: FakeClock, script: list[str], breaks: str = SSH_ENDED) -> None:
        self.clock = clock
        self.script = script
        self.breaks = breaks
        self.attempts = 0
        self.hold = asyncio.Event()
        """Set to end an "up" stream."""

    def updates(self) -> AsyncIterator[Update]:
        return self._attempt()

    async def _attempt(self) -> AsyncIterator[Update]:
        self.attempts += 1
        step = self.script.pop(0) if self.script else REFUSED
        if step != "up":
            raise ControlError(step)
        yield healthy_snapshot()
        await self.hold.wait()
        self.hold.clear()
        raise ControlError(self.breaks)


def run_link(handle: ScriptedHandle, clock: FakeClock) -> tuple[HostLink, list[HostStatus]]:
    seen: list[HostStatus] = []
    link = HostLink(
        member("gpu3", "ci@gpu3", handle),
        seen.append,
        clock=clock,
        backoff=Backoff(base=1.0, cap=30.0, jitter=0.0),
        sleep=clock.sleep,
        monotonic=clock,
    )
    return link, seen


def reasons(seen: list[HostStatus]) -> list[str]:
    """What the host's row said, frame by frame from the first (repeats once)."""
    said: list[str] = []
    for status in [HostStatus(), *seen]:
        words = "; ".join(host_row("gpu3", "ci@gpu3", status).problems) or "up"
        if not said or said[-1] != words:
            said.append(words)
    return said


async def test_a_lost_ssh_session_reads_reconnecting_then_its_cause() -> None:
    clock = FakeClock()
    handle = ScriptedHandle(clock, ["up", SSH_ENDED, REFUSED])
    link, seen = run_link(handle, clock)
    task = asyncio.ensure_future(link.run())
    try:
        await wait_until(lambda: link.status.state is LinkState.UP, timeout=30, what="up")
        clock.advance(STEADY + 60)
        handle.hold.set()  # the host's SSH server dies with its sessions
        # The first attempt goes through the dying connection master: no word either.
        await wait_until(lambda: handle.attempts == 2 and bool(clock.sleeping), 30, "retry")
        assert link.status.state is LinkState.CONNECTING and link.status.problem == ""
        clock.advance(0.5)
        await wait_until(lambda: link.status.state is LinkState.DOWN, 30, "down")
        assert reasons(seen) == ["connecting…", "up", "reconnecting…", f"unreachable: {REFUSED}"]
        assert link.status.since == NOW + STEADY + 60, "down since the session was lost"
        assert link.status.failures == 1 and link.status.retry_at == clock.now + 1.0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_daemon_that_stops_reads_no_daemon_at_once() -> None:
    clock = FakeClock()
    no_daemon = "no gpuci-tui daemon is running on this host (no socket at /run/x.sock)"
    handle = ScriptedHandle(clock, ["up", no_daemon], breaks=DAEMON_CLOSED)
    link, seen = run_link(handle, clock)
    task = asyncio.ensure_future(link.run())
    try:
        await wait_until(lambda: link.status.state is LinkState.UP, timeout=30, what="up")
        clock.advance(STEADY)
        handle.hold.set()
        await wait_until(lambda: link.status.state is LinkState.DOWN, 30, "down")
        assert reasons(seen) == ["connecting…", "up", "reconnecting…", no_daemon]
        assert clock.now == NOW + STEADY, "tried again at once: no wait before the cause"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_attempts_that_never_say_why_are_down_after_a_while_in_honest_words() -> None:
    clock = FakeClock()
    handle = ScriptedHandle(clock, [SSH_ENDED] * 100)
    link, seen = run_link(handle, clock)
    task = asyncio.ensure_future(link.run())
    try:
        tried = 0
        while True:
            # The next attempt failed and its wait began (the last one's sleeper is gone).
            await wait_until(
                lambda n=tried: handle.attempts > n and bool(clock.sleeping), 30, "the next wait"
            )
            tried = handle.attempts
            if link.status.state is LinkState.DOWN:
                break
            clock.advance(0.5)
        assert reasons(seen) == ["connecting…", f"unreachable: {SSH_ENDED}"]
        assert clock.now - NOW >= UNSURE_FOR and handle.attempts == 11
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_host_that_drops_each_connection_at_once_is_not_retried_in_a_tight_loop() -> None:
    clock = FakeClock()
    handle = ScriptedHandle(clock, ["up", "up", REFUSED], breaks=DAEMON_CLOSED)
    link, seen = run_link(handle, clock)
    task = asyncio.ensure_future(link.run())
    try:
        await wait_until(lambda: link.status.state is LinkState.UP, timeout=30, what="up")
        handle.hold.set()  # dropped within STEADY of coming up
        await wait_until(lambda: bool(clock.sleeping), 30, "a wait, not an attempt at once")
        assert clock.sleeping[0][0] == NOW + 1.0 and handle.attempts == 1
        assert link.status.state is LinkState.CONNECTING, "still no cause to show"
        clock.advance(1.0)
        await wait_until(lambda: link.status.state is LinkState.UP, 30, "up again")
        handle.hold.set()  # and again: the wait grows like the backoff
        await wait_until(lambda: handle.attempts == 2 and bool(clock.sleeping), 30, "waiting")
        assert clock.sleeping[0][0] == clock.now + 2.0
        clock.advance(2.0)
        await wait_until(lambda: link.status.state is LinkState.DOWN, 30, "its cause")
        assert reasons(seen)[-1] == f"unreachable: {REFUSED}"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_ssh_never_reads_failed_with_only_its_exit_code() -> None:
    for stderr in ("", "Shared connection to gpu3 closed.\n", "mux_client_read_packet: EOF\n"):
        assert explain_exit(255, stderr, "gpuci-tui") == SSH_ENDED
    assert "ssh failed" not in SSH_ENDED
