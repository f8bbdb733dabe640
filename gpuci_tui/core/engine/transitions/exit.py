"""Transitions: a container ends (pure).

A container of ours dies (`Died`: the exit is judged, the job it ran ends, the
slot counts a failure or parks, the lane waits for the dead container to go) and
is then removed (`Destroyed`, or our own `Removed`: its name is free again; when
Docker refuses, the removal is tried again after `REMOVE_RETRY`). A removal seen
without a death (a gap in the event stream) counts as an exit of unknown code.
`transitions.apply` dispatches here; like it, nothing here does I/O or reads the clock.
"""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.engine.exits import judge_exit, settle_exit
from gpuci_tui.core.engine.lifecycle import (
    EngineState,
    Intent,
    LanePhase,
    LaneRecord,
    Op,
    SlotRecord,
)
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.steps import Destroyed, Died, JobEnded, Note, Output, Removed
from gpuci_tui.core.engine.timings import gap_start
from gpuci_tui.core.models import ImageUsed, seen_job

#: Pause before removing a dead container again after Docker refused to.
REMOVE_RETRY = 2.0


def container_died(
    state: EngineState, slot: SlotRecord, obs: Died, rules: SupervisorConfig
) -> tuple[EngineState, tuple[Output, ...]]:
    """A container of ``slot`` died: judge the exit, end its job, free the lane."""
    lane = slot.lane(obs.lane)
    if obs.container_id in lane.extra_ids:
        lane = replace(lane, extra_ids=lane.extra_ids - {obs.container_id})
        return state.with_slot(slot.with_lane(lane)), ()
    if obs.container_id != lane.container_id:
        if lane.op is Op.START and lane.container_id is None:
            lane = replace(lane, early_exit=(obs.container_id, obs.code, obs.at))
            return state.with_slot(slot.with_lane(lane)), ()
        return state, ()
    info, failure = judge_exit(lane, obs.code, obs.at, rules)
    outputs: list[Output] = []
    if lane.took_job or info.took_job:
        outputs.append(
            JobEnded(
                slot.number,
                lane.lane,
                lane.name,
                obs.container_id,
                seen_job(lane.seen_job, lane.job),
                lane.started_at,
                info,
                lane.agent_id,
                lane.xids,
                lane.image,
                lane.startup_s,
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
        seen_job=None,
        took_job=False,
        online=False,
        oom=False,
        xids=(),
        image=ImageUsed(),
        stop_requested=False,
        in_place=False,
        startup_s=None,
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
    if info.lost_job:
        lost = f"{lane.name} lost its job: {info.reason}"
        outputs.insert(1, Note("job_lost", lost, slot.number, agent=lane.name))
    elif lane.took_job or info.took_job:
        outputs.insert(
            1, Note("job_finished", f"{lane.name} finished its job", slot.number, agent=lane.name)
        )
    return state.with_slot(slot), tuple(outputs)


def container_destroyed(
    state: EngineState, slot: SlotRecord, obs: Destroyed, rules: SupervisorConfig
) -> tuple[EngineState, tuple[Output, ...]]:
    """A container of ``slot`` was removed (by us, auto-remove or someone else)."""
    lane = slot.lane(obs.lane)
    known = (lane.dying_id, *lane.extra_ids, *lane.stale_ids)
    if lane.container_id is None and lane.op is Op.START and obs.container_id not in known:
        # Its start has not returned yet: keep the destroy for when it does.
        lane = replace(lane, early_destroyed=obs.container_id)
        return state.with_slot(slot.with_lane(lane)), ()
    if obs.container_id == lane.container_id:
        # Removed without a die we saw (stream gap): an exit of unknown code first.
        died = Died(slot.number, obs.lane, obs.container_id, None, obs.at)
        state, outputs = container_died(state, slot, died, rules)
        slot = state.slot(obs.slot) or slot
        lane = slot.lane(obs.lane)
    else:
        outputs = ()
    lane = forget_container(lane, obs.container_id)
    return state.with_slot(slot.with_lane(lane)), outputs


def container_removed(
    state: EngineState, slot: SlotRecord, obs: Removed
) -> tuple[EngineState, tuple[Note, ...]]:
    """Our removal of a dead container returned: the name is free, or try again shortly."""
    lane = replace(slot.lane(obs.lane), removing=None)
    if obs.error is None:
        lane = forget_container(lane, obs.container_id)
        return state.with_slot(slot.with_lane(lane)), ()
    # Still there, holding the name (no auto-remove will take it): try again shortly.
    first = lane.remove_retry_at is None
    lane = replace(lane, remove_retry_at=obs.at + REMOVE_RETRY)
    message = f"{lane.name}: could not remove {obs.container_id[:12]}: {obs.error}; retrying"
    notes = (Note("docker_error", message, slot.number, agent=lane.name),) if first else ()
    return state.with_slot(slot.with_lane(lane)), notes


def forget_container(lane: LaneRecord, container_id: str) -> LaneRecord:
    """``container_id`` is gone: the lane stops waiting for it (and is empty once all are)."""
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
