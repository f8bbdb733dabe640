"""The supervisor: keeps ``count`` single-job agent containers alive, safely.

Design (see README "How the supervisor works"):

* Docker events drive it. A thread follows the engine's event stream and
  hands each event to the event loop; an exited container's slot is refilled
  as soon as its name is free (``destroy``), with no polling sleep.
* Azure DevOps is polled with one agents-list call per cycle (`AzureSync`),
  never per slot, to learn which agents are busy and to drain safely.
* At start it adopts the containers that carry its labels and never starts a
  second container for a slot whose name is still taken.
* It never stops a container whose agent has a job: to stop an idle agent it
  first disables it on the server, re-reads it, and only stops it when the
  re-read shows no assigned job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from .agentspec import build_spec, instance_id, instance_labels, slot_gpus
from .azure_sync import AzureSync
from .config import Config
from .models import (
    Command,
    CommandResult,
    ExitInfo,
    HealthSnapshot,
    HealthState,
    SupervisorEvent,
    SupervisorSnapshot,
)
from .protocols import (
    AgentPoolApi,
    ContainerEvent,
    ContainerNameConflictError,
    ContainerRuntime,
    GpuciError,
    RuntimeUnavailableError,
    TokenSource,
)
from .slots import SlotRecord
from .supervisor_commands import CommandsMixin
from .supervisor_events import EventsMixin

log = logging.getLogger("gpuci_tui.supervisor")

#: How long to wait for ``destroy`` after ``die`` before removing the container ourselves.
DESTROY_GRACE = 3.0
TOKEN_RETRY = 30.0
#: Pause of every start after the engine could not be reached (not counted against a slot).
ENGINE_RETRY = 2.0

Update = SupervisorSnapshot | SupervisorEvent


class Supervisor(EventsMixin, CommandsMixin):
    """Keeps the configured slots filled. Run with ``await supervisor.run()``."""

    def __init__(
        self,
        config: Config,
        *,
        api: AgentPoolApi,
        runtime: ContainerRuntime,
        tokens: TokenSource,
        clock: Callable[[], float] = time.time,
        mode: str = "in-process",
        extra_labels: Mapping[str, str] | None = None,
        command: tuple[str, ...] | None = None,
        intent_store: Any = None,
        on_job_finished: Callable[[SlotRecord, ExitInfo], None] | None = None,
        agent_dir_root: str | None = None,
    ) -> None:
        """Create a supervisor (nothing starts until `run`).

        Args:
            config: the loaded configuration.
            api: Azure DevOps client for the organisation.
            runtime: container engine.
            tokens: where the PAT comes from (read at every container start).
            clock: wall clock (tests may pass a fake).
            mode: ``in-process`` or ``daemon``, shown to operators.
            extra_labels: more labels for containers (tests, demo).
            command: override the image's command (tests).
            intent_store: object with ``load() -> dict`` / ``save(dict)`` keeping operator
                intent (count, paused, drained slots) across restarts.
            on_job_finished: called with the slot and its `ExitInfo` when a job ends.
            agent_dir_root: with ``agents.docker_socket``, where per-slot agent
                directories live on the host (mounted at the same path).
        """
        self.config = config
        self.api = api
        self.runtime = runtime
        self.tokens = tokens
        self.clock = clock
        self.mode = mode
        self.instance = instance_id(config)
        self.labels = instance_labels(config, extra_labels)
        self._extra_labels = dict(extra_labels or {})
        self._command = command
        self._intent = intent_store
        self._on_job_finished = on_job_finished
        self.desired = config.agents.count
        self.paused = False
        self.stopping = False
        self._stop_drain = False
        self.records: dict[int, SlotRecord] = {}
        self.docker_health = HealthSnapshot()
        self.azure = AzureSync(self)
        self.events: deque[SupervisorEvent] = deque(maxlen=200)
        self.started_at: float | None = None
        self._subscribers: set[asyncio.Queue[Update]] = set()
        self._inbox: asyncio.Queue[ContainerEvent | None] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._events_stop = threading.Event()
        self._publish_scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._token_retry_at = 0.0
        self._engine_retry_at = 0.0
        self._early_events: dict[int, list[ContainerEvent]] = {}
        #: Root of per-slot agent directories shared with the host (container jobs only).
        self.agent_dir_root: str | None = agent_dir_root
        self._exited = asyncio.Event()

    # ================================================================== public API

    async def run(self) -> None:
        """Supervise until a `Stop` command (or `request_stop`). Agents stay running."""
        self._loop = asyncio.get_running_loop()
        self.started_at = self.clock()
        self._load_intent()
        for slot in range(self.desired):
            self._record(slot)
        pump = threading.Thread(target=self._pump_events, name="docker-events", daemon=True)
        pump.start()
        try:
            await self._adopt()
            self._spawn(self.azure.run())
            await self._main_loop()
        finally:
            self._events_stop.set()
            pending = list(self._tasks)
            for task in pending:
                task.cancel()
            if pending:
                # Bounded: a stuck blocking call must not keep the daemon from exiting.
                await asyncio.wait(pending, timeout=5.0)
            self._emit("supervisor_stopped", "supervisor stopped; agents left running")
            self._publish_now()
            self._exited.set()

    def snapshot(self) -> SupervisorSnapshot:
        """The current state as a frozen snapshot."""
        now = self.clock()
        return SupervisorSnapshot(
            taken_at=now,
            org_url=self.config.azure.url,
            pool=self.config.azure.pool,
            instance=self.instance,
            desired_count=self.desired,
            paused=self.paused,
            stopping=self.stopping,
            mode=self.mode,
            pid=os.getpid(),
            slots=tuple(
                rec.snapshot(now, self._gpus(rec.slot))
                for rec in sorted(self.records.values(), key=lambda r: r.slot)
            ),
            pool_summary=self.azure.pool_summary,
            azure=self.azure.health,
            docker=self.docker_health,
            azure_requests=self.api.request_count,
            started_at=self.started_at,
        )

    def subscribe(self) -> asyncio.Queue[Update]:
        """A queue that receives every event and a snapshot after every change."""
        queue: asyncio.Queue[Update] = asyncio.Queue(maxsize=1000)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Update]) -> None:
        """Stop feeding ``queue``."""
        self._subscribers.discard(queue)

    async def wait_stopped(self) -> None:
        """Wait until `run` has returned."""
        await self._exited.wait()

    def request_stop(self, drain: bool = False) -> None:
        """Ask `run` to end (thread-unsafe: call on the loop). Agents stay unless ``drain``."""
        self.stopping = True
        self._stop_drain = drain
        if drain:
            self._drain(None)
        self._kick()

    async def execute(self, command: Command) -> CommandResult:
        """Carry out one command and say what it did."""
        result = self._execute(command)
        self._emit("command", f"{type(command).__name__.lower()}: {result.message}")
        self._save_intent()
        self._kick()
        self.azure.poll_soon()
        return result

    # ================================================================== main loop

    async def _main_loop(self) -> None:
        while True:
            self._reconcile()
            if self.stopping and (not self._stop_drain or self._all_empty()):
                return
            timeout = self._next_wake()
            try:
                async with asyncio.timeout(timeout):  # not wait_for: see AzureSync.run
                    item = await self._inbox.get()
            except TimeoutError:
                continue
            self._handle(item)
            while not self._inbox.empty():
                self._handle(self._inbox.get_nowait())

    def _next_wake(self) -> float:
        now = self.clock()
        wake = now + 5.0
        for rec in self.records.values():
            if rec.backoff_until and rec.backoff_until > now:
                wake = min(wake, rec.backoff_until)
            if rec.dying_id and rec.died_at:
                wake = min(wake, rec.died_at + DESTROY_GRACE)
        if self._token_retry_at > now:
            wake = min(wake, self._token_retry_at)
        if self._engine_retry_at > now:
            wake = min(wake, self._engine_retry_at)
        return max(0.01, wake - now)

    def _all_empty(self) -> bool:
        return all(not r.has_container and r.dying_id is None for r in self.records.values())

    def _kick(self) -> None:
        """Wake the main loop (safe from the loop only)."""
        self._inbox.put_nowait(None)

    def _reconcile(self) -> None:
        """Decide, for every slot, the next I/O step; start it as a task."""
        now = self.clock()
        for rec in list(self.records.values()):
            if rec.op is not None:
                continue
            if rec.retire and not rec.has_container and rec.dying_id is None:
                del self.records[rec.slot]
                self._changed()
                continue
            if rec.dying_id is not None:
                if rec.died_at is not None and now - rec.died_at > DESTROY_GRACE:
                    self._spawn(self._op_remove(rec, rec.dying_id))
                continue
            if rec.has_container or rec.extra_containers:
                continue
            if rec.parked or rec.drained or rec.drain or self.paused or self.stopping:
                continue
            if rec.backoff_until is not None:
                if rec.backoff_until > now:
                    continue
                rec.backoff_until = None
            if self._token_retry_at > now or self._engine_retry_at > now:
                continue
            self._spawn(self._op_start(rec))

    # ================================================================== I/O operations

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("internal task failed", exc_info=task.exception())
        if self._loop is not None and not self._loop.is_closed():
            self._kick()

    async def _op_start(self, rec: SlotRecord) -> None:
        rec.op = "start"
        rec.message = "starting"
        self._changed()
        try:
            try:
                token = await asyncio.to_thread(self.tokens.get_token, self.config.azure.url)
            except GpuciError as exc:
                self._token_retry_at = self.clock() + TOKEN_RETRY
                rec.message = f"cannot start: {exc}"
                self._emit("token_error", str(exc), rec.slot)
                return
            spec = build_spec(
                self.config,
                rec.slot,
                extra_labels=self._extra_labels,
                command=self._command,
                agent_dir_root=self.agent_dir_root,
            )
            for host, _target, _mode in spec.extra_mounts:
                if self.agent_dir_root and host.startswith(self.agent_dir_root):
                    await asyncio.to_thread(os.makedirs, host, 0o755, True)
            try:
                info = await asyncio.to_thread(self.runtime.start, spec, token)
            except ContainerNameConflictError:
                # The old container's name is still being released; retry soon.
                rec.conflict_retries += 1
                rec.backoff_until = self.clock() + min(0.1 * rec.conflict_retries, 2.0)
                rec.message = "waiting for the previous container's name to be released"
                return
            except RuntimeUnavailableError as exc:
                # The engine is down (e.g. dockerd restarting), not the slot's image: counting
                # it as a failed start would park every slot within seconds. Pause all starts.
                now = self.clock()
                self._engine_retry_at = now + ENGINE_RETRY
                self.docker_health = HealthSnapshot(HealthState.UNREACHABLE, str(exc), now)
                rec.message = f"waiting for the Docker engine: {exc}"
                self._emit("docker_error", f"{rec.name}: {exc}", rec.slot)
                return
            except GpuciError as exc:
                rec.start_failed(str(exc), self.clock(), self.config.supervisor)
                self._emit("start_failed", f"{rec.name}: {exc}", rec.slot)
                if rec.parked:
                    self._emit("slot_parked", f"{rec.name}: {rec.message}", rec.slot)
                return
            rec.container_started(info.id, info.started_at or self.clock(), by_us=True)
            rec.message = ""
            self._emit("container_started", f"{rec.name} started ({info.id[:12]})", rec.slot)
            self.azure.want_enabled(rec)
        finally:
            rec.op = None
            early = self._early_events.pop(rec.slot, [])
            self._changed()
        # A container that exits at once can report die/destroy before start() returned.
        for event in early:
            if event.container_id == rec.container_id:
                self._handle(event)

    async def _op_stop(self, rec: SlotRecord) -> None:
        """Stop the slot's container: only called after a confirmed 'no job' re-check."""
        container_id = rec.container_id
        if container_id is None or rec.op is not None:
            return
        rec.op = "stop"
        rec.stop_requested = True
        rec.message = "stopping idle agent"
        self._changed()
        try:
            await asyncio.to_thread(
                self.runtime.stop, container_id, self.config.supervisor.stop_timeout
            )
        except GpuciError as exc:
            rec.message = f"stop failed: {exc}"
        finally:
            rec.op = None
            self._changed()

    async def _op_remove(self, rec: SlotRecord, container_id: str) -> None:
        rec.op = "remove"
        try:
            await asyncio.to_thread(self.runtime.remove, container_id)
        except GpuciError as exc:
            log.warning("could not remove %s: %s", container_id[:12], exc)
        finally:
            if rec.dying_id == container_id:
                rec.dying_id = None
            rec.extra_containers.discard(container_id)
            rec.op = None
            self._changed()

    def request_container_stop(self, rec: SlotRecord) -> None:
        """Used by `AzureSync` once the server confirmed the agent is disabled and idle."""
        if rec.container_id is not None and rec.op is None and not rec.stop_requested:
            self._spawn(self._op_stop(rec))

    # ================================================================== helpers

    def _record(self, slot: int, create: bool = True) -> SlotRecord:
        rec = self.records.get(slot)
        if rec is None and create:
            rec = SlotRecord(slot=slot, name=f"{self.config.agents.name_prefix}-{slot}")
            self.records[slot] = rec
        assert rec is not None
        return rec

    def _gpus(self, slot: int) -> tuple[str, ...]:
        gpus = slot_gpus(self.config, slot)
        return (gpus,) if isinstance(gpus, str) else gpus

    def _emit(self, kind: str, message: str, slot: int | None = None) -> None:
        event = SupervisorEvent(at=self.clock(), kind=kind, message=message, slot=slot)
        self.events.append(event)
        log.info("%s", message)
        for queue in list(self._subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(event)

    def _changed(self) -> None:
        """Publish a snapshot soon (coalesced: one per loop iteration)."""
        if self._publish_scheduled or self._loop is None:
            return
        self._publish_scheduled = True
        self._loop.call_soon(self._publish_now)

    def _publish_now(self) -> None:
        self._publish_scheduled = False
        if not self._subscribers:
            return
        snap = self.snapshot()
        for queue in list(self._subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(snap)
