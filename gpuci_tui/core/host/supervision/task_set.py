"""A supervisor's background tasks: held until done, failures logged, cancelled with a bound.

The event loop keeps only a weak reference to a task, so a fire-and-forget task
(an action carried out in a thread, the pool's reader, the Docker ping) could be
collected while it runs. A `TaskSet` holds each one until it ends, logs what made
one fail instead of losing it, tells its owner that one ended (the supervisor
plans again), and on the way out cancels them all and waits a bounded time, so a
stuck blocking call cannot keep the daemon from exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("gpuci_tui.supervisor")


class TaskSet:
    """Background tasks of one owner (see the module docstring).

    Args:
        on_done: called on the loop after each task ends (e.g. wake the owner's loop).
    """

    def __init__(self, on_done: Callable[[], None]) -> None:
        self._on_done = on_done
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a task held until it ends (call on the loop)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("internal task failed", exc_info=task.exception())
        with contextlib.suppress(RuntimeError):  # the loop may be closing
            self._on_done()

    async def cancel(self, timeout: float = 5.0) -> None:
        """Cancel every task and wait at most ``timeout`` seconds for them to end."""
        pending = list(self._tasks)
        for task in pending:
            task.cancel()
        if pending:
            # Bounded: a stuck blocking call must not keep the daemon from exiting.
            await asyncio.wait(pending, timeout=timeout)
