"""The suite's one way to wait for a state that must stay real: poll it, with a deadline.

A test never sleeps for a state to come: it polls a predicate until it holds,
and fails with what it waited for when the deadline passes. The deadline only
bounds a failing wait (a passing one returns as soon as the state holds), so it
is generous: the suite runs with every core busy, and several tests at once.
A blocking wait's polls back off from 10 ms to 100 ms, so a long wait on a Docker
engine or a daemon's socket costs a few calls a second, not a hundred; a wait in an
event loop polls every 10 ms (its predicates read memory, and the loop's own tasks run
between polls).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

FIRST_PAUSE = 0.01
LONGEST_PAUSE = 0.1


def _pauses(longest: float) -> Callable[[], float]:
    pause = min(FIRST_PAUSE, longest)

    def following() -> float:
        nonlocal pause
        current, pause = pause, min(pause * 1.5, longest)
        return current

    return following


What = str | Callable[[], str]
"""What a wait waits for, in words; a callable is asked when the wait fails (the last state)."""


def _timed_out(timeout: float, what: What, predicate: object) -> AssertionError:
    words = what() if callable(what) else what
    return AssertionError(f"timed out after {timeout:g} s waiting for {words or predicate}")


def wait_until(predicate: Callable[[], T], timeout: float = 10.0, what: What = "") -> T:
    """Poll ``predicate`` until it returns something truthy, and return that.

    Raises:
        AssertionError: ``timeout`` seconds passed first; the message names ``what``.
    """
    deadline = time.monotonic() + timeout
    pause = _pauses(LONGEST_PAUSE)
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what, predicate)
        time.sleep(pause())


async def wait_until_async(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float = 10.0,
    what: What = "",
    pause: Callable[[float], Awaitable[object]] = asyncio.sleep,
    every: float = FIRST_PAUSE,
) -> T:
    """`wait_until` inside an event loop: the loop runs between polls.

    ``predicate`` may return an awaitable (a coroutine asking a handle for its
    snapshot): its result is what counts. ``pause``: how to let the loop run
    (``asyncio.sleep``; a Textual Pilot's ``pause``, which also lets the app
    process its messages), ``every`` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pauses = _pauses(every)
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() > deadline:
            raise _timed_out(timeout, what, predicate)
        await pause(pauses())
