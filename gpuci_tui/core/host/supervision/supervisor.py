"""The supervisor: keeps ``count`` slots of single-job agents alive, safely, with hot standby.

It is a small loop around pure parts (see docs/architecture.md, "How the supervisor works"):

* `transitions.apply` folds every observation into the `EngineState`:
  Docker events and listings (`ContainerObserver`), what the agents say in
  their output (`OutputFollower`), reads of the pool (`PoolObserver`, one
  agents-list call per read, never per slot), and the results of the engine's
  own actions.
* `planner.decide` turns the state and the time into actions; the
  `Executor` carries them out in threads and answers with observations.
* `commands.apply_command` changes intents; `preview.preview` says what a
  command would do before it is sent.
* A `Reporter` (the `Broadcaster`) tells subscribers about events and changes.

Docker events drive it: an exited agent's standby is enabled, and its slot
refilled, as soon as the event arrives. It adopts containers with its labels
at start and never starts a second container for a lane whose name is
taken. It never stops a container whose agent has a job.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gpuci_tui.core.command_types import Command, CommandResult, GpuClear, Stop
from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.docker.agentspec import config_hash, host_marker, instance_id, instance_labels
from gpuci_tui.core.docker.slot_devices import device_label
from gpuci_tui.core.engine.commands import apply_command, overrides_in_force, reset_overrides
from gpuci_tui.core.engine.gpu_admission import GpuAdmission
from gpuci_tui.core.engine.lifecycle import EngineState, new_slot
from gpuci_tui.core.engine.planning.planner import decide
from gpuci_tui.core.engine.preview import CommandPreview, preview
from gpuci_tui.core.engine.rollout.progress import advance
from gpuci_tui.core.engine.snapshots import SnapshotMeta, supervisor_snapshot
from gpuci_tui.core.engine.standby.auto import AutoSeed, depth_of, seeded
from gpuci_tui.core.engine.steps import Action, Died, JobEnded, Note, Observation
from gpuci_tui.core.engine.transitions.server import REGISTRATION_EXITS
from gpuci_tui.core.host.gpus.gates import clear_gpu
from gpuci_tui.core.host.gpus.slot_gpus import SlotGpus
from gpuci_tui.core.host.observers.containers import ContainerObserver
from gpuci_tui.core.host.observers.output import OutputFollower
from gpuci_tui.core.host.observers.pool import PoolObserver
from gpuci_tui.core.host.observers.pool_scope import read_scope
from gpuci_tui.core.host.reporter import Broadcaster, Reporter, Update, report_note
from gpuci_tui.core.host.supervision.executor import Executor
from gpuci_tui.core.host.supervision.reconfigure import apply_reload, preview_reload
from gpuci_tui.core.host.supervision.rollout_intent import load_intent, save_data
from gpuci_tui.core.host.supervision.task_set import TaskSet
from gpuci_tui.core.models import SupervisorSnapshot
from gpuci_tui.core.packages import AgentPackageMount
from gpuci_tui.core.protocols import AgentPoolApi, ContainerRuntime, TokenSource
from gpuci_tui.core.store.intent import IntentStore

if TYPE_CHECKING:
    from gpuci_tui.core.engine.gpu_health import HealthBook
    from gpuci_tui.core.gpu.accounting import JobKey
    from gpuci_tui.core.gpu_readings import GpuFrame, JobGpuNow
    from gpuci_tui.core.host.gpus.gates import GpuGatekeeper, Ours
    from gpuci_tui.core.host.images.puller import ImagePuller

log = logging.getLogger("gpuci_tui.supervisor")

__all__ = ["Supervisor", "Update"]


class Supervisor:
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
        intent_store: IntentStore | None = None,
        on_job_finished: Callable[[JobEnded], None] | None = None,
        agent_dir_root: str | None = None,
        reporter: Reporter | None = None,
        pool: PoolObserver | None = None,
        group: str = "",
        gpu_use: Callable[[JobKey], JobGpuNow | None] | None = None,
        gatekeeper: GpuGatekeeper | None = None,
        pull_refusal: Callable[[], str | None] | None = None,
        puller: ImagePuller | None = None,
        agent_package: Callable[[str], Awaitable[AgentPackageMount | None]] | None = None,
    ) -> None:
        """Create a supervisor (nothing starts until `run`).

        Args:
            config: the loaded configuration.
            api: Azure DevOps client for the organisation.
            runtime: container engine.
            tokens: what a container registers with (asked at every container start).
            clock: wall clock (tests may pass a fake).
            mode: ``in-process`` or ``daemon``, shown to operators.
            extra_labels: more labels for containers (tests, demo).
            command: override the image's command (tests).
            intent_store: keeps operator intent (count, paused, drained slots) across restarts.
            on_job_finished: called with each finished job (the history).
            agent_dir_root: with ``agents.docker_socket``, where per-slot agent
                directories live on the host (mounted at the same path).
            reporter: where events and snapshots go (default: a new `Broadcaster`).
            pool: a pool observer shared with the supervisors of other agent groups of
                the same pool (it is then run by its owner, who hands reads to `deliver`).
            group: this supervisor's agent group, shown in its snapshots (empty: the only one).
            gpu_use: what a job uses of the GPUs now (the daemon's
                `JobAccountant.current`), shown on busy slots; None when GPUs are not sampled.
            gatekeeper: the host's GPU admission and health watch (``gpu clear``, the
                GPUs' states), which feeds this supervisor; None when GPUs are not sampled.
            pull_refusal: why no pull may start now (Docker's disk below its hard floor).
            puller: the host's image puller, shared by every group (None: never pulls).
            agent_package: the cached newer agent package for a new container of an image.
        """
        self.config = config
        self.api = api
        self.runtime = runtime
        self.clock = clock
        self.mode = mode
        self.instance = instance_id(config)
        self.labels = instance_labels(config, extra_labels)
        self.rules = config.supervisor
        agents = config.agents
        depth, auto = depth_of(
            agents.standby, least=agents.standby_min, most=agents.standby_max, cap=agents.max_agents
        )
        self.state = EngineState(
            prefix=agents.name_prefix,
            desired=agents.count,
            standby=depth,
            auto=auto,
            schedule=agents.standby_schedule,
            slots=tuple(new_slot(agents.name_prefix, n) for n in range(agents.count)),
            spec=config_hash(config),
        )
        self.group = group
        self.reporter: Reporter = reporter or Broadcaster(clock)
        self.reporter.bind(self.snapshot)
        self._owns_pool = pool is None
        self.pool = pool or PoolObserver(
            api,
            config.azure.pool,
            clock=clock,
            interval=config.supervisor.poll_interval,
            report=self.reporter.event,
            scope=lambda: read_scope(self.config, self.config.azure.pool, host_marker()),
            role_retry=config.supervisor.role_retry,
        )
        self.containers = ContainerObserver(runtime, self.labels, clock=clock)
        self.output = OutputFollower(runtime, clock=clock)
        """Follows each live container's output for what its agent says (hints)."""
        self.executor = Executor(
            config,
            api=api,
            runtime=runtime,
            tokens=tokens,
            pool=self.pool,
            clock=clock,
            extra_labels=extra_labels,
            command=command,
            agent_dir_root=agent_dir_root,
            pull_refusal=pull_refusal,
            puller=puller,
            agent_package=agent_package,
        )
        self._intent = intent_store
        self._on_job_finished = on_job_finished
        self.gpus = SlotGpus(self.instance, clock, gpu_use)
        """Which GPUs each slot watches, their gate readings, what a busy slot's job uses."""
        self.gatekeeper = gatekeeper
        """The host's GPU admission and health watch (``gpu clear``, the GPUs' states)."""
        self.started_at: float | None = None
        self._meta: SnapshotMeta | None = None
        self._inbox: asyncio.Queue[Observation | None] = asyncio.Queue()
        self._tasks = TaskSet(self._kick)
        self._wake_at: float | None = None

    # ================================================================== public API

    @property
    def events(self) -> Any:
        """The recent events (oldest first)."""
        return self.reporter.events

    @property
    def desired(self) -> int:
        """The number of slots wanted now."""
        return self.state.desired

    async def run(self) -> None:
        """Supervise until a `Stop` command (or `request_stop`). Agents stay running."""
        loop = asyncio.get_running_loop()
        self.started_at = self.clock()
        self._load_intent()
        self.containers.follow(loop, self.deliver)
        self.output.bind(loop, self.deliver)
        try:
            self._observe(await self.containers.listing())
            if self._owns_pool:
                self._tasks.spawn(self.pool.run(self._inbox.put_nowait))
            self._tasks.spawn(self.containers.ping_forever(self._inbox.put_nowait))
            await self._loop()
        finally:
            self.containers.stop()
            self.output.stop()
            await self._tasks.cancel()  # bounded (see TaskSet.cancel)
            self.reporter.event("supervisor_stopped", "supervisor stopped; agents left running")
            self.reporter.publish_now()

    def seed_auto(self, seed: AutoSeed) -> None:
        """Start ``standby = "auto"`` from the local history (call before `run`)."""
        if self.state.auto is not None:
            self.state = replace(self.state, auto=seeded(self.state.auto, seed))

    def snapshot(self) -> SupervisorSnapshot:
        """The current state as a frozen snapshot."""
        meta = self._meta or SnapshotMeta(
            org_url=self.config.azure.url,
            pool=self.config.azure.pool,
            instance=self.instance,
            mode=self.mode,
            pid=os.getpid(),
            started_at=self.started_at,
        )
        if self.started_at is not None:
            self._meta = meta
        snap = supervisor_snapshot(
            self.state,
            meta,
            self.clock(),
            azure=self.pool.health,
            azure_requests=self.api.request_count,
            gpus_of=lambda number: self.gpus.ids(self.config, number),
            devices_of=lambda number: device_label(self.config, number),
            group=self.group,
            gpu_now=None if self.gpus.gpu_use is None else self.gpus.job_now,
            gpu_gates=() if self.gatekeeper is None else self.gatekeeper.gates,
            image=self.config.agents.image,
        )
        if self.state.stopping:  # its drains are the stop's (or a removed group's), not the file's
            return snap
        overrides = overrides_in_force(self.state, self.config.agents.count, self.group)
        return replace(snap, overrides=overrides) if overrides else snap

    def reset_overrides(self) -> CommandResult:
        """Drop the operator's overrides (scale, pause, drains): the group runs its file."""
        self.state, result = reset_overrides(self.state, self.config.agents.count)
        self.reporter.event("command", f"reset_overrides: {result.message}")
        self._save_intent()
        self._kick()
        self.reporter.changed()
        return result

    def preview(self, command: Command) -> CommandPreview:
        """What ``command`` would do now, slot by slot (nothing is changed)."""
        return preview(self.snapshot(), command)

    def reconfigure(
        self, config: Config, *, canary: int = 0, canary_jobs: int | None = None
    ) -> CommandResult:
        """Apply this group's part of a re-read configuration, without killing a job.

        Contract (the reload's seam; `GroupSupervisor` calls it once per kept group):
        ``config`` is this group's configuration (as `for_group` makes it). What can
        change live changes: the agent spec (image, volumes, env, memory limit, ...)
        rolls out through the slots (standby lanes first, then idle active lanes, busy
        ones after their job), ``count`` scales, admission applies. ``canary`` slots take
        a new spec first. The answer says what it did; ``snapshot().rollouts`` shows
        the roll-out.
        """
        result = apply_reload(self, config, canary=canary, canary_jobs=canary_jobs)
        self._save_intent()
        self._kick()
        return result

    def preview_reconfigure(self, config: Config, *, canary: int = 0) -> tuple[str, ...]:
        """What `reconfigure` would do with ``config`` now, in words (nothing changes).

        One line per effect, from the engine's rules (e.g. "slots 0-3: standby lanes
        replaced now, 2 idle active lanes after the hand-over, 1 busy lane after its job").
        """
        return preview_reload(self, config, canary=canary)

    def subscribe(self) -> asyncio.Queue[Update]:
        """A queue that receives every event and a snapshot after every change."""
        return self.reporter.subscribe()

    def unsubscribe(self, queue: asyncio.Queue[Update]) -> None:
        """Stop feeding ``queue``."""
        self.reporter.unsubscribe(queue)

    def request_stop(self, drain: bool = False) -> None:
        """Ask `run` to end (call on the loop). Agents stay running unless ``drain``."""
        self.state, _ = apply_command(self.state, Stop(drain=drain))
        self._kick()

    async def execute(self, command: Command) -> CommandResult:
        """Carry out one command and say what it did."""
        if isinstance(command, GpuClear):
            result = clear_gpu(self.gatekeeper, command)
            self.reporter.event("command", f"gpu_clear: {result.message}")
            return result
        self.state, result = apply_command(self.state, command, at=self.clock())
        self.reporter.event("command", f"{type(command).__name__.lower()}: {result.message}")
        self._save_intent()
        self._kick()
        self.pool.poll_soon()
        self.reporter.changed()
        return result

    # ================================================================== the loop

    async def _loop(self) -> None:
        while True:
            self._plan()
            state = self.state
            if state.stopping and (not state.stop_drain or all(s.settled for s in state.slots)):
                return
            timeout = 5.0
            if self._wake_at is not None:
                timeout = min(timeout, max(0.01, self._wake_at - self.clock()))
            try:
                async with asyncio.timeout(timeout):  # not wait_for: see PoolObserver.run
                    item = await self._inbox.get()
            except TimeoutError:
                continue
            self._take(item)
            while not self._inbox.empty():
                self._take(self._inbox.get_nowait())

    def _take(self, item: Observation | None) -> None:
        if item is not None:
            self._observe(item)

    def deliver(self, obs: Observation) -> None:
        """Hand an observation to the loop (call on the loop; e.g. a shared pool's read)."""
        self._inbox.put_nowait(obs)

    def observe(self, obs: Observation) -> None:
        """Fold ``obs`` in now (on the loop, or before `run`): the next plan sees it."""
        self._observe(obs)
        self._kick()

    def _kick(self) -> None:
        """Wake the loop (call on the loop)."""
        self._inbox.put_nowait(None)

    def _observe(self, obs: Observation) -> None:
        if isinstance(obs, Died) and obs.code in REGISTRATION_EXITS:
            self.pool.check_role_soon()  # refused by the organisation? (not the slot's fault)
        step = advance(self.state, obs, self.rules)
        moved = step.state.rollout is not self.state.rollout
        self.state = step.state
        if moved:
            self._save_intent()  # the roll-out's progress survives a restart (`rollout_intent`)
        # Follow what each live container says (a container's facts come from its output).
        self.output.track(
            (slot.number, lane.lane, lane.container_id)
            for slot, lane in self.state.lanes()
            if lane.container_id is not None
        )
        for output in step.outputs:
            if isinstance(output, JobEnded):
                # One read of the agents confirms it (shared by the job ends around it).
                self.pool.job_ended()
            elif isinstance(output, Note) and output.job_started:
                self.pool.job_started()  # how many wait behind it: a queue read, soon
            if isinstance(output, Note):
                report_note(self.reporter, output)
            elif self._on_job_finished is not None:
                try:
                    self._on_job_finished(output)
                except Exception:  # noqa: BLE001 - the history must never stop the engine
                    log.exception("could not record a finished job")
        self.reporter.changed()

    def _plan(self) -> None:
        self.state, plan = decide(self.state, self.clock())
        for number in plan.forgotten:
            self.reporter.event("slot_removed", f"slot {number} retired", number)
        for action in plan.actions:
            self._tasks.spawn(self._carry_out(action))
        self._wake_at = plan.wake_at
        if plan.actions or plan.forgotten:
            self.reporter.changed()

    async def _carry_out(self, action: Action) -> None:
        obs = await self.executor.run(action)
        if obs is not None:
            self._inbox.put_nowait(obs)

    # ================================================================== GPUs (`slot_gpus`)

    @property
    def gpu_admission(self) -> GpuAdmission:
        """This group's admission rule (``gpu_admission``)."""
        return self.config.agents.gpu_admission

    def slot_gpu_ids(self) -> set[str]:
        """Every GPU id its slots use (``all`` for every GPU)."""
        return self.gpus.used(self.config, self.state.slots)

    def observe_gpus(
        self,
        frame: GpuFrame,
        book: HealthBook,
        xids: tuple[tuple[int, int], ...],
        ours: Ours,
        cleared: frozenset[str] = frozenset(),
    ) -> None:
        """Fold one GPU frame into the slots' gates (call on the loop).

        ``cleared``: GPUs (index, UUID or ``all``) an operator has just cleared.
        """
        obs = self.gpus.observation(self.config, self.state.slots, frame, book, xids, ours, cleared)
        if obs is not None:
            self.deliver(obs)

    # ================================================================== helpers

    def _load_intent(self) -> None:
        if self._intent is not None:
            load_intent(self, self._intent.load() or {}, self.executor.specs)

    def _save_intent(self) -> None:
        if self._intent is not None:
            self._intent.save(save_data(self.state, self.executor.specs))
