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

from gpuci_tui.core.engine.agent_exit import AGENT_ERROR, CONFIG_FAILED
from gpuci_tui.core.engine.lifecycle import EngineState, LanePhase, LaneRecord, Op, SlotRecord
from gpuci_tui.core.engine.server_steps import (
    AgentChecked,
    AgentWritten,
    PoolRead,
    PoolRole,
    PoolUnread,
    QueueRead,
    ServerFailed,
)
from gpuci_tui.core.engine.steps import Note
from gpuci_tui.core.engine.timings import measured_startup, with_gap
from gpuci_tui.core.models import JobInfo, seen_job
from gpuci_tui.core.protocols import Agent, JobRequest

#: Exit codes of an agent whose registration the organisation may have refused: the
#: emulator and the Python agent program exit 1 on a 403, start.sh 10 (config.sh failed).
REGISTRATION_EXITS = frozenset({AGENT_ERROR, CONFIG_FAILED})
#: What a slot that cannot start says while the organisation refuses the pool.
ORG_WAIT = "waiting for the organisation: "
#: What a slot says while the organisation refuses our calls (`planning.refused`).
REFUSED = "the organisation refuses our calls: "

ServerObservation = (
    PoolRead | PoolUnread | QueueRead | AgentWritten | AgentChecked | ServerFailed | PoolRole
)


def server_step(state: EngineState, obs: ServerObservation) -> tuple[EngineState, tuple[Note, ...]]:
    """Fold in what the organisation said (a read, our write, a re-read, a failure, the role)."""
    match obs:
        case PoolRead():
            return pool_read(state, obs)
        case PoolUnread():
            return pool_unread(state, obs), ()
        case QueueRead():
            return queue_read(state, obs), ()
        case AgentWritten():
            return agent_written(state, obs)
        case AgentChecked():
            return agent_checked(state, obs)
        case ServerFailed():
            return server_failed(state, obs), ()
        case PoolRole():
            return pool_role(state, obs)


def job_info(request: JobRequest) -> JobInfo:
    """The console's view of a job request."""
    return JobInfo(
        request_id=request.request_id,
        pipeline=request.definition_name,
        run=request.owner_name,
        definition_id=request.definition_id,
        assign_time=request.assign_time,
        result=request.result,
        queue_time=request.queue_time,
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
        job = job_info(request)
        if lane.job is not None and not lane.job.request_id:
            job = replace(job, name=lane.job.name)  # the agent's line told of it first
        lane = replace(lane, job=job, seen_job=job, took_job=True, online=True, job_seen_at=read_at)
    elif read_at < lane.job_seen_at:
        # Began before the job was seen (an agent's line): it cannot say the job is over.
        lane = replace(lane, online=online or lane.online)
    else:
        kept = seen_job(lane.seen_job, lane.job)  # a job that ended stays this container's
        lane = replace(lane, job=None, seen_job=kept, online=online or lane.online)
    if lane.op is not Op.START and lane.phase is not LanePhase.STOPPING:
        phase = (
            LanePhase.BUSY if lane.job else LanePhase.READY if lane.online else LanePhase.BOOTING
        )
        lane = replace(lane, phase=phase)
    return lane


def _job_note(before: LaneRecord, after: LaneRecord, slot: int) -> Note | None:
    job = after.job
    if job is None or (before.job is not None and before.job.request_id in (0, job.request_id)):
        return None  # known already (a job only the agent's line told of is the same job)
    return Note("job_assigned", f"{after.name} runs job {job.request_id}", slot, agent=after.name)


def pool_read(state: EngineState, obs: PoolRead) -> tuple[EngineState, tuple[Note, ...]]:
    """A successful read of the whole pool."""
    view = obs.view
    notes: list[Note] = []
    slots: list[SlotRecord] = []
    for slot in state.slots:
        for lane in slot.lanes:
            learned = learn(lane, view.agent(lane.name), view.began_at)
            learned, online = measured_startup(lane, learned, slot.number, view.began_at)
            if online is not None:
                notes.append(online)
            slot = slot.with_lane(learned)
            if (note := _job_note(lane, learned, slot.number)) is not None:
                note, slot = with_gap(note, slot, view.began_at)
                notes.append(note)
        slots.append(slot)
    # A successful read means the organisation answers: writes may go ahead.
    new = replace(state, slots=tuple(slots), pool=view, server_retry_at=0.0)
    return answered(new), tuple(notes)


def answered(state: EngineState) -> EngineState:
    """The organisation answered a call: a refusal is over, and the slots stop saying so."""
    if not state.refusal:
        return state
    slots = tuple(
        replace(slot, message="") if slot.message.startswith(REFUSED) else slot
        for slot in state.slots
    )
    return replace(state, slots=slots, refusal="")


def pool_unread(state: EngineState, obs: PoolUnread) -> EngineState:
    """A read of the pool failed: the organisation refuses our calls; writes wait too.

    The host holds every write until one of its reads is answered anyway
    (`PoolObserver.blocked_until`); knowing it, the engine plans none meanwhile
    and keeps its slots taking jobs in place (`planning.refused`).
    """
    retry = max(state.server_retry_at, obs.retry_at)
    return replace(state, server_retry_at=retry, refusal=obs.message)


def queue_read(state: EngineState, obs: QueueRead) -> EngineState:
    """A read of the queue alone: the pool's job counts move on, its agents stay as read."""
    if state.pool is None:
        return state  # the first read of the pool reads its agents too
    pool = replace(
        state.pool,
        queued_jobs=obs.queued_jobs,
        running_jobs=obs.running_jobs,
        jobs_read_at=obs.at,
        waiting=obs.waiting,
        queued_capped=obs.queued_capped,
    )
    # An answered read, as a read of the agents is: a refusal is over.
    return answered(replace(state, pool=pool, server_retry_at=0.0))


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
        # Disabled with no container, or one held at the start gate: no session, so no
        # job can reach it. Otherwise a job may have been handed out just before:
        # re-read first.
        idle_verified=agent.enabled is False and (not lane.live or lane.held),
        known_at=obs.at,
        in_place=False,  # written: the usual rules have it again
    )
    verb = "enabled" if agent.enabled else "disabled"
    note = Note(f"agent_{verb}", f"{lane.name} {verb} on the server", slot.number, agent=lane.name)
    return answered(state.with_slot(slot.with_lane(lane))), (note,)


