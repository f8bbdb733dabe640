"""Transitions: fold one observation into the engine state (pure).

`apply(state, observation, rules)` returns the next `EngineState` and the
notes it produced (operator events, finished jobs). Container facts are
handled here; what the server said is in `transitions_server`. Nothing here
does I/O or reads the clock: every time comes with the observation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuci_tui.core.engine.exits import count_failure, judge_exit, leftover_exit, settle_exit
from gpuci_tui.core.engine.lifecycle import (
    EngineState,
    Intent,
    Lane,
    LanePhase,
    LaneRecord,
    Op,
    SlotRecord,
)
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.standby_auto import listed_slots
from gpuci_tui.core.engine.steps import (
    AgentChecked,
    AgentWritten,
    Appeared,
    CudaChecked,
    Destroyed,
    Died,
    EngineAnswered,
    EngineLost,
    GpuObserved,
    JobEnded,
    Listed,
    LogTail,
    Note,
    Observation,
    OutOfMemory,
    Output,
    PackageCached,
    PoolRead,
    PoolRole,
    Removed,
    ServerFailed,
    Started,
    StartFailed,
    Stopped,
    image_used,
)
from gpuci_tui.core.engine.timings import gap_start
from gpuci_tui.core.engine.transitions_gpu import cuda_checked, gpu_observed
from gpuci_tui.core.engine.transitions_pull import pull_failed
from gpuci_tui.core.engine.transitions_server import server_step
from gpuci_tui.core.models import ExitInfo, HealthSnapshot, HealthState, ImageUsed
from gpuci_tui.core.protocols import ContainerInfo

#: Pause of every start after the PAT could not be read.
TOKEN_RETRY = 30.0
#: Pause of every start after the engine could not be reached (not counted against a slot).
ENGINE_RETRY = 2.0
#: Pause before removing a dead container again after Docker refused to.
REMOVE_RETRY = 2.0

_LIVE_STATUSES = frozenset({"running", "restarting", "paused"})


@dataclass(frozen=True)
class Step:
    """The state after an observation, and what it told the outside world."""

    state: EngineState
    outputs: tuple[Output, ...] = ()


def apply(state: EngineState, obs: Observation, rules: SupervisorConfig) -> Step:
    """Fold ``obs`` into ``state``."""
    match obs:
        case PoolRead() | AgentWritten() | AgentChecked() | ServerFailed() | PoolRole():
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
            return _died(state, slot, obs, rules)
        case OutOfMemory():
            lane = slot.lane(obs.lane)
            if lane.container_id == obs.container_id:
                return Step(state.with_slot(slot.with_lane(replace(lane, oom=True))))
        case Destroyed():
            return _destroyed(state, slot, obs, rules)
        case Stopped():
            return Step(state.with_slot(_stopped(slot, obs)))
        case Removed():
            return _removed(state, slot, obs)
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
    lane: LaneRecord, container_id: str, at: float, image: ImageUsed | None = None
) -> LaneRecord:
    """A container now occupies the lane; the registration facts are kept."""
    return replace(
        lane,
        image=image or ImageUsed(),
        phase=LanePhase.BOOTING,
        container_id=container_id,
        started_at=at,
        op=None,
        retry_at=None,
        conflict_retries=0,
        oom=False,
        took_job=False,
        job=None,
        stop_requested=False,
        online=False,
        xids=(),
    )


def _started(state: EngineState, slot: SlotRecord, obs: Started, rules: SupervisorConfig) -> Step:
    lane = slot.lane(obs.lane)
    early, gone = lane.early_exit, lane.early_destroyed
    lane = replace(
        container_started(lane, obs.container_id, obs.at, obs.image),
        early_exit=None,
        early_destroyed=None,
    )
    slot = replace(slot.with_lane(lane), message="")
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
        after = _died(step.state, slot, died, rules)
        step = Step(after.state, step.outputs + after.outputs)
        if gone == obs.container_id:
            slot = step.state.slot(slot.number) or slot
            cleared = _forget_container(slot.lane(obs.lane), obs.container_id)
            step = Step(step.state.with_slot(slot.with_lane(cleared)), step.outputs)
    return step


def _start_failed(
    state: EngineState, slot: SlotRecord, obs: StartFailed, rules: SupervisorConfig
) -> Step:
    lane = replace(slot.lane(obs.lane), op=None, phase=LanePhase.EMPTY)
    slot = slot.with_lane(lane)
    if obs.kind == "conflict":
        retries = lane.conflict_retries + 1
        lane = replace(lane, conflict_retries=retries, retry_at=obs.at + min(0.1 * retries, 2.0))
        slot = replace(
            slot.with_lane(lane),
            message="waiting for the previous container's name to be released",
        )
        return Step(state.with_slot(slot))
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
    lane = container_started(lane, obs.container_id, obs.at)
    note = Note(
        "container_adopted",
        f"{lane.name} adopted ({obs.container_id[:12]})",
        slot.number,
        agent=lane.name,
    )
    return Step(state.with_slot(slot.with_lane(lane)), (note,))


def _died(state: EngineState, slot: SlotRecord, obs: Died, rules: SupervisorConfig) -> Step:
    lane = slot.lane(obs.lane)
    if obs.container_id in lane.extra_ids:
        lane = replace(lane, extra_ids=lane.extra_ids - {obs.container_id})
        return Step(state.with_slot(slot.with_lane(lane)))
    if obs.container_id != lane.container_id:
        if lane.op is Op.START and lane.container_id is None:
            lane = replace(lane, early_exit=(obs.container_id, obs.code, obs.at))
            return Step(state.with_slot(slot.with_lane(lane)))
        return Step(state)
    info, failure = judge_exit(lane, obs.code, obs.at, rules)
    outputs: list[Output] = []
    if lane.took_job or info.took_job:
        outputs.append(
            JobEnded(
                slot.number,
                lane.lane,
                lane.name,
                obs.container_id,
                lane.job,
                lane.started_at,
                info,
                lane.agent_id,
                lane.xids,
                lane.image,
            )
        )
    ended = replace(
        lane,
        phase=LanePhase.EXITED,
        container_id=None,
        started_at=None,
        dying_id=obs.container_id,
        died_at=obs.at,
        remove_retry_at=None,
        ended_at=obs.at,
        job=None,
        took_job=False,
        online=False,
        oom=False,
        xids=(),
        image=ImageUsed(),
        stop_requested=False,
        logs_of=obs.container_id if failure else lane.logs_of,
        # A registration disabled before its container ended can take no job any more.
        idle_verified=lane.enabled is False,
    )
    slot = replace(
        slot.with_lane(ended),
        last_exit=info,
        jobs_done=slot.jobs_done + (1 if lane.took_job else 0),
        restart_ids=slot.restart_ids - {obs.container_id},
        job_gap_from=gap_start(slot, lane, lane.took_job or info.took_job, obs.at),
    )
    # While the organisation refuses the pool, a failed registration is not the slot's.
    judged = (failure and not state.org_refused, info.reason)
    slot, updating = settle_exit(slot, lane, obs.code, judged, obs.at, rules)
    if slot.intent in (Intent.DRAIN, Intent.RETIRE) and not slot.live:
        slot = replace(slot, message="drained")
    kind = "slot_parked" if slot.parked else "agent_updating" if updating else "container_exited"
    outputs.insert(
        0, Note(kind, f"{lane.name} exited: {info.reason}", slot.number, agent=lane.name)
    )
    if lane.took_job or info.took_job:
        outputs.insert(
            1, Note("job_finished", f"{lane.name} finished its job", slot.number, agent=lane.name)
        )
    return Step(state.with_slot(slot), tuple(outputs))


def _destroyed(
    state: EngineState, slot: SlotRecord, obs: Destroyed, rules: SupervisorConfig
) -> Step:
    lane = slot.lane(obs.lane)
    known = (lane.dying_id, *lane.extra_ids, *lane.stale_ids)
    if lane.container_id is None and lane.op is Op.START and obs.container_id not in known:
        # Its start has not returned yet: keep the destroy for when it does.
        lane = replace(lane, early_destroyed=obs.container_id)
        return Step(state.with_slot(slot.with_lane(lane)))
    if obs.container_id == lane.container_id:
        # Removed without a die we saw (stream gap): an exit of unknown code first.
        died = Died(slot.number, obs.lane, obs.container_id, None, obs.at)
        step = _died(state, slot, died, rules)
        state, outputs = step.state, step.outputs
        slot = state.slot(obs.slot) or slot
        lane = slot.lane(obs.lane)
    else:
        outputs = ()
    lane = _forget_container(lane, obs.container_id)
    return Step(state.with_slot(slot.with_lane(lane)), outputs)


def _removed(state: EngineState, slot: SlotRecord, obs: Removed) -> Step:
    lane = replace(slot.lane(obs.lane), removing=None)
    if obs.error is None:
        lane = _forget_container(lane, obs.container_id)
        return Step(state.with_slot(slot.with_lane(lane)))
    # Still there, holding the name (no auto-remove will take it): try again shortly.
    first = lane.remove_retry_at is None
    lane = replace(lane, remove_retry_at=obs.at + REMOVE_RETRY)
    message = f"{lane.name}: could not remove {obs.container_id[:12]}: {obs.error}; retrying"
    notes = (Note("docker_error", message, slot.number, agent=lane.name),) if first else ()
    return Step(state.with_slot(slot.with_lane(lane)), notes)


def _forget_container(lane: LaneRecord, container_id: str) -> LaneRecord:
    if lane.dying_id == container_id:
        lane = replace(lane, dying_id=None, died_at=None)
    lane = replace(
        lane, extra_ids=lane.extra_ids - {container_id}, stale_ids=lane.stale_ids - {container_id}
    )
    if lane.dying_id is None and not lane.stale_ids:
        lane = replace(lane, remove_retry_at=None)
    if not lane.live and lane.dying_id is None and lane.phase is LanePhase.EXITED:
        lane = replace(lane, phase=LanePhase.EMPTY)
    return lane


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
    state = listed_slots(state, set(live), set(dead))
    for slot in state.slots:
        for lane in slot.lanes:
            key = (slot.number, lane.lane)
            infos = live.get(key, [])
            current = next((i for i in infos if i.id == lane.container_id), None)
            if current is None and infos and lane.op is None and not lane.live:
                current = infos[0]
                lane = container_started(lane, current.id, current.started_at or obs.at)
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
                step = _died(
                    state,
                    slot,
                    Died(slot.number, lane.lane, lane.container_id, None, obs.at),
                    rules,
                )
                state, outputs = step.state, outputs + list(step.outputs)
                slot = state.slot(slot.number) or slot
    docker = HealthSnapshot(HealthState.OK, "", obs.at)
    return Step(replace(state, docker=docker), tuple(outputs))
