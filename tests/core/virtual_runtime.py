"""`VirtualRuntime`: the simulated Docker engine with thread-free agents, on virtual time.

It is `gpuci_tui.sim.runtime.SimulatedRuntime` (its containers, labels, images, start
failures, names taken until ``destroy``, logs, go files) with three things changed:

* each container's agent program is an asyncio task on the `VirtualTimeLoop`
  (tests/core/virtual_agent.py), not a thread;
* Docker's delays (``destroy`` after ``die``, ``stop``'s SIGKILL after its timeout, a
  cut event stream) are timers of that loop; ``stop`` blocks in virtual time through
  its twin `stop_virtually`, as ``docker stop`` blocks until the container exited;
* the event stream and the output followers are fed from queues whose consumer
  threads say when they are parked on an empty one (`parked_threads`): the loop moves
  its clock only once everything emitted has reached it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from gpuci_tui.core.protocols import ContainerEvent
from gpuci_tui.sim.container import SimContainer
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import SimulatedRuntime, _matches
from tests.core.virtual_agent import Signals, run_agent_virtually
from tests.virtual_time import VirtualTimeLoop

#: Real seconds a parked consumer sleeps between looks at its ``stop`` event.
STOP_LOOK = 0.05


class _Feed:
    """One consumer's queue of events."""

    def __init__(self, labels: Mapping[str, str]) -> None:
        self.labels = dict(labels)
        self.items: deque[ContainerEvent] = deque()
        self.parked_by: int | None = None


class _Reader:
    """One follower of a container's output: how many lines it has read."""

    def __init__(self, c: SimContainer) -> None:
        self.c = c
        self.seen = 0
        self.parked_by: int | None = None


