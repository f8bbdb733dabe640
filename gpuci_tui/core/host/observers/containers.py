"""The container observer: Docker's view of our containers, as observations.

A helper thread follows the engine's event stream (filtered on our labels)
and turns each event into an observation for the engine loop; when the
stream comes back after an outage it lists our containers again, so the
engine re-adopts from the truth instead of replaying what it missed. A cheap
ping now and then keeps "when did the engine last answer" honest while no
event happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping

from gpuci_tui.core.docker.agentspec import lane_of, package_of, placed, slot_of, spec_of
from gpuci_tui.core.engine.steps import (
    Appeared,
    Destroyed,
    Died,
    EngineAnswered,
    EngineLost,
    Listed,
    Observation,
    OutOfMemory,
)
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.protocols import ContainerEvent, ContainerRuntime

log = logging.getLogger("gpuci_tui.supervisor")

#: Seconds between pings while the event stream is quiet.
PING_INTERVAL = 15.0

Deliver = Callable[[Observation], None]


class ContainerObserver:
    """Lists, follows and pings the container engine for one supervisor."""

    def __init__(
        self,
        runtime: ContainerRuntime,
        labels: Mapping[str, str],
        *,
        clock: Callable[[], float],
        ping_interval: float = PING_INTERVAL,
    ) -> None:
        """Observe the containers that carry all of ``labels``."""
        self.runtime = runtime
        self.labels = dict(labels)
        self.clock = clock
        self.ping_interval = ping_interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    async def listing(self) -> Observation:
        """Our containers now (`Listed`), or `EngineLost` when the engine does not answer."""
        try:
            found = await asyncio.to_thread(self.runtime.list_containers, self.labels)
        except GpuciError as exc:
            return EngineLost(str(exc), self.clock())
        return Listed(placed(found), self.clock())

    def follow(self, loop: asyncio.AbstractEventLoop, deliver: Deliver) -> None:
        """Start the event thread; observations reach ``deliver`` on ``loop``."""

        def pump() -> None:
            def send(obs: Observation) -> None:
                with contextlib.suppress(RuntimeError):  # the loop closed while stopping
                    loop.call_soon_threadsafe(deliver, obs)

            try:
                for event in self.runtime.events(self.labels, self._stop):
                    if self._stop.is_set():
                        break
                    for obs in self._translate(event):
                        send(obs)
            except Exception as exc:  # noqa: BLE001 - reported; the engine loop carries on
                log.error("docker event stream ended: %s", exc)
                send(EngineLost(str(exc), self.clock()))

        self._thread = threading.Thread(target=pump, name="docker-events", daemon=True)
        self._thread.start()

    async def ping_forever(self, deliver: Deliver) -> None:
        """Ping the engine every `ping_interval` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.ping_interval)
            try:
                await asyncio.to_thread(self.runtime.ping)
            except GpuciError as exc:
                deliver(EngineLost(str(exc), self.clock()))
            else:
                deliver(EngineAnswered(self.clock()))

    def stop(self) -> None:
        """End the event thread (it notices within ~0.1 s)."""
        self._stop.set()

    def _translate(self, event: ContainerEvent) -> list[Observation]:
        now = self.clock()
        if event.action == "stream-lost":
            return [EngineLost(event.message or "Docker event stream lost", now)]
        if event.action == "stream-restored":
            # Events of the gap are lost: list what is there now (on this thread,
            # so the listing is ordered before the events that follow it).
            try:
                found = self.runtime.list_containers(self.labels)
            except GpuciError as exc:
                return [EngineLost(str(exc), now)]
            return [EngineAnswered(now, restored=True), Listed(placed(found), self.clock())]
        slot = slot_of(event.labels)
        if slot is None:
            return []
        lane = lane_of(event.labels)
        at = event.time or now
        cid = event.container_id
        if event.action == "die":
            return [Died(slot, lane, cid, event.exit_code, at)]
        if event.action == "destroy":
            return [Destroyed(slot, lane, cid, at)]
        if event.action == "oom":
            return [OutOfMemory(slot, lane, cid)]
        if event.action == "start":
            labels = event.labels
            return [Appeared(slot, lane, cid, at, spec_of(labels), package_of(labels))]
        return []
