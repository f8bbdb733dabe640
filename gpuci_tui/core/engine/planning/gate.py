"""Planning the lanes at the start gate, and reads by name (pure).

A gated container registers its agent and waits for our go (`agent.start_gate`);
until the go it has no session and takes no job, so it never counts as
capable. These rules decide when it gets the go:

* its registration's id and flag must be known. A registration that exists
  keeps its flag through the container's ``config.sh --replace``, so a known
  one is flagged at once, registered yet or not. A name registered for the
  first time comes up enabled: once the container says it registered
  (start.sh's line) it is read once, by name (`ReadAgent`); without the line the
  periodic read finds it;
* a lane that is not to take jobs is disabled first, then gets the go: it
  comes online disabled, a standby;
* the lane that is to take jobs gets the go while no other lane of its slot is
  capable (`choose_held`), so the one-capable-lane rule holds throughout;
* a go that could not be written stops the container (it has no session, so
  no job): it is never enabled.

`identify` is the engine's one way to ask for a read of the organisation
outside the periodic one: one agent, by name, once per fact that says the
agent registered.
"""

from __future__ import annotations

from gpuci_tui.core.engine.agent.start_gate import GoState
from gpuci_tui.core.engine.agent.steps import GiveGo, ReadAgent
from gpuci_tui.core.engine.lifecycle import LanePhase, LaneRecord
from gpuci_tui.core.engine.planning.draft import Draft
from gpuci_tui.core.engine.steps import StopAgent


def identify(draft: Draft, lane: LaneRecord, since: float | None = None) -> bool:
    """Read the lane's agent by name unless a read since ``since`` told already.

    ``since``: when the lane was last said to be registered (default: its own
    record of that, `LaneRecord.said_registered`). Without such a fact nothing is
    read: the periodic read of the pool tells in its time.
    """
    since = lane.said_registered if since is None else since
    if since is None or lane.known_at >= since or not draft.can_write:
        return False
    return draft.act(lane, ReadAgent(draft.slot.number, lane.lane, lane.name))


def give_go(draft: Draft, lane: LaneRecord) -> bool:
    """Plan the go for the lane's container."""
    if lane.container_id is None:
        return False
    return draft.act(lane, GiveGo(draft.slot.number, lane.lane, lane.container_id))


def prepare_held(draft: Draft, lane: LaneRecord) -> None:
    """A held lane that is not to take jobs now: disable its registration, then the go."""
    if draft.claimed(lane):
        return
    if lane.go is GoState.REFUSED:
        stop_held(draft, lane)
    elif lane.agent_id is None:
        identify(draft, lane)  # a new name: read once it says it registered
    elif lane.enabled is not False:
        draft.set_enabled(lane, False)
        draft.say(f"{lane.name} registered: disabling it before its go (standby)")
    elif lane.idle_verified:
        give_go(draft, lane)
    else:
        draft.check(lane)


def stop_refused(draft: Draft) -> None:
    """Stop every container of the slot whose go could not be written (a failed start)."""
    for lane in draft.slot.lanes:
        if lane.held and lane.go is GoState.REFUSED and not draft.claimed(lane):
            stop_held(draft, lane)


def stop_held(draft: Draft, lane: LaneRecord) -> None:
    """Stop a container at the gate: no session, so no job; no read needed first."""
    if lane.container_id is not None and lane.phase is not LanePhase.STOPPING:
        draft.act(lane, StopAgent(draft.slot.number, lane.lane, lane.container_id))


def choose_held(
    draft: Draft, held: list[LaneRecord], standbys: list[LaneRecord]
) -> LaneRecord | None:
    """No lane can take a job and some wait at the gate: pick the one that will.

    A ready standby is enabled first (it takes a job at once); then an enabled
    lane at the gate gets the go; then a booting standby is enabled; else the first
    lane at the gate is the one: it gets the go once its registration is known (a
    new name: once it said it registered and was read), and nothing else is started
    meanwhile.
    """
    ready = [lane for lane in standbys if lane.phase is LanePhase.READY]
    if ready:
        best = min(ready, key=_started)
        draft.set_enabled(best, True)
        return best
    waiting = [lane for lane in held if lane.go is GoState.HELD]
    go_now = [lane for lane in waiting if lane.agent_id is not None and lane.enabled]
    if go_now:
        best = min(go_now, key=_started)
        give_go(draft, best)
        return best
    if standbys:
        best = min(standbys, key=_started)
        draft.set_enabled(best, True)
        return best
    if not waiting:
        return None
    best = min(waiting, key=lambda lane: (lane.agent_id is None, *_started(lane)))
    _prepare_active(draft, best)
    return best


def resend_assumed(draft: Draft, lane: LaneRecord) -> None:
    """An adopted gated container that says it still waits at the gate gets the go again.

    Called only for a lane that may have a session anyway (the slot's one capable
    lane, or a disabled, idle one): a second go file changes nothing for an agent
    already past the gate.
    """
    if (
        lane.go is GoState.ASSUMED
        and lane.said_registered is not None
        and not lane.online
        and lane.job is None
        and not draft.claimed(lane)
    ):
        give_go(draft, lane)


def _prepare_active(draft: Draft, lane: LaneRecord) -> None:
    """The held lane chosen to take jobs: once its registration is known, it gets the go."""
    if draft.claimed(lane):
        return
    if lane.agent_id is None:
        identify(draft, lane)
    elif lane.enabled is True or (lane.enabled is False and lane.idle_verified):
        # Enabled: no other lane is capable. Disabled: it comes up a standby, enabled next.
        give_go(draft, lane)
    else:
        draft.check(lane)


def _started(lane: LaneRecord) -> tuple[float, str]:
    return lane.started_at or 0.0, lane.lane.value