class VirtualRuntime(SimulatedRuntime):
    """`SimulatedRuntime` whose agents, delays and streams run on ``loop`` (virtual time)."""

    def __init__(self, org: SimOrg, loop: VirtualTimeLoop, **kwargs: Any) -> None:
        self._broken = False
        self._closed = False
        super().__init__(org, clock=loop.clock, **kwargs)
        self.loop = loop
        self._feeds: list[_Feed] = []
        self._readers: list[_Reader] = []
        self._cond = threading.Condition(self._lock)
        self._signals: dict[str, Signals] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        loop.watch(self)

    @property
    def available(self) -> bool:
        """False makes every call fail and cuts the event stream (lost, then restored)."""
        return self._available

    @available.setter
    def available(self, value: bool) -> None:
        if not hasattr(self, "_cond"):  # the base class's __init__
            self._available = value
            return
        with self._cond:
            was = self._stream_down()
            self._available = value
            self._stream_changed(was)

    # ------------------------------------------------------------------ the loop's view

    def parked_threads(self) -> set[int]:
        """Consumer threads blocked on an empty feed (nothing of theirs is in flight)."""
        with self._cond:
            parked = {f.parked_by for f in self._feeds if f.parked_by and not f.items}
            for r in self._readers:
                if r.parked_by and r.seen >= r.c._logged and not r.c.exited.is_set():
                    parked.add(r.parked_by)
            return {p for p in parked if p is not None}

    # ------------------------------------------------------------------ agents

    def _launch(self, c: SimContainer) -> None:
        logged = c.log

        def log(line: str) -> None:
            logged(line)
            with self._cond:
                self._cond.notify_all()  # its followers read it

        c.log = log  # type: ignore[method-assign]
        signals = self._signals[c.id] = Signals()
        task = self.loop.create_task(run_agent_virtually(c, self.org, self.timing, signals))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _poke(self, c: SimContainer) -> None:
        signals = self._signals.get(c.id)
        if signals is not None:
            signals.poke.set()

    def put_file(self, container_id: str, path: str, content: str) -> None:
        """Write the file and wake the agent waiting for it."""
        super().put_file(container_id, path, content)
        c = self.container(container_id)
        if c is not None:
            self._poke(c)

    def kill(self, container_id: str, exit_code: int = 137) -> None:
        """Kill the process now (no offline call) and wake its task to end."""
        super().kill(container_id, exit_code)
        c = self.container(container_id)
        if c is not None:
            self._poke(c)

    def stop(self, container_id: str, timeout: float = 30.0) -> None:
        """SIGTERM only (a caller on the loop gets `stop_virtually`, which waits)."""
        self._check()
        c = self.container(container_id)
        if c is not None and c.running:
            c.sigterm()
            self._poke(c)

    async def stop_virtually(self, container_id: str, timeout: float = 30.0) -> None:
        """``docker stop``: SIGTERM, wait (virtual) for the exit, SIGKILL after ``timeout``."""
        self.stop(container_id, timeout)
        c = self.container(container_id)
        signals = None if c is None else self._signals.get(c.id)
        if c is None or signals is None or not c.running:
            return
        try:
            await asyncio.wait_for(signals.exited.wait(), timeout)
        except TimeoutError:
            c.terminate(137)
            self._poke(c)

    def remove(self, container_id: str) -> None:
        """Force-remove; a running agent's task is woken to end."""
        c = self.container(container_id)
        super().remove(container_id)
        if c is not None:
            self._poke(c)

    def close(self) -> None:
        """Kill every running container, end their tasks and every consumer's iterator.

        A killed daemon never stops its observers: their threads end here, not poll on
        for the rest of the run (the suite's teardown closes every runtime).
        """
        super().close()
        for task in list(self._tasks):
            task.cancel()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _on_exit(self, c: SimContainer) -> None:
        super()._on_exit(c)
        signals = self._signals.get(c.id)
        if signals is not None and not self.loop.is_closed():
            signals.exited.set()
        with self._cond:
            self._cond.notify_all()  # its output followers end

    def _destroy_later(self, c: SimContainer) -> None:
        if self.loop.is_closed():  # killed at the suite's teardown, after its loop
            self._destroy(c)
        else:
            self.loop.call_later(self.destroy_delay, self._destroy, c)

    # ------------------------------------------------------------------ the event stream

    def break_event_stream(self, duration: float) -> None:
        """Cut the event stream for ``duration`` virtual seconds; events in the gap are lost."""
        with self._cond:
            was = self._stream_down()
            self._broken = True
            self._stream_changed(was)
        self.loop.call_later(duration, self._mend)

    def _mend(self) -> None:
        with self._cond:
            was = self._stream_down()
            self._broken = False
            self._stream_changed(was)

    def _stream_down(self) -> bool:
        return self._broken or not self._available

    def _stream_changed(self, was: bool) -> None:
        """Tell every consumer the stream was lost or restored (the caller holds the lock)."""
        down = self._stream_down()
        if was == down:
            return
        event = ContainerEvent(
            "stream-lost" if down else "stream-restored",
            time=self.clock(),
            message="event stream interrupted" if down else "event stream restored",
        )
        for feed in self._feeds:
            feed.items.append(event)
        self._cond.notify_all()

    def _emit(self, action: str, c: SimContainer, exit_code: int | None = None) -> None:
        event = ContainerEvent(
            action=action,
            container_id=c.id,
            name=c.name,
            labels=dict(c.labels),
            exit_code=exit_code,
            time=self.clock(),
        )
        with self._cond:
            if self._stream_down():
                return  # Docker does not replay events a client missed
            for feed in self._feeds:
                if _matches(c.labels, feed.labels):
                    feed.items.append(event)
            self._cond.notify_all()

    def events(self, labels: Mapping[str, str], stop: threading.Event) -> Iterator[ContainerEvent]:
        """Events of containers carrying ``labels`` until ``stop`` is set (a consumer thread)."""
        feed = _Feed(labels)
        with self._cond:
            self._feeds.append(feed)
        try:
            while True:
                with self._cond:
                    while not feed.items and not stop.is_set() and not self._closed:
                        feed.parked_by = threading.get_ident()
                        self._cond.wait(STOP_LOOK)
                    feed.parked_by = None
                    if stop.is_set() or self._closed:
                        return
                    event = feed.items.popleft()
                yield event
        finally:
            with self._cond:
                self._feeds.remove(feed)

    def follow_output(self, container_id: str, stop: threading.Event) -> Iterator[str]:
        """The container's output lines as they come, until it ended or ``stop`` is set."""
        self._check()
        c = self.container(container_id)
        if c is None:
            return
        reader = _Reader(c)
        with self._cond:
            self._readers.append(reader)
        try:
            while True:
                with self._cond:
                    while reader.seen >= c._logged and not c.exited.is_set():
                        if stop.is_set() or self._closed:
                            return
                        reader.parked_by = threading.get_ident()
                        self._cond.wait(STOP_LOOK)
                    reader.parked_by = None
                    first = c._logged - len(c._logs)
                    reader.seen = max(reader.seen, first)
                    fresh = list(c._logs)[reader.seen - first :]
                    reader.seen += len(fresh)
                    if not fresh and c.exited.is_set():
                        return
                yield from fresh
        finally:
            with self._cond:
                self._readers.remove(reader)
