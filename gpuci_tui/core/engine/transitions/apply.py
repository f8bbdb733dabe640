"""Transitions: fold one observation into the engine state (pure).

`apply(state, observation, rules)` returns the next `EngineState` and the
notes it produced (operator events, finished jobs). Container facts are
handled here (a container's end in `transitions_exit`); what the server said
is in `transitions_server`. Nothing here does I/O or reads the clock: every
time comes with the observation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuci_tui.core.engine.agent.start_gate import GoState
from gpuci_tui.core.engine.agent.steps import AgentSaid, GoGiven
from gpuci_tui.core.engine.exits import count_failure, leftover_exit
from gpuci_tui.core.engine.lifecycle import (
    EngineState,
    Lane,
    LanePhase,
    LaneRecord,
    Op,
    SlotRecord,
)
from gpuci_tui.core.engine.server_steps import (
    AgentChecked,
    AgentWritten,
    PoolRead,
    PoolRole,
    PoolUnread,
    QueueRead,
    ServerFailed,
)
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.standby.auto import listed_slots
from gpuci_tui.core.engine.steps import (
    Appeared,
    CudaChecked,
    Destroyed,
    Died,
    EngineAnswered,
    EngineLost,
    GpuObserved,
    Listed,
    LogTail,
    Note,
    Observation,
    OutOfMemory,
    Output,
    PackageCached,
    Removed,
    Started,
    StartFailed,
    Stopped,
    image_used,
)
from gpuci_tui.core.engine.transitions.exit import (
    container_destroyed,
    container_died,
    container_removed,
    forget_container,
)
from gpuci_tui.core.engine.transitions.gpu import cuda_checked, gpu_observed
from gpuci_tui.core.engine.transitions.name_taken import name_taken
from gpuci_tui.core.engine.transitions.output import agent_said, go_given
from gpuci_tui.core.engine.transitions.pull import pull_failed
from gpuci_tui.core.engine.transitions.server import server_step
from gpuci_tui.core.models import ExitInfo, HealthSnapshot, HealthState, ImageUsed
from gpuci_tui.core.protocols import ContainerInfo

#: Pause of every start after the PAT could not be read.
TOKEN_RETRY = 30.0
#: Pause of every start after the engine could not be reached (not counted against a slot).
ENGINE_RETRY = 2.0
#: Pause of a lane's start after its image turned out to have no start gate (not counted).
GATE_RETRY = 1.0

_LIVE_STATUSES = frozenset({"running", "restarting", "paused"})


@dataclass(frozen=True)
class Step:
    """The state after an observation, and what it told the outside world."""

    state: EngineState
    outputs: tuple[Output, ...] = ()


def apply(state: EngineState, obs: Observation, rules: SupervisorConfig) -> Step:
    """Fold ``obs`` into ``state``."""
    match obs:
        case (
            PoolRead()
            | PoolUnread()
            | QueueRead()
            | AgentWritten()
            | AgentChecked()
            | ServerFailed()
            | PoolRole()
        ):
            return Step(*server_step(state, obs))
        case GpuObserved():
            new, notes = gpu_observed(state, obs)
            return Step(new, notes)
        case CudaChecked():
            new, notes = cuda_checked(state, obs)
            return Step(new, notes)
        case PackageCached():
            return Step(replace(state, agent_package=obs.version))
        case Listed():
            return _listed(state, obs, rules)
        case EngineLost():
            health = HealthSnapshot(HealthState.UNREACHABLE, obs.message, obs.at)
            note = Note("docker_error", f"Docker engine lost: {obs.message}")
            return Step(replace(state, docker=health), (note,))
        case EngineAnswered():
            new = replace(state, docker=HealthSnapshot(HealthState.OK, "", obs.at))
            if obs.restored:
                note = Note("docker_restored", "Docker engine back; re-adopting containers")
                return Step(new, (note,))
            return Step(new)
    slot = state.slot(obs.slot)
    if slot is None:
        return Step(state)
    match obs:
        case Started():
            return _started(state, slot, obs, rules)
        case StartFailed():
            return _start_failed(state, slot, obs, rules)
        case Appeared():
            return _appeared(state, slot, obs)
        case Died():
            return Step(*container_died(state, slot, obs, rules))
        case OutOfMemory():
            lane = slot.lane(obs.lane)
            if lane.container_id == obs.container_id:
                return Step(state.with_slot(slot.with_lane(replace(lane, oom=True))))
        case Destroyed():
            return Step(*container_destroyed(state, slot, obs, rules))
        case Stopped():
            return Step(state.with_slot(_stopped(slot, obs)))
        case Removed():
            return Step(*container_removed(state, slot, obs))
        case AgentSaid():
            return Step(*agent_said(state, slot, obs))
        case GoGiven():
            return Step(*go_given(state, slot, obs, rules))
        case LogTail():
            for lane in slot.lanes:  # the read answered: the container may go now
                if lane.reading_logs == obs.container_id:
                    slot = slot.with_lane(replace(lane, reading_logs=None))
            last = slot.last_exit
            if last is not None and not last.log_tail and obs.lines:
                slot = replace(slot, last_exit=replace(last, log_tail=obs.lines))
            return Step(state.with_slot(slot))
    return Step(state)


# --------------------------------------------------------------------------- our own starts


def container_started(
    lane: LaneRecord,
    container_id: str,
    at: float,
    image: ImageUsed | None = None,
    go: GoState = GoState.NONE,
) -> LaneRecord:
    """A container now occupies the lane; the registration facts are kept.

    ``go``: where it is at the start gate (held when we started a gated one).
    """
    return replace(
        lane,
        image=image or ImageUsed(),
        phase=LanePhase.BOOTING,
        container_id=container_id,
        started_at=at,
        op=None,
        retry_at=None,
        conflict_retries=0,
        conflict_since=None,
        name_holder=None,
        oom=False,
        took_job=False,
        job=None,
        seen_job=None,
        stop_requested=False,
        online=False,
        xids=(),
        startup_s=None,
        go=go,
        said_registered=None,
        job_seen_at=0.0,
    )


def _started(state: EngineState, slot: SlotRecord, obs: Started, rules: SupervisorConfig) -> Step:
    lane = slot.lane(obs.lane)
    early, gone = lane.early_exit, lane.early_destroyed
    go = GoState.HELD if obs.gated else GoState.NONE
    lane = replace(
        container_started(lane, obs.container_id, obs.at, obs.image, go),
        early_exit=None,
        early_destroyed=None,
    )
    slot = replace(slot.with_lane(lane), message="")
    state = _spec_gated(state, obs.spec or lane.spec, obs.gated)
    note = Note(
        "container_started",
        f"{lane.name} started ({obs.container_id[:12]})",
        slot.number,
        agent=lane.name,
    )
    step = Step(state.with_slot(slot), (note,))
    if early is not None and early[0] == obs.container_id:
        # It exited before start() returned: its die event was kept for now.
        died = Died(slot.number, obs.lane, early[0], early[1], early[2])
        after, ended = container_died(step.state, slot, died, rules)
        step = Step(after, step.outputs + ended)
        if gone == obs.container_id:
            slot = step.state.slot(slot.number) or slot
            cleared = forget_container(slot.lane(obs.lane), obs.container_id)
            step = Step(step.state.with_slot(slot.with_lane(cleared)), step.outputs)
    return step


def _start_failed(
    state: EngineState, slot: SlotRecord, obs: StartFailed, rules: SupervisorConfig
) -> Step:
    lane = replace(slot.lane(obs.lane), op=None, phase=LanePhase.EMPTY)
    slot = slot.with_lane(lane)
    if obs.kind == "conflict":
        return Step(*name_taken(state, slot, lane, obs, rules))
    if obs.kind == "engine":
        # The engine is down (e.g. dockerd restarting), not the slot's image: counting
        # it as a failed start would park every slot within seconds. Pause all starts.
        slot = replace(slot, message=f"waiting for the Docker engine: {obs.reason}")
        new = replace(
            state.with_slot(slot),
            start_retry_at=obs.at + ENGINE_RETRY,
            docker=HealthSnapshot(HealthState.UNREACHABLE, obs.reason, obs.at),
        )
        return Step(
            new, (Note("docker_error", f"{lane.name}: {obs.reason}", slot.number, agent=lane.name),)
        )
    if obs.kind == "pull":
        return Step(*pull_failed(state, slot, lane, obs))
    if obs.kind == "gate":
        # The image lost its start gate (a re-tagged image): plan its spec without one.
        lane = replace(lane, retry_at=obs.at + GATE_RETRY)
        slot = replace(slot.with_lane(lane), message=f"{lane.name}: {obs.reason}")
        note = Note("start_failed", f"{lane.name}: {obs.reason}", slot.number, agent=lane.name)
        return Step(_spec_gated(state.with_slot(slot), lane.spec, False), (note,))
    if obs.kind == "token":
        slot = replace(slot, message=f"cannot start: {obs.reason}")
        new = replace(state.with_slot(slot), start_retry_at=obs.at + TOKEN_RETRY)
        return Step(new, (Note("token_error", obs.reason, slot.number, agent=lane.name),))
    slot = replace(
        slot, last_exit=ExitInfo(code=None, at=obs.at, reason=f"start failed: {obs.reason}")
    )
    slot = count_failure(slot, f"start failed ({obs.reason})", obs.reason, obs.at, rules)
    notes = [Note("start_failed", f"{lane.name}: {obs.reason}", slot.number, agent=lane.name)]
    if slot.parked:
        notes.append(
            Note("slot_parked", f"{lane.name}: {slot.message}", slot.number, agent=lane.name)
        )
    return Step(state.with_slot(slot), tuple(notes))


# --------------------------------------------------------------------------- Docker's view


def _appeared(state: EngineState, slot: SlotRecord, obs: Appeared) -> Step:
    lane = slot.lane(obs.lane)
    if lane.container_id is not None or lane.live or obs.container_id == lane.dying_id:
        return Step(state)
    # Started by someone else with our labels: adopt rather than duplicate.
    lane = container_started(lane, obs.container_id, obs.at, go=_adopted_go(obs.gated))
    note = Note(
        "container_adopted",
        f"{lane.name} adopted ({obs.container_id[:12]})",
        slot.number,
        agent=lane.name,
    )
    return Step(state.with_slot(slot.with_lane(lane)), (note,))


def _stopped(slot: SlotRecord, obs: Stopped) -> SlotRecord:
    lane = replace(slot.lane(obs.lane), op=None)
    if obs.error is None:
        return slot.with_lane(lane)
    # The container may still run: it is no longer "ours to stop" until re-checked.
    phase = lane.phase
    if lane.live and phase is LanePhase.STOPPING:
        phase = LanePhase.READY if lane.online else LanePhase.BOOTING
    lane = replace(lane, stop_requested=False, phase=phase)
    return replace(slot.with_lane(lane), message=f"stop failed: {obs.error}")


def _listed(state: EngineState, obs: Listed, rules: SupervisorConfig) -> Step:
    """Rebuild the container side from a listing: adopt, never duplicate."""
    live: dict[tuple[int, Lane], list[ContainerInfo]] = {}
    dead: dict[tuple[int, Lane], set[str]] = {}
    corpses: dict[tuple[int, Lane], list[ContainerInfo]] = {}
    for listed in obs.containers:
        info = listed.info
        key = (listed.slot, listed.lane)
        if info.status in _LIVE_STATUSES:
            live.setdefault(key, []).append(info)
        elif info.status in ("created", "exited", "dead"):
            # Half-made (crash between create and start) or left over: clear the name.
            dead.setdefault(key, set()).add(info.id)
            corpses.setdefault(key, []).append(info)
    outputs: list[Output] = []
    gated_ids = {listed.info.id: listed.gated for listed in obs.containers}
    for listed in obs.containers:
        if listed.spec and listed.info.status in _LIVE_STATUSES:
            state = _spec_gated(state, listed.spec, listed.gated)
    state = listed_slots(state, set(live), set(dead))
    for slot in state.slots:
        for lane in slot.lanes:
            key = (slot.number, lane.lane)
            infos = live.get(key, [])
            current = next((i for i in infos if i.id == lane.container_id), None)
            if current is None and infos and lane.op is None and not lane.live:
                current = infos[0]
                gated = gated_ids.get(current.id, False)
                lane = container_started(
                    lane, current.id, current.started_at or obs.at, go=_adopted_go(gated)
                )
                outputs.append(
                    Note(
                        "container_adopted", f"{lane.name} adopted ({current.id[:12]})", slot.number
                    )
                )
            if current is not None and current.image_id:  # the engine's word on what runs
                lane = replace(lane, image=image_used(current, lane.image))
            extra = frozenset(i.id for i in infos if current is None or i.id != current.id)
            stale = frozenset(dead.get(key, set()) - {lane.dying_id})
            lane = replace(lane, extra_ids=extra, stale_ids=stale)
            found = leftover_exit(corpses.get(key, []), obs.at) if slot.last_exit is None else None
            if found is not None:  # died unseen (e.g. before this start): read why, then remove
                slot, lane = replace(slot, last_exit=found[0]), replace(lane, logs_of=found[1])
            if lane.dying_id is not None and lane.dying_id not in dead.get(key, set()):
                lane = replace(lane, dying_id=None, died_at=None)
            slot = slot.with_lane(lane)
            gone = lane.container_id is not None and current is None and lane.op is not Op.START
            state = state.with_slot(slot)
            if gone:
                # Gone while we were not looking (stream gap): count it as an exit.
                assert lane.container_id is not None
                state, ended = container_died(
                    state,
                    slot,
                    Died(slot.number, lane.lane, lane.container_id, None, obs.at),
                    rules,
                )
                outputs = outputs + list(ended)
                slot = state.slot(slot.number) or slot
    docker = HealthSnapshot(HealthState.OK, "", obs.at)
    return Step(replace(state, docker=docker), tuple(outputs))


def _adopted_go(gated: bool) -> GoState:
    """An adopted gated container may be past its gate: counted as given (`GoState.ASSUMED`)."""
    return GoState.ASSUMED if gated else GoState.NONE


def _spec_gated(state: EngineState, spec: str, gated: bool) -> EngineState:
    """``state`` knowing whether new containers of ``spec`` wait at the start gate."""
    if not spec or (spec in state.gated_specs) == gated:
        return state
    specs = state.gated_specs | {spec} if gated else state.gated_specs - {spec}
    return replace(state, gated_specs=specs)
