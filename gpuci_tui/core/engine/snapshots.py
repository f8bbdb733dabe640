"""From the engine state to the frozen snapshots the console, the CLI and the socket speak.

Pure functions: the slot's displayed `SlotState` is derived here, in one place,
from its intent, its lanes' phases and its failure record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace

from gpuci_tui.core.engine.agent.start_gate import GoState
from gpuci_tui.core.engine.gpu_admission import GateKind
from gpuci_tui.core.engine.lifecycle import (
    EngineState,
    Intent,
    LanePhase,
    LaneRecord,
    SlotRecord,
    gate_of,
)
from gpuci_tui.core.engine.rollout.views import rollout_snapshots
from gpuci_tui.core.engine.slot_gate import Gate
from gpuci_tui.core.engine.standby.auto import depth_text
from gpuci_tui.core.engine.waits import long_wait
from gpuci_tui.core.gpu_readings import JobGpuNow
from gpuci_tui.core.models import (
    AgentSnapshot,
    DisabledAgents,
    GpuGateSnapshot,
    HealthSnapshot,
    PoolSummary,
    SlotSnapshot,
    SlotState,
    SupervisorSnapshot,
)

GpuNowOf = Callable[[int, str], JobGpuNow | None]
"""(slot number, agent name) → what that agent's job uses of the GPUs now."""

_PHASE_RANK = {
    LanePhase.BUSY: 0,
    LanePhase.READY: 1,
    LanePhase.BOOTING: 2,
    LanePhase.STARTING: 3,
    LanePhase.STOPPING: 4,
}


@dataclass(frozen=True)
class SnapshotMeta:
    """What a snapshot says about the supervisor itself (fixed for its lifetime)."""

    org_url: str
    pool: str
    instance: str
    mode: str
    pid: int | None
    started_at: float | None


def leaving(slot: SlotRecord, lane: LaneRecord, state: EngineState) -> bool:
    """The lane's container is being replaced (restart) or retired (standby turned off)."""
    if lane.container_id is not None and lane.container_id in slot.restart_ids:
        return True
    return lane.live and lane.lane not in state.used_lanes


def role(slot: SlotRecord, lane: LaneRecord, state: EngineState) -> str:
    """``active``, ``standby``, ``leaving`` or empty (see `AgentSnapshot.role`)."""
    if not lane.live:
        return ""
    if leaving(slot, lane, state) or slot.intent in (Intent.DRAIN, Intent.RETIRE):
        return "leaving"
    if lane.capable:
        return "active"
    return "standby"


def primary(slot: SlotRecord) -> LaneRecord:
    """The lane the slot's row describes: the one that runs or may take a job."""
    capable = [lane for lane in slot.lanes if lane.capable]
    if capable:
        return min(capable, key=lambda lane: (lane.job is None, lane.enabled is not True))
    live = [lane for lane in slot.lanes if lane.live]
    if live:
        return min(live, key=lambda lane: (_PHASE_RANK.get(lane.phase, 9), lane.lane.value))
    return slot.lanes[0]


def slot_state(slot: SlotRecord, now: float, gate: Gate | None = None) -> SlotState:
    """The slot's state as shown to operators (``gate``: its `gate_of`, default its GPUs')."""
    if not slot.live:
        if slot.parked:
            return SlotState.PARKED
        if slot.intent in (Intent.DRAIN, Intent.RETIRE):
            dying = any(lane.dying_id for lane in slot.lanes)
            return SlotState.DRAINING if dying else SlotState.DRAINED
        if slot.backoff_until is not None and slot.backoff_until > now:
            return SlotState.BACKOFF
        return _gated(slot, gate) or SlotState.EMPTY
    if slot.intent in (Intent.DRAIN, Intent.RETIRE):
        return SlotState.DRAINING
    if any(lane.job is not None for lane in slot.lanes if lane.live):
        return SlotState.BUSY
    gated = _gated(slot, gate)
    if gated is not None:
        return gated
    # Idle means "would take a job now": a ready standby alone does not count.
    if any(lane.phase is LanePhase.READY and lane.capable for lane in slot.lanes):
        return SlotState.IDLE
    return SlotState.STARTING


def _gated(slot: SlotRecord, gate: Gate | None) -> SlotState | None:
    """HELD or QUARANTINED for a running slot whose GPUs (or image) keep it from its next job."""
    if slot.intent in (Intent.DRAIN, Intent.RETIRE):
        return None
    kind = (gate or slot.gate).kind
    if kind is GateKind.HELD:
        return SlotState.HELD
    if kind is GateKind.QUARANTINED:
        return SlotState.QUARANTINED
    return None


def standby_label(slot: SlotRecord, state: EngineState) -> str:
    """The hot standby of a slot, in one word (see `SlotSnapshot.standby`)."""
    if not state.standby:
        return "off"
    if slot.intent in (Intent.DRAIN, Intent.RETIRE) or not slot.live:
        return ""
    for lane in slot.lanes:
        if lane.live and not lane.capable and not leaving(slot, lane, state):
            return "ready" if lane.phase is LanePhase.READY else "booting"
    return "pending"


