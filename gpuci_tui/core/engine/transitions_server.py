"""Transitions on what Azure DevOps said: pool reads, our writes and re-reads (pure).

Two rules keep stale answers from undoing fresh knowledge:

* A read that *began* before our last write of a lane's ``enabled`` flag says
  nothing new about that flag (it may show the old value); only the job it
  shows is still news.
* A job or an "online" status counts for the current container only when the
  read began after that container started: the registration may still carry
  the previous container's session or job.
"""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.engine.lifecycle import EngineState, LanePhase, LaneRecord, Op, SlotRecord
from gpuci_tui.core.engine.steps import AgentChecked, AgentWritten, Note, PoolRead, ServerFailed
from gpuci_tui.core.engine.timings import startup_note, with_gap
from gpuci_tui.core.models import JobInfo
from gpuci_tui.core.protocols import Agent, JobRequest


def job_info(request: JobRequest) -> JobInfo:
    """The console's view of a job request."""
    return JobInfo(
        request_id=request.request_id,
        pipeline=request.definition_name,
        run=request.owner_name,
        definition_id=request.definition_id,
        assign_time=request.assign_time,
        result=request.result,
    )


def learn(lane: LaneRecord, agent: Agent | None, read_at: float) -> LaneRecord:
    """Fold one read of the lane's registration (None: not registered) into the lane."""
    current = lane.live and lane.started_at is not None and read_at > lane.started_at
    if read_at >= lane.known_at:
        if agent is None:
            lane = replace(
                lane,
                agent_id=None,
                enabled=None,
                status=None,
                online=False,
                idle_verified=False,
                known_at=read_at,
            )
        else:
            lane = replace(
                lane,
                agent_id=agent.id,
                enabled=agent.enabled,
                status=agent.status,
                idle_verified=agent.enabled is False and agent.assigned_request is None,
                known_at=read_at,
            )
    if not current:
        return lane
    request = agent.assigned_request if agent is not None else None
    online = agent is not None and agent.status == "online"
    if request is not None:
        lane = replace(lane, job=job_info(request), took_job=True, online=True)
    else:
        lane = replace(lane, job=None, online=online or lane.online)
    if lane.op is not Op.START and lane.phase is not LanePhase.STOPPING:
        phase = (
            LanePhase.BUSY if lane.job else LanePhase.READY if lane.online else LanePhase.BOOTING
        )
        lane = replace(lane, phase=phase)
    return lane


def _job_note(before: LaneRecord, after: LaneRecord, slot: int) -> Note | None:
    job = after.job
    if job is None or (before.job is not None and before.job.request_id == job.request_id):
        return None
    return Note("job_assigned", f"{after.name} runs job {job.request_id}", slot, agent=after.name)


def pool_read(state: EngineState, obs: PoolRead) -> tuple[EngineState, tuple[Note, ...]]:
    """A successful read of the whole pool."""
    view = obs.view
    notes: list[Note] = []
    slots: list[SlotRecord] = []
    for slot in state.slots:
        for lane in slot.lanes:
            learned = learn(lane, view.agent(lane.name), view.began_at)
            if (online := startup_note(lane, learned, slot.number, view.began_at)) is not None:
                notes.append(online)
            slot = slot.with_lane(learned)
            if (note := _job_note(lane, learned, slot.number)) is not None:
                note, slot = with_gap(note, slot, view.began_at)
                notes.append(note)
        slots.append(slot)
    # A successful read means the organisation answers: writes may go ahead.
    new = replace(state, slots=tuple(slots), pool=view, server_retry_at=0.0)
    return new, tuple(notes)


def agent_written(state: EngineState, obs: AgentWritten) -> tuple[EngineState, tuple[Note, ...]]:
    """Our PATCH of ``enabled`` returned the agent."""
    slot = state.slot(obs.slot)
    if slot is None:
        return state, ()
    lane = slot.lane(obs.lane)
    agent = obs.agent
    lane = replace(
        lane,
        op=None,
        agent_id=agent.id,
        enabled=agent.enabled,
        status=agent.status,
        # Disabled with no container: no session, so no job can reach it. With a
        # container, a job may have been handed out just before: re-read first.
        idle_verified=agent.enabled is False and not lane.live,
        known_at=obs.at,
    )
    verb = "enabled" if agent.enabled else "disabled"
    note = Note(f"agent_{verb}", f"{lane.name} {verb} on the server", slot.number, agent=lane.name)
    return state.with_slot(slot.with_lane(lane)), (note,)


def agent_checked(state: EngineState, obs: AgentChecked) -> tuple[EngineState, tuple[Note, ...]]:
    """Our re-read of one agent returned (None: the registration is gone)."""
    slot = state.slot(obs.slot)
    if slot is None:
        return state, ()
    before = slot.lane(obs.lane)
    lane = learn(replace(before, op=None), obs.agent, obs.began_at)
    notes: list[Note] = []
    if (online := startup_note(before, lane, slot.number, obs.began_at)) is not None:
        notes.append(online)
    slot = slot.with_lane(lane)
    if (note := _job_note(before, lane, slot.number)) is not None:
        note, slot = with_gap(note, slot, obs.began_at)
        notes.append(note)
    return state.with_slot(slot), tuple(notes)


def server_failed(state: EngineState, obs: ServerFailed) -> EngineState:
    """A write or re-read failed: writes wait; a vanished agent is forgotten."""
    slot = state.slot(obs.slot)
    if slot is None:
        return state
    lane = replace(slot.lane(obs.lane), op=None)
    if obs.gone:
        lane = replace(lane, agent_id=None, enabled=None, status=None, idle_verified=False)
    slot = replace(slot.with_lane(lane), message=f"waiting for Azure DevOps: {obs.message}")
    retry = max(state.server_retry_at, obs.retry_at)
    return replace(state.with_slot(slot), server_retry_at=retry)
