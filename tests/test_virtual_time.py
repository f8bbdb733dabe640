"""The virtual-time loop (tests/virtual_time.py): its clock jumps, never races its threads."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tests.virtual_time import (
    EPOCH,
    VirtualDeadlockError,
    VirtualLivelockError,
    VirtualTimeLoop,
    run_virtual,
)


class OnePump:
    """A fake with one consumer thread: parked while it waits on its empty queue."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.items: list[str] = []
        self.parked: int | None = None
        self.stop = False

    def parked_threads(self) -> set[int]:
        with self.lock:
            return {self.parked} if self.parked is not None and not self.items else set()

    def put(self, item: str) -> None:
        with self.lock:
            self.items.append(item)
            self.lock.notify_all()

    def pump(self, loop: asyncio.AbstractEventLoop, deliver: list[tuple[str, float]]) -> None:
        """Hand each item to the loop, as the supervisor's observers do."""
        while True:
            with self.lock:
                while not self.items and not self.stop:
                    self.parked = threading.get_ident()
                    self.lock.wait(0.05)
                self.parked = None
                if self.stop:
                    return
                item = self.items.pop(0)
            time.sleep(0.05)  # a slow hand-over: the loop must not jump meanwhile
            loop.call_soon_threadsafe(lambda i=item: deliver.append((i, loop.time())))


def test_an_hour_of_sleep_takes_no_real_time_and_the_clock_reads_it() -> None:
    async def main(loop: VirtualTimeLoop) -> tuple[float, float]:
        await asyncio.sleep(3600)
        return loop.time(), loop.clock()

    began = time.monotonic()
    virtual, wall = run_virtual(main)
    assert virtual == 3600 and wall == EPOCH + 3600
    assert time.monotonic() - began < 5, "an hour of virtual time cost real time"


def test_timers_run_in_their_order_at_their_own_time() -> None:
    async def main(loop: VirtualTimeLoop) -> list[tuple[str, float]]:
        seen: list[tuple[str, float]] = []

        async def at(name: str, delay: float) -> None:
            await asyncio.sleep(delay)
            seen.append((name, loop.time()))

        await asyncio.gather(at("c", 3.0), at("a", 1.0), at("b", 2.5))
        return seen

    assert run_virtual(main) == [("a", 1.0), ("b", 2.5), ("c", 3.0)]


def test_a_deadline_a_few_ulps_away_is_still_reached() -> None:
    """``deadline - now`` may round to a timer asyncio would run at once: the loop moves on."""

    async def main(loop: VirtualTimeLoop) -> int:
        await asyncio.sleep(10.0)
        deadline = loop.time() + 0.3
        turns = 0
        while (left := deadline - loop.time()) > 0:
            await asyncio.sleep(min(left, 0.1))
            turns += 1
            assert turns < 100, "the loop spins without moving its clock"
        return turns

    assert run_virtual(main) <= 5


def test_to_thread_runs_inline_on_the_loop_thread() -> None:
    async def main(loop: VirtualTimeLoop) -> tuple[int, float]:
        ident = await asyncio.to_thread(threading.get_ident)
        return ident, loop.time()

    ident, at = run_virtual(main)
    assert ident == threading.get_ident() and at == 0.0


def test_a_blocking_call_with_a_virtual_twin_blocks_in_virtual_time() -> None:
    class Engine:
        def stop(self, seconds: float) -> str:
            raise AssertionError("the blocking version ran on the loop")

        async def stop_virtually(self, seconds: float) -> str:
            await asyncio.sleep(seconds)
            return "stopped"

    async def main(loop: VirtualTimeLoop) -> tuple[str, float]:
        said = await asyncio.to_thread(Engine().stop, 30.0)
        return said, loop.time()

    assert run_virtual(main) == ("stopped", 30.0)


def test_errors_of_an_inline_call_reach_the_awaiting_task() -> None:
    def fails() -> None:
        raise ValueError("engine refused")

    async def main(loop: VirtualTimeLoop) -> None:
        await asyncio.to_thread(fails)

    with pytest.raises(ValueError, match="engine refused"):
        run_virtual(main)


def test_the_clock_waits_for_a_pump_thread_to_hand_over_what_it_holds() -> None:
    """An item emitted at t=0 reaches the loop at t=0, however slow its thread is."""
    fake = OnePump()

    async def main(loop: VirtualTimeLoop) -> list[tuple[str, float]]:
        loop.watch(fake)
        got: list[tuple[str, float]] = []
        thread = threading.Thread(target=fake.pump, args=(loop, got), name="pump")
        thread.start()
        try:
            fake.put("die")
            await asyncio.sleep(10)
            fake.put("destroy")
            await asyncio.sleep(10)
        finally:
            fake.stop = True
            thread.join(5)
        return got

    assert run_virtual(main) == [("die", 0.0), ("destroy", 10.0)]


def test_nothing_scheduled_nothing_ready_is_a_deadlock_not_a_hang() -> None:
    async def main(loop: VirtualTimeLoop) -> None:
        await asyncio.sleep(5)
        await loop.create_future()  # nobody will ever set it

    with pytest.raises(VirtualDeadlockError, match=r"deadlock at virtual t=5\.000"):
        run_virtual(main)


def test_code_that_spins_without_time_passing_is_a_livelock_not_a_hang() -> None:
    """On the wall clock a spinning supervisor ends at the wait's deadline; here the loop
    gives up itself, since no virtual deadline fires while the clock stands still."""

    async def main(loop: VirtualTimeLoop) -> None:
        loop.stuck_after = 0.3
        await asyncio.sleep(2)

        def again() -> None:
            loop.call_soon(again)  # reschedules itself at once, for ever

        again()
        await loop.create_future()

    with pytest.raises(VirtualLivelockError, match=r"livelock at virtual t=2\.000"):
        run_virtual(main)


def test_a_thread_that_never_parks_is_named_after_the_deadline() -> None:
    release = threading.Event()
    loop = VirtualTimeLoop()
    busy = threading.Thread(target=release.wait, name="busy-worker", daemon=True)
    busy.start()
    try:
        with pytest.raises(RuntimeError, match="busy-worker"):
            loop.wait_for_parked_threads(deadline=0.2)
    finally:
        release.set()
        busy.join(5)
        loop.close()
