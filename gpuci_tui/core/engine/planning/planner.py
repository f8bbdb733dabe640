"""The planner: one pure function from the engine state and the time to the next actions.

`decide(state, now)` looks at every slot (intent, lanes, what the pool,
Docker and the agents' own lines last said) and returns the I/O steps to take
now and when to look again. The returned state
marks those steps as in flight, so the same step is never planned twice. The
supervisor's loop only carries the actions out and feeds their results back
as observations (`transitions.apply`).

The rules for taking a lane out of service live here (drain, retire, restart);
which lane of a running slot takes jobs, and the hot standby, in `planner_run`;
how its intake goes on while the organisation refuses our calls, in `planning.refused`;
a running slot whose GPUs are held or quarantined, or whose image the driver cannot
run, in `planner_hold`.
Every rule keeps the one safety promise of `lifecycle`: a second lane of a
slot is never enabled or started in a way that lets it take a job while the
other one could.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gpuci_tui.core.engine.agent.start_gate import GoState
from gpuci_tui.core.engine.agent.steps import GiveGo, ReadAgent
from gpuci_tui.core.engine.lifecycle import (
    EngineState,
    Intent,
    LanePhase,
    LaneRecord,
    Op,
    SlotRecord,
    gate_of,
)
from gpuci_tui.core.engine.planning.draft import Draft
from gpuci_tui.core.engine.planning.hold import plan_held
from gpuci_tui.core.engine.planning.refused import steer
from gpuci_tui.core.engine.planning.run import plan_run, take_out
from gpuci_tui.core.engine.rollout.progress import mark_outdated
from gpuci_tui.core.engine.server_steps import CheckAgent, SetEnabled
from gpuci_tui.core.engine.standby.auto import next_change_at, observe, retire_at, widened
from gpuci_tui.core.engine.steps import Action, FetchLogs, RemoveContainer, StartAgent, StopAgent
from gpuci_tui.core.engine.transitions.server import ORG_WAIT


@dataclass(frozen=True)
class Plan:
    """What the loop should do now."""

    actions: tuple[Action, ...] = ()
    wake_at: float | None = None
    """Plan again at this time even if nothing is observed (backoff end, grace end)."""
    forgotten: tuple[int, ...] = field(default=())
    """Retired slots dropped from the state by this decision."""


def decide(state: EngineState, now: float) -> tuple[EngineState, Plan]:
    """Plan every slot; return the state with the planned steps marked in flight."""
    if state.stopping and not state.stop_drain:
        return state, Plan()
    actions: list[Action] = []
    wakes: list[float] = [t for t in (state.start_retry_at, state.server_retry_at) if t > now]
    forgotten: list[int] = []
    # "auto" standby: the depth the queue asks for, and when its hold-down ends.
    state = observe(state, now)
    if (retire := retire_at(state)) is not None and retire > now:
        wakes.append(retire)
    if (change := next_change_at(state)) is not None and change > now:
        wakes.append(change)  # the schedule's next count applies on its second
    for slot in state.slots:
        # A container on another spec than its slot's target is replaced like a restart.
        slot = _finish_restart(mark_outdated(state, slot))
        # A deeper standby needs more lanes than the slot has records for.
        slot = widened(slot, state.prefix, state.lane_count)
        if slot.intent is Intent.RETIRE and slot.settled:
            state = state.without_slot(slot.number)
            forgotten.append(slot.number)
            continue
        draft = Draft(state=state, slot=slot, now=now)
        _housekeeping(draft)
        if slot.intent in (Intent.DRAIN, Intent.RETIRE) or (state.stopping and state.stop_drain):
            for lane in slot.lanes:
                take_out(draft, lane, "draining")
            if not slot.live:
                draft.say("drained")
        elif gate_of(state, slot).closed:
            plan_held(draft)
        else:
            used = state.used_lanes
            if state.org_refused and any(not x.live for x in slot.lanes if x.lane in used):
                draft.say(f"{ORG_WAIT}{state.org_refused}")
            plan_run(draft, steer)  # an organisation that refuses our calls: `refused`
        slot = _mark(draft)
        state = state.with_slot(slot)
        actions.extend(draft.actions)
        wakes.extend(draft.wakes)
        if slot.backoff_until is not None and slot.backoff_until > now:
            wakes.append(slot.backoff_until)
    wake = min(wakes) if wakes else None
    return state, Plan(tuple(actions), wake, tuple(forgotten))


def _finish_restart(slot: SlotRecord) -> SlotRecord:
    """A restart is over once none of the containers it had to replace is left."""
    if slot.intent is not Intent.RESTART:
        return slot
    remaining = {lane.container_id for lane in slot.lanes} & slot.restart_ids
    if remaining:
        return slot
    return replace(slot, intent=Intent.RUN, restart_ids=frozenset(), spec_ids=frozenset())


def _housekeeping(draft: Draft) -> None:
    """Dead containers that still hold a name, leftovers, log tails of failures.

    Agent containers run without Docker's auto-remove (it drops the logs with the
    container, ~100 ms after ``die``), so a dead one is removed here, at once: its
    lane's name is free only after that, and the refill waits for it. A failed
    container's tail is read first; the removal follows the read's answer.
    """
    for lane in draft.slot.lanes:
        if lane.logs_of is not None:
            draft.act(lane, FetchLogs(draft.slot.number, lane.logs_of))
        _remove_dead(draft, lane)
        if lane.op is not None:
            continue
        if lane.retry_at is not None and lane.retry_at > draft.now:
            draft.wakes.append(lane.retry_at)


def _remove_dead(draft: Draft, lane: LaneRecord) -> None:
    """Remove the lane's dead container, else one leftover, unless its tail is still read."""
    if lane.removing is not None:
        return
    if lane.remove_retry_at is not None and lane.remove_retry_at > draft.now:
        draft.wakes.append(lane.remove_retry_at)  # the last removal failed
        return
    tails = {lane.logs_of, lane.reading_logs}
    if lane.dying_id is not None:
        if lane.dying_id not in tails:
            draft.act(lane, RemoveContainer(draft.slot.number, lane.lane, lane.dying_id))
    elif lane.stale_ids - tails:
        stale = min(lane.stale_ids - tails)
        draft.act(lane, RemoveContainer(draft.slot.number, lane.lane, stale))