def agent_checked(state: EngineState, obs: AgentChecked) -> tuple[EngineState, tuple[Note, ...]]:
    """Our re-read of one agent returned (None: the registration is gone)."""
    slot = state.slot(obs.slot)
    if slot is None:
        return state, ()
    before = slot.lane(obs.lane)
    lane = learn(replace(before, op=None), obs.agent, obs.began_at)
    notes: list[Note] = []
    lane, online = measured_startup(before, lane, slot.number, obs.began_at)
    if online is not None:
        notes.append(online)
    slot = slot.with_lane(lane)
    if (note := _job_note(before, lane, slot.number)) is not None:
        note, slot = with_gap(note, slot, obs.began_at)
        notes.append(note)
    return answered(state.with_slot(slot)), tuple(notes)


def server_failed(state: EngineState, obs: ServerFailed) -> EngineState:
    """A write or re-read failed: writes wait; a vanished agent is forgotten.

    Any failure but "no such agent" (an answer) means the organisation refuses our
    calls (`EngineState.refusal`) until one is answered.
    """
    refusal = state.refusal if obs.gone else obs.message
    slot = state.slot(obs.slot)
    if slot is None:
        return replace(state, refusal=refusal)
    lane = replace(slot.lane(obs.lane), op=None)
    if obs.gone:
        lane = replace(lane, agent_id=None, enabled=None, status=None, idle_verified=False)
    slot = replace(slot.with_lane(lane), message=f"waiting for Azure DevOps: {obs.message}")
    retry = max(state.server_retry_at, obs.retry_at)
    return replace(state.with_slot(slot), server_retry_at=retry, refusal=refusal)


def pool_role(state: EngineState, obs: PoolRole) -> tuple[EngineState, tuple[Note, ...]]:
    """The organisation's word on our identity's pool role: starts wait or resume.

    A refusal is nobody's slot's fault: the failed registrations that led to the
    check are forgiven (a slot parked for them is unparked), so when the role is
    back every slot starts at once, without a backoff or an operator's resume.
    """
    before = state.org_refused
    if obs.refused == before:
        return state, ()
    if obs.refused:
        slots = tuple(_excused(slot) for slot in state.slots)
        note = Note("org_refused", f"agent starts wait: {obs.refused}")
    else:
        slots = tuple(
            replace(slot, message="") if slot.message.startswith(ORG_WAIT) else slot
            for slot in state.slots
        )
        note = Note("org_restored", "the organisation lets us manage the pool again: agents start")
    return replace(state, slots=slots, org_refused=obs.refused), (note,)


def _excused(slot: SlotRecord) -> SlotRecord:
    """``slot`` with the failure streak of its refused registrations forgotten."""
    last = slot.last_exit
    refused = last is not None and last.code in REGISTRATION_EXITS and not last.took_job
    if not refused or not (slot.failures or slot.parked):
        return slot
    return replace(slot, failures=0, parked=False, backoff_until=None, message="")
