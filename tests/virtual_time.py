"""Virtual time for the host tests: an event loop whose clock jumps instead of waiting.

The supervisor reads the time through its injected ``clock`` and waits only through
asyncio (sleeps, timeouts, ``to_thread``), so a loop whose ``time()`` is virtual drives
it: when nothing is ready, `VirtualTimeLoop` moves its clock straight to the next
scheduled callback instead of sleeping. A test of a 30 s rule then takes milliseconds,
and the same on a busy machine as on an idle one.

* ``run_in_executor`` (hence ``asyncio.to_thread``) runs the function inline on the
  loop's thread and returns a finished future: against in-memory fakes a blocking call
  is instant and deterministic. A fake whose call must block in *virtual* time (Docker's
  ``stop`` waits for the container to exit) gives the bound method a coroutine twin,
  ``<name>_virtually``, which the loop awaits instead.
* The threads that pump blocking iterators into the loop (Docker's event stream, a
  container's output) stay real threads. Before it moves its clock the loop waits, in
  real time and with a deadline, until every thread started since the loop was made is
  *parked*: its fake says it is blocked on an empty queue (`Parking`), so everything
  emitted so far has been handed to the loop with ``call_soon_threadsafe``.
* Nothing scheduled, nothing ready and every thread parked: nothing can ever happen
  again, and the loop raises `VirtualDeadlockError` rather than hang.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import math
import selectors
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

#: Where virtual time starts, as wall-clock seconds (2026-01-01T00:00:00Z): records
#: stamped with ``loop.clock()`` read like real ones.
EPOCH = 1_767_225_600.0
#: How long (real seconds) the loop waits for the pump threads to park before it says so.
SETTLE_DEADLINE = 20.0
#: Real seconds the loop may run without its clock moving before it says it is stuck.
STUCK_AFTER = 10.0
#: Suffix of a fake's coroutine twin of a call that blocks in virtual time.
VIRTUAL_TWIN = "_virtually"


class VirtualDeadlockError(RuntimeError):
    """Nothing is scheduled, nothing is ready and no thread can post: the test would hang."""


class VirtualLivelockError(RuntimeError):
    """The loop kept running callbacks for `STUCK_AFTER` real seconds without its clock
    moving: something reschedules itself at once forever, and no virtual deadline can fire."""


class Parking(Protocol):
    """A fake whose consumer threads can say they are parked (blocked on an empty queue)."""

    def parked_threads(self) -> set[int]:
        """The idents of the threads blocked in one of its iterators with nothing to yield."""
        ...


class _VirtualSelector(selectors.DefaultSelector):
    """Never sleeps: polls the real descriptors, then lets the loop jump its clock."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualTimeLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        loop = self.loop
        if loop is not None:
            loop.check_moving()
        if timeout is not None and timeout <= 0 or loop is None:
            return super().select(0 if timeout is not None else timeout)
        loop.wait_for_parked_threads()
        ready: list[tuple[selectors.SelectorKey, int]] = super().select(0)
        if ready:
            return ready
        if timeout is None:
            # A last real look: a thread not parked on a fake may still post.
            ready = super().select(loop.grace)
            if ready:
                return ready
            raise VirtualDeadlockError(
                f"deadlock at virtual t={loop.time():.3f}: nothing is scheduled, nothing is "
                "ready and every pump thread is parked"
            )
        loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop on virtual time (see the module's docstring).

    Args:
        start: the loop's first ``time()`` (``clock()`` adds `EPOCH`).
        grace: real seconds the loop still listens, with nothing scheduled, before it
            declares a deadlock.
    """

    def __init__(self, start: float = 0.0, grace: float = 0.5) -> None:
        selector = _VirtualSelector()
        super().__init__(selector)
        selector.loop = self
        self._now = start
        self.grace = grace
        self._fakes: list[Parking] = []
        self._baseline = {t.ident for t in threading.enumerate()}
        self.jumps = 0
        """How many times the clock jumped (a test may check that time did pass virtually)."""
        self.stuck_after = STUCK_AFTER
        self._moved_at = time.monotonic()

    # ------------------------------------------------------------------ the clock

    def time(self) -> float:
        """Virtual seconds since the loop's start."""
        return self._now

    def clock(self) -> float:
        """The wall clock of this world: `EPOCH` plus the virtual time."""
        return EPOCH + self._now

    def call_later(  # type: ignore[override]
        self, delay: float, callback: Callable[..., object], *args: Any, **kwargs: Any
    ) -> asyncio.TimerHandle:
        """As asyncio's, but a positive delay is never rounded away.

        asyncio runs a timer due within one clock resolution of ``now`` at once; virtual
        time would then not move, and a task waiting for ``deadline - now`` to reach 0
        (a few ulps) would spin forever.
        """
        when = self._now + delay
        if delay > 0:
            when = max(when, self._now + 2 * self._clock_resolution)  # type: ignore[attr-defined]
        return self.call_at(when, callback, *args, **kwargs)

    def advance(self, seconds: float) -> None:
        """Move the clock on (the selector does it when nothing is ready)."""
        if seconds <= 0:
            return
        # Straight to the next timer's own time: adding a tiny ``when - now`` to a large
        # ``now`` may round to ``now`` itself, and the loop would never reach the timer.
        due = self._scheduled[0].when() if self._scheduled else self._now + seconds  # type: ignore[attr-defined]
        self._now = max(self._now + seconds, due, math.nextafter(self._now, math.inf))
        self.jumps += 1
        self._moved_at = time.monotonic()

    def check_moving(self) -> None:
        """Raise `VirtualLivelockError` once the clock stood still `stuck_after` real s.

        A wall-clock test whose code spins ends at its wait's deadline; on virtual time
        that deadline never comes unless the clock moves, so the loop itself gives up.
        """
        if time.monotonic() - self._moved_at > self.stuck_after:
            raise VirtualLivelockError(
                f"livelock at virtual t={self._now:.3f}: callbacks ran for "
                f"{self.stuck_after:g} real s without the clock moving"
            )

    # ------------------------------------------------------------------ threads

    def watch(self, fake: Parking) -> None:
        """Count ``fake``'s parked threads as settled before the clock moves."""
        self._fakes.append(fake)

    def unsettled_threads(self) -> list[threading.Thread]:
        """Threads started since the loop was made that are neither parked nor ended."""
        parked: set[int] = set()
        for fake in self._fakes:
            parked |= fake.parked_threads()
        me = threading.get_ident()
        return [
            t
            for t in threading.enumerate()
            if t.ident not in self._baseline and t.ident != me and t.ident not in parked
        ]

    def wait_for_parked_threads(self, deadline: float = SETTLE_DEADLINE) -> None:
        """Block (real time) until every new thread is parked or gone.

        Raises:
            RuntimeError: ``deadline`` real seconds passed; names the threads still busy.
        """
        give_up = time.monotonic() + deadline
        pause = 0.0005
        while busy := self.unsettled_threads():
            if time.monotonic() > give_up:
                names = ", ".join(sorted(t.name for t in busy))
                raise RuntimeError(
                    f"virtual t={self.time():.3f}: threads still busy after {deadline:g} real s "
                    f"({names}); a thread the loop must wait for should park on a fake"
                )
            time.sleep(pause)  # real time: another thread must run, this one has nothing to do
            pause = min(pause * 2, 0.01)

    # ------------------------------------------------------------------ executor

    def run_in_executor(  # type: ignore[override]
        self, executor: concurrent.futures.Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        """Run ``func`` inline (or await its virtual twin); a finished future."""
        target, call_args = _unwrap(func, args)
        twin = _twin(target)
        if twin is not None:
            return asyncio.ensure_future(twin(*call_args), loop=self)
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task, as a thread would
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            future.set_exception(exc)
        return future


def _unwrap(func: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """See through ``asyncio.to_thread``'s ``partial(context.run, func, *args)``."""
    if (
        isinstance(func, functools.partial)
        and isinstance(getattr(func.func, "__self__", None), contextvars.Context)
        and func.args
    ):
        return func.args[0], (*func.args[1:], *args)
    return func, args


def _twin(func: Any) -> Callable[..., Awaitable[Any]] | None:
    owner = getattr(func, "__self__", None)
    name = getattr(func, "__name__", "")
    if owner is None or not name:
        return None
    twin = getattr(owner, name + VIRTUAL_TWIN, None)
    return twin if callable(twin) else None


def world_time() -> float:
    """The wall-clock time of the world the caller runs in: a running `VirtualTimeLoop`'s
    clock, else the OS's (for readings a test builds, e.g. a GPU frame's time)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return time.time()
    return loop.clock() if isinstance(loop, VirtualTimeLoop) else time.time()


def run_virtual(
    main: Callable[[VirtualTimeLoop], Coroutine[Any, Any, T]], *, start: float = 0.0
) -> T:
    """Run ``main(loop)`` to its end on a fresh `VirtualTimeLoop`, then close the loop."""
    loop = VirtualTimeLoop(start)
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        try:
            return runner.run(main(loop))
        except (VirtualDeadlockError, VirtualLivelockError):
            loop._moved_at = time.monotonic()  # the runner's teardown cancels what spins
            raise


__all__ = [
    "EPOCH",
    "Parking",
    "VirtualDeadlockError",
    "VirtualLivelockError",
    "VirtualTimeLoop",
    "run_virtual",
    "world_time",
]
