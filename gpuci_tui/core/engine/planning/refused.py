"""Planning a running slot while the organisation refuses our calls: intake goes on, in place.

While Azure DevOps refuses the daemon's calls (429, 5xx, unreachable; reads,
writes or both: `EngineState.refusal`, set by a failed call and cleared by the
next answered one), no standby can be enabled and no registration disabled. The
hot standby's hand-over needs both, so intake falls back to the cold path, by rule:

* **In place.** When the active lane's container exits, its registration is
  still enabled: known so, and nothing has been written to it since. That same
  lane is started again at once, without a PATCH: its new container registers
  with ``--replace``, which keeps the flag, so it comes back enabled and takes
  the next job after its start-up. Each lane then runs one job per start-up +
  job, as a slot without standby does. With the start gate its container
  waits for our go, which is written into the container (no call): its
  registration's id and flag are known, so it gets the go at once.
* **No disable while busy.** A busy active lane is never disabled for the
  hand-over (`planning.run`): its registration is disabled after its exit,
  once the standby's enable is confirmed (make before break). Disabled while
  busy, or before that enable is answered, it would come back disabled if the
  refusal began meanwhile, and nothing could be enabled in its place until
  writes work.
* **Standbys stay standbys.** They are not enabled (that is a write) and keep
  their containers: a slot never has two lanes that could take a job
  (`lifecycle`'s rule), whatever the organisation answers.
* **Disabled before.** A lane whose disable went through before the refusal
  began can take no job until writes work; its slot says so.
* **Back.** Once a call is answered, a lane restarted in place that is still
  starting hands over to a ready standby (disable it, confirm it idle, enable
  the standby), so the next job does not wait for a start-up; a busy one
  finishes its job, and its exit enables the standby as usual.

Without standby there is nothing to hand over: the usual rules restart the lane
in place anyway.
"""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.engine.agent.start_gate import GoState
from gpuci_tui.core.engine.lifecycle import Lane, LanePhase, LaneRecord
from gpuci_tui.core.engine.planning.draft import Draft
from gpuci_tui.core.engine.planning.gate import give_go
from gpuci_tui.core.engine.planning.run import left_behind
from gpuci_tui.core.engine.transitions.server import REFUSED

#: What a slot taking jobs in place says (until the first answered call, `answered`).
IN_PLACE = REFUSED + "{name} restarts in place after each job"
#: What a slot says when every registration it could start is disabled on the server.
ALL_DISABLED = REFUSED + "no job until it takes writes again ({names} disabled)"


def steer(draft: Draft, active: LaneRecord | None, used: tuple[Lane, ...]) -> LaneRecord | None:
    """The slot's active lane when a rule of this module decided it; None: the usual rules apply.

    ``active`` is the slot's one lane that could take a job (None: none can);
    ``used`` the lanes the slot runs now.
    """
    if not draft.state.standby:
        return None
    if draft.state.refusal:
        return _while_refused(draft, active, used)
    if active is not None and _serving(draft, active, used):
        return _hand_back(draft, active, used)
    return None


def _serving(draft: Draft, lane: LaneRecord, used: tuple[Lane, ...]) -> bool:
    """``lane`` is one the slot keeps taking jobs with (not beyond the depth, not being replaced)."""
    leaving = lane.container_id is not None and lane.container_id in draft.slot.restart_ids
    return lane.lane in used and not leaving


def _while_refused(
    draft: Draft, active: LaneRecord | None, used: tuple[Lane, ...]
) -> LaneRecord | None:
    if active is not None:
        if active.in_place:
            draft.say(IN_PLACE.format(name=active.name))
        return None  # it takes jobs, or will: nothing to decide
    lanes = [draft.slot.lane(lane) for lane in used]
    gated = [lane for lane in lanes if lane.in_place and lane.held]
    if gated:
        # Restarted in place with the start gate: it waits for our go, which needs no
        # call (its registration's id and flag are known and kept by the re-registration).
        lane = gated[0]
        draft.say(IN_PLACE.format(name=lane.name))
        if lane.go is GoState.HELD and lane.agent_id is not None and lane.enabled is True:
            give_go(draft, lane)
        return lane
    enabled = [lane for lane in lanes if _enabled_offline(lane)]
    if not enabled:
        disabled = [lane.name for lane in lanes if lane.enabled is False]
        if disabled:
            draft.say(ALL_DISABLED.format(names=", ".join(disabled)))
        return None
    # One at most in practice; the one whose container ended last was the active one.
    lane = max(enabled, key=lambda item: (item.ended_at or 0.0, item.lane.value))
    draft.say(IN_PLACE.format(name=lane.name))
    if draft.can_start(lane):
        draft.slot = draft.slot.with_lane(replace(lane, in_place=True))
        draft.start(lane)
    # Not startable yet (its dead container still holds the name, a backoff): it
    # stays the slot's one lane that may take jobs; no standby is enabled meanwhile.
    return lane


def _enabled_offline(lane: LaneRecord) -> bool:
    """No container, and the registration is known enabled with no write of it in flight."""
    return not lane.live and lane.agent_id is not None and lane.enabled is True and lane.op is None


def _hand_back(draft: Draft, active: LaneRecord, used: tuple[Lane, ...]) -> LaneRecord | None:
    """Writes work again: a lane restarted in place and still starting gives way to a ready standby.

    Two steps, each a rule of its own round: disable the starting lane (its
    registration is then written, so it no longer counts as in place), then
    re-read it to confirm it holds no job; once it is disabled and idle, the
    usual rules enable the ready standby (`planner_run._choose_active`).
    """
    if draft.claimed(active) or active.job is not None or not _standby_ready(draft, active, used):
        return None
    if active.in_place and active.enabled is True and active.phase is LanePhase.BOOTING:
        draft.set_enabled(active, False)
        return active
    if active.live and active.enabled is False and not active.idle_verified:
        draft.check(active)
        return active
    return None


def _standby_ready(draft: Draft, active: LaneRecord, used: tuple[Lane, ...]) -> bool:
    """Another lane of the slot is online, disabled and idle, and would be enabled next."""
    return any(
        lane.lane is not active.lane
        and lane.live
        and lane.phase is LanePhase.READY
        and lane.disabled_idle
        and _serving(draft, lane, used)
        and not left_behind(draft.state, draft.slot, lane)
        for lane in draft.slot.lanes
    )
