"""Transitions on what an agent container said and on our go (pure).

The host follows each live container of ours and hands over the lines that
state a fact (`agent.output`). They are *hints*: a job can print anything, so a
line only ever makes the engine *more* careful or tells it sooner what a read
would tell it later:

* ``[start.sh] registered …`` (`AwaitingGo`): a gated container registered and
  waits for our go; the planner reads its id if it does not know it, sets the
  flag, then gives the go (`planning.gate`).
* ``Listening for Jobs``: the agent is online (the lane is ready; its start-up
  is measured).
* ``Running job: NAME``: the lane is busy with NAME, without waiting for a read:
  shown at once, kept by the history, and a container killed from now on lost
  that job (`exits`). Nothing is planned on it: the busy active lane stays
  enabled until its container ends (`planning.run`).
* ``Job NAME completed …``: noted, nothing else. A standby is enabled only when
  Docker says the active container ended, or a read says the active agent is
  disabled and holds no job: a job printing this line cannot put a second job on
  its slot's GPUs.

A fact from a container that is not the lane's current one is ignored.
"""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.engine.agent.output import AwaitingGo, JobCompleted, Listening, RunningJob
from gpuci_tui.core.engine.agent.start_gate import GoState
from gpuci_tui.core.engine.agent.steps import AgentSaid, GoGiven
from gpuci_tui.core.engine.exits import count_failure
from gpuci_tui.core.engine.lifecycle import EngineState, LanePhase, LaneRecord, Op, SlotRecord
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.steps import Note
from gpuci_tui.core.engine.timings import GAP_NOTE, said_startup, with_gap
from gpuci_tui.core.models import JobInfo


def agent_said(
    state: EngineState, slot: SlotRecord, obs: AgentSaid
) -> tuple[EngineState, tuple[Note, ...]]:
    """Fold one fact a container of ``slot`` stated into its lane (a hint, see the module)."""
    before = slot.lane(obs.lane)
    if obs.container_id != before.container_id:
        return state, ()
    fact = obs.fact
    notes: list[Note] = []
    lane = before
    if lane.said_registered is None and not isinstance(fact, JobCompleted):
        # Each of these lines comes only from a registered agent (`gate.identify`).
        lane = replace(lane, said_registered=obs.at)
    match fact:
        case AwaitingGo():
            if before.said_registered is None:
                notes.append(_note(lane, slot, "agent_registered", "registered; waits for the go"))
        case Listening():
            lane = _settled_phase(replace(lane, online=True))
            lane, online = said_startup(before, lane, slot.number, fact.stamp, obs.at)
            if online is not None:
                notes.append(online)
        case RunningJob():
            if lane.job is None:
                job = JobInfo(request_id=0, name=fact.name)
                lane = replace(lane, job=job, took_job=True, online=True, job_seen_at=obs.at)
                lane = _settled_phase(lane)
                note = _note(lane, slot, GAP_NOTE, f"runs job '{fact.name}'")
                note, slot = with_gap(note, slot.with_lane(lane), obs.at)
                notes.append(note)
        case JobCompleted():
            text = f"says job '{fact.name}' completed: {fact.result}"
            notes.append(_note(lane, slot, "agent_job_completed", text))
    return state.with_slot(slot.with_lane(lane)), tuple(notes)


def go_given(
    state: EngineState, slot: SlotRecord, obs: GoGiven, rules: SupervisorConfig
) -> tuple[EngineState, tuple[Note, ...]]:
    """Our go reached the container, or could not be written: then it is stopped, never enabled.

    A container whose go failed is still at the gate (no session, no job): the
    planner stops it at once, and the slot backs off as after a failed start.
    """
    lane = slot.lane(obs.lane)
    if lane.op is Op.GO:
        lane = replace(lane, op=None)
    if obs.container_id != lane.container_id:
        return state.with_slot(slot.with_lane(lane)), ()
    if obs.error is None:
        return state.with_slot(slot.with_lane(lane)), (
            _note(lane, slot, "agent_go", "given the go"),
        )
    lane = replace(lane, go=GoState.REFUSED)
    reason = f"could not give the go: {obs.error}"
    slot = count_failure(slot.with_lane(lane), f"{lane.name}: {reason}", reason, obs.at, rules)
    notes = [Note("start_failed", f"{lane.name}: {reason}", slot.number, agent=lane.name)]
    if slot.parked:
        notes.append(
            Note("slot_parked", f"{lane.name}: {slot.message}", slot.number, agent=lane.name)
        )
    return state.with_slot(slot), tuple(notes)


def _settled_phase(lane: LaneRecord) -> LaneRecord:
    """The phase the lane's facts say, unless a start or a stop of ours is under way."""
    if lane.op is Op.START or lane.phase is LanePhase.STOPPING or not lane.live:
        return lane
    phase = LanePhase.BUSY if lane.job else LanePhase.READY if lane.online else LanePhase.BOOTING
    return replace(lane, phase=phase)


def _note(lane: LaneRecord, slot: SlotRecord, kind: str, text: str) -> Note:
    return Note(kind, f"{lane.name} {text}", slot.number, agent=lane.name)