def agent_status(lane: LaneRecord) -> str | None:
    """The agent's status as shown, for the lane's current container.

    Online once that container's agent was seen online (its own line, or a read
    since it started); until then offline, even when the last read showed the
    previous container's agent online (the token sweeper, `observers.token_sweeper`,
    takes "online" to mean the token file is no longer needed).
    """
    if not lane.live:
        return lane.status
    if lane.online:
        return "online"
    return "offline" if lane.status is not None else None


def agent_snapshot(slot: SlotRecord, lane: LaneRecord, state: EngineState) -> AgentSnapshot:
    """One lane, frozen."""
    return AgentSnapshot(
        lane=lane.lane.value,
        name=lane.name,
        phase=lane.phase.value,
        role=role(slot, lane, state),
        container_id=lane.container_id,
        started_at=lane.started_at,
        agent_id=lane.agent_id,
        agent_status=agent_status(lane),
        agent_enabled=lane.enabled,
        job=lane.job,
        image=lane.image.reference,
        image_id=lane.image.image_id,
        repo_digest=lane.image.repo_digest,
        start_gate=lane.live and lane.go is not GoState.NONE,
    )


def slot_snapshot(
    slot: SlotRecord,
    state: EngineState,
    now: float,
    gpus: tuple[str, ...],
    group: str = "",
    gpu_now: GpuNowOf | None = None,
    image: str = "",
    devices: str = "",
) -> SlotSnapshot:
    """One slot, frozen; ``gpu_now`` gives its running job's GPU figures (when measured).

    ``image`` is the configured image; the image id is the one the row's lane runs.
    """
    main = primary(slot)
    running = main if main.job else next((lane for lane in slot.lanes if lane.job), None)
    job = running.job if running is not None else None
    use = None
    if gpu_now is not None and running is not None and running.live:
        use = gpu_now(slot.number, running.name)
    pending_restart = slot.intent is Intent.RESTART and any(
        lane.job is not None and lane.container_id in slot.restart_ids for lane in slot.lanes
    )
    shown = [lane for lane in slot.lanes if lane.lane in state.used_lanes or lane.live]
    gate = gate_of(state, slot)
    return SlotSnapshot(
        slot=slot.number,
        name=main.name,
        state=slot_state(slot, now, gate),
        container_id=main.container_id,
        started_at=main.started_at,
        agent_id=main.agent_id,
        agent_status=agent_status(main),
        agent_enabled=main.enabled,
        job=job,
        gpus=gpus,
        devices=devices,
        last_exit=slot.last_exit,
        failures=slot.failures,
        backoff_until=slot.backoff_until,
        restart_pending=pending_restart,
        message=slot.message or long_wait(slot, now),
        jobs_done=slot.jobs_done,
        intent=slot.intent.value,
        lane=main.lane.value,
        standby=standby_label(slot, state),
        agents=tuple(agent_snapshot(slot, lane, state) for lane in shown),
        group=group,
        gpu_memory_bytes=(
            None if use is None or use.memory_mib is None else round(use.memory_mib * 1024 * 1024)
        ),
        gpu_util_percent=None if use is None else use.util_pct,
        gate=gate.kind.value,
        gate_reason=gate.reason,
        gate_code=gate.code,
        image=image,
        image_id=main.image.image_id,
        repo_digest=main.image.repo_digest,
    )


def pool_summary(state: EngineState, pool_name: str) -> PoolSummary:
    """The pool as last read, with how many disabled agents are our standbys."""
    view = state.pool
    standby = sum(1 for slot, lane in state.lanes() if role(slot, lane, state) == "standby")
    if view is None:
        return PoolSummary(name=pool_name, standby=standby)
    agents = view.agents
    return PoolSummary(
        pool_id=view.pool_id,
        name=pool_name,
        online=sum(1 for a in agents if a.status == "online"),
        offline=sum(1 for a in agents if a.status != "online"),
        disabled=sum(1 for a in agents if not a.enabled),
        queued_jobs=view.queued_jobs,
        running_jobs=running_jobs(state),
        standby=standby,
        disabled_why=disabled_agents(state),
        read_at=view.began_at,
        jobs_read_at=view.jobs_read_at,
        waiting=view.waiting,
        queued_capped=view.queued_capped,
        ours_only=view.ours_only,
    )


def running_jobs(state: EngineState) -> int:
    """Jobs running in the pool now, as fresh as known.

    Our agents' jobs from the engine (a job's end is known when its container
    exits, before any read says so); every other agent's from the last read. Not
    the job requests' count: that read is up to `JOBREQUESTS_INTERVAL` old.
    """
    if state.pool is None:
        return 0
    ours = {lane.name: lane for _, lane in state.lanes()}
    count = 0
    for agent in state.pool.agents:
        lane = ours.get(agent.name)
        count += (
            (lane.job is not None) if lane is not None else (agent.assigned_request is not None)
        )
    return count


