"""How the supervisor learns about containers: adoption by labels and Docker events.

Split from `supervisor.py`. `EventsMixin` turns the engine's view (a listing at
start or after the event stream came back, and the events in between) into
slot transitions; it never starts or stops anything itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .agentspec import slot_of
from .config import Config
from .models import ExitInfo, HealthSnapshot, HealthState, SupervisorEvent
from .protocols import ContainerEvent, ContainerInfo, ContainerRuntime, GpuciError
from .slots import SlotRecord

log = logging.getLogger("gpuci_tui.supervisor")


class EventsMixin:
    """Adoption and event handling for `Supervisor` (which provides these attributes)."""

    config: Config
    runtime: ContainerRuntime
    labels: dict[str, str]
    desired: int
    records: dict[int, SlotRecord]
    docker_health: HealthSnapshot
    clock: Callable[[], float]
    events: Any
    _loop: asyncio.AbstractEventLoop | None
    _inbox: asyncio.Queue[ContainerEvent | None]
    _events_stop: threading.Event
    _early_events: dict[int, list[ContainerEvent]]
    _on_job_finished: Callable[[SlotRecord, ExitInfo], None] | None

    def _record(self, slot: int, create: bool = True) -> SlotRecord:
        raise NotImplementedError

    def _emit(self, kind: str, message: str, slot: int | None = None) -> SupervisorEvent | None:
        raise NotImplementedError

    def _changed(self) -> None:
        raise NotImplementedError

    def _spawn(self, coro: Any) -> None:
        raise NotImplementedError

    async def _op_remove(self, rec: SlotRecord, container_id: str) -> None:
        raise NotImplementedError

    async def _adopt(self) -> None:
        """Rebuild state from the containers that carry our labels."""
        try:
            found = await asyncio.to_thread(self.runtime.list_containers, self.labels)
        except GpuciError as exc:
            self.docker_health = HealthSnapshot(HealthState.UNREACHABLE, str(exc), self.clock())
            self._emit("docker_error", str(exc))
            return
        self.docker_health = HealthSnapshot(HealthState.OK, "", self.clock())
        self._apply_listing(found)

    def _apply_listing(self, found: list[ContainerInfo]) -> None:
        live: dict[int, list[ContainerInfo]] = {}
        for info in found:
            slot = slot_of(info.labels)
            if slot is None:
                continue
            if info.status in ("running", "restarting", "paused"):
                live.setdefault(slot, []).append(info)
            elif info.status in ("created", "exited", "dead"):
                # Half-made (crash between create and start) or left over: clear the name.
                rec = self._record(slot, create=slot < self.desired)
                if rec is not None and rec.dying_id is None and info.id != rec.container_id:
                    rec.extra_containers.add(info.id)
                    self._spawn(self._op_remove(rec, info.id))
        for slot, infos in live.items():
            rec = self._record(slot, create=True)
            assert rec is not None
            if slot >= self.desired:
                rec.retire = True
                rec.drain = True
            current = next((i for i in infos if i.id == rec.container_id), None) or infos[0]
            if rec.container_id != current.id and rec.op != "start":
                rec.container_started(current.id, current.started_at or self.clock(), by_us=False)
                self._emit("container_adopted", f"{rec.name} adopted ({current.id[:12]})", slot)
            rec.extra_containers = {i.id for i in infos if i.id != current.id}
        for rec in self.records.values():
            if rec.container_id and rec.slot not in live and rec.op != "start":
                # Gone while we were not looking (stream gap): count it as an exit.
                self._container_gone(rec, None)
        self._changed()

    def _pump_events(self) -> None:
        """Thread: follow the engine's event stream and hand events to the loop."""
        loop = self._loop
        assert loop is not None
        try:
            for event in self.runtime.events(self.labels, self._events_stop):
                if self._events_stop.is_set():
                    break
                loop.call_soon_threadsafe(self._inbox.put_nowait, event)
        except Exception as exc:  # noqa: BLE001 - reported, then the loop re-adopts
            log.error("docker event stream ended: %s", exc)
            failure = ContainerEvent(action="stream-lost", message=str(exc))
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._inbox.put_nowait, failure)

    def _handle(self, event: ContainerEvent | None) -> None:
        if event is None:
            return
        now = self.clock()
        if event.action == "stream-lost":
            self.docker_health = HealthSnapshot(
                HealthState.UNREACHABLE, event.message or "Docker event stream lost", now
            )
            self._emit("docker_error", f"Docker engine lost: {event.message}")
            self._changed()
            return
        if event.action == "stream-restored":
            self.docker_health = HealthSnapshot(HealthState.OK, "", now)
            self._emit("docker_restored", "Docker engine back; re-adopting containers")
            self._spawn(self._adopt())
            return
        slot = slot_of(event.labels)
        rec = self.records.get(slot) if slot is not None else None
        if rec is None:
            return
        if rec.op == "start" and event.container_id != rec.container_id:
            self._early_events.setdefault(rec.slot, []).append(event)
            return
        if event.action == "oom" and event.container_id == rec.container_id:
            rec.oom = True
        elif event.action == "die":
            if event.container_id == rec.container_id:
                self._container_gone(rec, event.exit_code)
            elif event.container_id in rec.extra_containers:
                rec.extra_containers.discard(event.container_id)
        elif event.action == "destroy":
            rec.extra_containers.discard(event.container_id)
            if event.container_id == rec.dying_id:
                rec.dying_id = None
            elif event.container_id == rec.container_id:
                self._container_gone(rec, None)
                rec.dying_id = None
        elif event.action == "start" and rec.container_id is None and rec.op != "start":
            # Started by someone else with our labels: adopt rather than duplicate.
            rec.container_started(event.container_id, event.time or now, by_us=False)
        self._changed()

    def _container_gone(self, rec: SlotRecord, code: int | None) -> None:
        had_job = rec.job
        container_id = rec.container_id
        info, failure = rec.exited(code, self.clock(), self.config.supervisor)
        kind = "slot_parked" if rec.parked else "container_exited"
        self._emit(kind, f"{rec.name} exited: {info.reason}", rec.slot)
        if had_job is not None or info.took_job:
            self._emit("job_finished", f"{rec.name} finished its job", rec.slot)
            if self._on_job_finished is not None:
                self._on_job_finished(rec, info)
        if failure and container_id:
            self._spawn(self._fetch_log_tail(rec, container_id))

    async def _fetch_log_tail(self, rec: SlotRecord, container_id: str) -> None:
        # Best effort: an auto-removed container's logs vanish ~100 ms after exit.
        try:
            lines = await asyncio.to_thread(self.runtime.logs_tail, container_id, 20)
        except GpuciError:
            return
        if lines and rec.last_exit is not None and not rec.last_exit.log_tail:
            rec.last_exit = replace(rec.last_exit, log_tail=tuple(lines))
            self._changed()
