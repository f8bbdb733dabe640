"""A fleet host's container output, for the log view: asked of its daemon through the bridge.

The log view (`screens.logs.LogScreen`) polls a runtime's blocking
``logs_tail`` from a worker thread. `RemoteLogs` is that runtime for a host
reached over ssh: each call runs the handle's ``logs_tail`` on the console's
event loop (where the ssh channel lives) and waits for it, boundedly. It can
only read: the daemon answers for its own agents' containers, redacts every
line and paces the answers (`core.host.control.log_serving`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from gpuci_tui.core.host.control.client import ControlError

TIMEOUT = 30.0
"""Seconds one poll may take, ssh and the daemon's pacing included."""


class RemoteLogs:
    """``logs_tail`` of a remote daemon, callable from a thread."""

    def __init__(
        self,
        logs_tail: Callable[[str, int], Awaitable[list[str]]],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """Ask ``logs_tail`` (a handle's coroutine) on ``loop``, the console's loop."""
        self._logs_tail = logs_tail
        self._loop = loop

    def logs_tail(self, container_id: str, lines: int = 20) -> list[str]:
        """The container's last ``lines`` (blocking: call it from a thread, never the loop).

        Raises:
            ControlError: the host or its daemon did not answer, or refused.
        """

        async def ask() -> list[str]:
            return await self._logs_tail(container_id, lines)

        future = asyncio.run_coroutine_threadsafe(ask(), self._loop)
        try:
            return future.result(TIMEOUT)
        except TimeoutError:
            future.cancel()
            raise ControlError(f"no log lines from the host within {TIMEOUT:.0f} s") from None