def disabled_agents(state: EngineState) -> DisabledAgents:
    """The last pool read's disabled agents, each under the first reason that holds."""
    if state.pool is None:
        return DisabledAgents()
    ours = {lane.name: (slot, lane) for slot, lane in state.lanes()}
    counts = dict.fromkeys(("busy", "leaving", "held", "standby", "idle", "others"), 0)
    for agent in state.pool.agents:
        if agent.enabled:
            continue
        mine = ours.get(agent.name)
        counts[_disabled_reason(agent.assigned_request is not None, mine, state)] += 1
    return DisabledAgents(**counts)


def _disabled_reason(
    assigned: bool, mine: tuple[SlotRecord, LaneRecord] | None, state: EngineState
) -> str:
    if mine is None:
        return "others"
    slot, lane = mine
    if assigned or lane.job is not None:
        return "busy"
    if not lane.live:
        return "idle"
    if role(slot, lane, state) == "leaving":
        return "leaving"
    if gate_of(state, slot).closed:
        return "held"
    return "standby"


def supervisor_snapshot(
    state: EngineState,
    meta: SnapshotMeta,
    now: float,
    *,
    azure: HealthSnapshot,
    azure_requests: int,
    gpus_of: Callable[[int], tuple[str, ...]],
    devices_of: Callable[[int], str] | None = None,
    group: str = "",
    gpu_now: GpuNowOf | None = None,
    gpu_gates: tuple[GpuGateSnapshot, ...] = (),
    image: str = "",
) -> SupervisorSnapshot:
    """The whole supervisor, frozen (``gpu_now``: see `slot_snapshot`; None when not measured).

    ``devices_of`` names a slot's devices when its shape depends on the hardware.

    ``image`` is the image the configuration names for these slots.
    """
    return SupervisorSnapshot(
        taken_at=now,
        org_url=meta.org_url,
        pool=meta.pool,
        instance=meta.instance,
        desired_count=state.desired,
        paused=state.paused,
        stopping=state.stopping,
        mode=meta.mode,
        pid=meta.pid,
        slots=tuple(
            slot_snapshot(
                slot,
                state,
                now,
                gpus_of(slot.number),
                group,
                gpu_now,
                image,
                devices_of(slot.number) if devices_of is not None else "",
            )  # fmt: skip
            for slot in state.slots
        ),
        pool_summary=pool_summary(state, meta.pool),
        azure=azure,
        docker=state.docker,
        azure_requests=azure_requests,
        started_at=meta.started_at,
        standby=bool(state.standby),
        standby_depth=depth_text(state),
        gpu_accounting=gpu_now is not None,
        gpu_gates=gpu_gates,
        rollouts=rollout_snapshots(state, group),
    )


def shared_pool(summaries: list[PoolSummary]) -> PoolSummary:
    """One pool as several groups that use it see it: the same read, their own agents added up.

    Each group gets the same read of the pool, so the pool's counts are the last group's;
    what each group knows of its own agents (standbys, disabled for its reasons) adds up,
    and "others" is what no group claims.
    """
    last = summaries[-1]
    ours = {
        f.name: sum(getattr(s.disabled_why, f.name) for s in summaries)
        for f in fields(DisabledAgents)
        if f.name != "others"
    }
    why = DisabledAgents(**ours, others=max(0, last.disabled - sum(ours.values())))
    return replace(last, standby=sum(s.standby for s in summaries), disabled_why=why)


def pools_total(pools: list[PoolSummary]) -> PoolSummary:
    """Several distinct pools as one line: every count added up."""
    why = DisabledAgents(
        **{
            f.name: sum(getattr(p.disabled_why, f.name) for p in pools)
            for f in fields(DisabledAgents)
        }
    )
    return PoolSummary(
        pool_id=pools[0].pool_id if len(pools) == 1 else None,
        name=", ".join(p.name for p in pools),
        online=sum(p.online for p in pools),
        offline=sum(p.offline for p in pools),
        disabled=sum(p.disabled for p in pools),
        queued_jobs=sum(p.queued_jobs for p in pools),
        running_jobs=sum(p.running_jobs for p in pools),
        standby=sum(p.standby for p in pools),
        disabled_why=why,
        read_at=_oldest(p.read_at for p in pools),
        jobs_read_at=_oldest(p.jobs_read_at for p in pools),
        waiting=tuple(why for p in pools for why in p.waiting),
        queued_capped=any(p.queued_capped for p in pools),
        ours_only=all(p.ours_only for p in pools),
    )


def daemon_uptime(snapshot: SupervisorSnapshot) -> float | None:
    """How long the supervisor had been running when ``snapshot`` was taken (None: not known).

    Both times are read on the supervisor's own clock, so the figure holds whatever the
    skew between its host and the reader's. None, rather than a made-up figure, when the
    snapshot carries no start (a supervisor not started yet, or a daemon that does not
    send it) or when its clock stepped back past the start.
    """
    if snapshot.started_at is None or snapshot.taken_at < snapshot.started_at:
        return None
    return snapshot.taken_at - snapshot.started_at


def _oldest(times: Iterable[float | None]) -> float | None:
    """The oldest of several reads (None when any was never made: not all known)."""
    known = list(times)
    if not known or any(t is None for t in known):
        return None
    return min(t for t in known if t is not None)
