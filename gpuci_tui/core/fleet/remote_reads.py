"""A fleet host's logs and history, for views that read from a thread: asked of its daemon.

The log view (`screens.logs.LogScreen`) polls a runtime's blocking
``logs_tail``, and the history view (`screens.history.HistoryScreen`) reads a
`HistorySource`, both from worker threads. For a host reached over ssh, each
read runs the handle's coroutine on the console's event loop (where the ssh
channel lives) and waits for it, boundedly (`wait_on_loop`). They can only
read: the daemon answers for its own agents' containers and its own history,
redacts every line and paces the answers (`core.host.control.log_serving`,
`core.host.control.history_serving`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from gpuci_tui.core.host.control.client import ControlError
from gpuci_tui.core.store.history import JobQuery, JobRecord

TIMEOUT = 30.0
"""Seconds one read may take, ssh and the daemon's pacing included."""

T = TypeVar("T")


def wait_on_loop(loop: asyncio.AbstractEventLoop, ask: Callable[[], Awaitable[T]], what: str) -> T:
    """Run ``ask()`` on ``loop`` and wait for it from this thread, at most `TIMEOUT`.

    Raises:
        ControlError: no answer in time (``what`` names what was asked), or the
            host or its daemon did not answer, or refused.
    """

    async def run() -> T:
        return await ask()

    future = asyncio.run_coroutine_threadsafe(run(), loop)
    try:
        return future.result(TIMEOUT)
    except TimeoutError:
        future.cancel()
        raise ControlError(f"no {what} from the host within {TIMEOUT:.0f} s") from None


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
        return wait_on_loop(self._loop, lambda: self._logs_tail(container_id, lines), "log lines")


class RemoteHistory:
    """A `HistorySource` of a remote daemon: its ``history`` op, callable from a thread."""

    def __init__(
        self,
        label: str,
        history: Callable[[JobQuery], Awaitable[list[JobRecord] | None]],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """Ask host ``label``'s ``history`` (a handle's coroutine) on ``loop``."""
        self.where = label
        self._history = history
        self._loop = loop

    @property
    def nothing_yet(self) -> str:
        """Whose history is empty, and what fills it."""
        return f"No jobs recorded yet on {self.where}: its daemon writes one row per finished job."

    def read(self, query: JobQuery) -> list[JobRecord] | None:
        """The host's jobs matching ``query`` (blocking: call it from a thread).

        Raises:
            ControlError: the host or its daemon did not answer, or refused.
        """
        return wait_on_loop(self._loop, lambda: self._history(query), "history")