def _mark(draft: Draft) -> SlotRecord:
    """The slot with every planned step marked in flight on its lane."""
    slot = draft.slot
    for lane_id, action in draft.by_lane:
        lane = slot.lane(lane_id)
        slot = slot.with_lane(_in_flight(lane, action))
    if draft.message is not None and not slot.parked and not _backing_off(slot, draft.now):
        slot = replace(slot, message=draft.message)
    return slot


def _in_flight(lane: LaneRecord, action: Action) -> LaneRecord:
    if isinstance(action, StartAgent):
        go = GoState.HELD if action.gated else GoState.NONE
        return replace(
            lane, op=Op.START, phase=LanePhase.STARTING, early_exit=None, spec=action.spec, go=go
        )
    if isinstance(action, GiveGo):
        return replace(lane, op=Op.GO, go=GoState.GIVEN)
    if isinstance(action, StopAgent):
        return replace(lane, op=Op.STOP, phase=LanePhase.STOPPING, stop_requested=True)
    if isinstance(action, RemoveContainer):
        return replace(lane, removing=action.container_id)
    if isinstance(action, SetEnabled):
        return replace(lane, op=Op.ENABLE if action.enabled else Op.DISABLE)
    if isinstance(action, CheckAgent | ReadAgent):
        return replace(lane, op=Op.CHECK)
    if isinstance(action, FetchLogs):
        return replace(lane, logs_of=None, reading_logs=action.container_id)
    raise AssertionError(f"unknown action {action!r}")


def _backing_off(slot: SlotRecord, now: float) -> bool:
    return slot.backoff_until is not None and slot.backoff_until > now
