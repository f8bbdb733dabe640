"""Planning a running slot: which lane takes jobs, the hot standby, taking lanes out.

A running slot wants exactly one *active* lane (enabled, taking jobs) and,
with standby on, its other used lanes *ready* (one per standby, see
`standby_auto`): containers up, agents online but disabled. When the active
agent's container exits after its job, a standby is enabled at once (one
PATCH, the first write) and a fresh container is started for the exited lane,
which comes back disabled because a re-registration keeps the ``enabled`` flag
(so that flag is set to False before the new start). Make before break: the
exited lane is disabled only once the standby's enable is confirmed, never
while it runs its job nor in the same round as that enable. Until then it is
the slot's enabled registration, so that if the organisation refuses the
enable (or any write) it restarts in place and keeps taking jobs
(`planning.refused`); disabled first, the slot would be left with no enabled
lane and nothing able to enable one until writes work. Offline, it takes no
job meanwhile, and it is not started again before its disable is answered.

A lane name that was never registered comes back *enabled* when first
registered. With an image that has the start gate (`planning.gate`) that is
harmless: the container waits for our go after registering, and is disabled
before it gets it, so a further lane is registered whenever it is wanted. For
an image without the gate a further lane of a slot is only ever registered
for the first time while no other lane can take a job (disabled and confirmed
idle, or gone): a one-time bootstrap per name, after which the registration
exists.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuci_tui.core.engine.lifecycle import (
    EngineState,
    Intent,
    Lane,
    LanePhase,
    LaneRecord,
    Op,
    SlotRecord,
)
from gpuci_tui.core.engine.planning.draft import Draft
from gpuci_tui.core.engine.planning.gate import (
    choose_held,
    identify,
    prepare_held,
    resend_assumed,
    stop_held,
    stop_refused,
)
from gpuci_tui.core.engine.standby.auto import registering, unused_why, within_cap
from gpuci_tui.core.engine.steps import (
    StopAgent,
)

_PHASE_RANK = {LanePhase.READY: 0, LanePhase.BOOTING: 1, LanePhase.STARTING: 2}


def absent(lane: LaneRecord) -> bool:
    """A read newer than the lane's last container showed no registration of its name."""
    return not lane.may_be_registered and lane.known_at > 0


def take_out(draft: Draft, lane: LaneRecord, why: str) -> None:
    """Take a lane out of service: disable, confirm it holds no job, then stop it.

    A busy lane is disabled and left to finish its job: its container exits by
    itself (``--once``). Nothing is ever stopped without a read, made after the
    disable, that shows no job.
    """
    if not lane.live or draft.claimed(lane) or lane.phase is LanePhase.STOPPING:
        return
    if lane.held:
        stop_held(draft, lane)
        draft.say(f"{why}: stopping {lane.name} at its start gate (no job possible)")
        return
    if lane.job is not None:
        if lane.enabled is not False:
            draft.set_enabled(lane, False)
        draft.say(f"{why}: waiting for job {lane.job.request_id}")
        return
    if lane.agent_id is None:
        identify(draft, lane)
        draft.say("waiting for the agent to register before disabling it")
        return
    if lane.enabled is not False:
        draft.set_enabled(lane, False)
        draft.say(f"{why}: disabling {lane.name} on the server")
    elif not lane.idle_verified:
        draft.check(lane)
        draft.say(f"{why}: re-checking that {lane.name} has no job")
    else:
        container_id = lane.container_id
        if container_id is not None:
            draft.act(lane, StopAgent(draft.slot.number, lane.lane, container_id))
            draft.say("disabled and idle: stopping")


def leaving_why(slot: SlotRecord, lane: LaneRecord) -> str:
    """Why a lane in ``restart_ids`` goes: an operator's restart, or a new agent spec."""
    return "new agent spec" if lane.container_id in slot.spec_ids else "restart"


#: A rule that may decide a running slot's active lane before the usual ones (`plan_run`):
#: given the draft, the one lane that could take a job (None: none) and the lanes in use,
#: it plans what it decides and returns the active lane, or None to leave it to them.
Steer = Callable[[Draft, LaneRecord | None, tuple[Lane, ...]], LaneRecord | None]


def plan_run(draft: Draft, steer: Steer | None = None) -> None:
    """Plan a slot whose intent is RUN or RESTART.

    ``steer`` decides first when it can (the planner passes `planning.refused`'s rules
    for an organisation that refuses our calls; they build on this module, so it is
    handed in rather than imported).
    """
    slot = draft.slot
    used = used_lanes(draft)

    def leaving(lane: LaneRecord) -> bool:
        return lane.container_id is not None and lane.container_id in slot.restart_ids

    stop_refused(draft)
    capable = [lane for lane in slot.lanes if lane.capable]
    if len(capable) > 1:
        _settle_conflict(draft, capable, used)
        return
    active = capable[0] if capable else None
    steered = steer(draft, active, used) if steer is not None else None
    if steered is not None:
        active = steered
    elif active is not None:
        if active.lane not in used or leaving(active):
            why = leaving_why(slot, active) if leaving(active) else unused_why(draft.state)
            fresh = _fresh_standby_coming(draft, active, used)
            if leaving(active) and not active.busy and fresh:
                draft.say(f"{why}: {active.name} serves until the fresh standby is ready")
            else:
                take_out(draft, active, why)
        else:
            resend_assumed(draft, active)
    else:
        active = _choose_active(draft, used, leaving)
    for lane in slot.lanes:
        if active is not None and lane.lane is active.lane:
            continue
        if lane.lane not in used or leaving(lane):
            take_out(
                draft, lane, leaving_why(slot, lane) if leaving(lane) else unused_why(draft.state)
            )
        elif active is not None:
            # With no active lane chosen yet (names still held, paused, backing off)
            # no lane is "the other one": nothing to prepare.
            _standby(draft, lane, active)


def used_lanes(draft: Draft) -> tuple[Lane, ...]:
    """The lanes the slot runs now: the standby depth's, and one being registered ("auto")."""
    fresh = [lane for lane in draft.slot.lanes if absent(lane)]
    used = within_cap(draft.state, draft.state.used_lanes, fresh)
    extra = registering(draft.state, draft.slot, fresh)
    return used if extra is None else (*used, extra)


def _rank(lane: LaneRecord) -> tuple[int, float, str]:
    # Among booting standbys, the one started first is online first (deeper standbys
    # restart one after another, not in lane order).
    return _PHASE_RANK.get(lane.phase, 3), lane.started_at or 0.0, lane.lane.value


def _choose_active(
    draft: Draft, used: tuple[Lane, ...], leaving: Callable[[LaneRecord], bool]
) -> LaneRecord | None:
    """No lane can take a job: pick the one that will, and start or enable it."""
    lanes = [draft.slot.lane(lane_id) for lane_id in used]
    standbys = [
        lane
        for lane in lanes
        if lane.live
        and lane.disabled_idle
        and not lane.held
        and not lane.took_job  # ran its one job (--once): it is leaving
        and not leaving(lane)
        and lane.phase is not LanePhase.STOPPING
        and not left_behind(draft.state, draft.slot, lane)
    ]
    held = [lane for lane in lanes if lane.held and not leaving(lane)]
    if held and (chosen := choose_held(draft, held, standbys)) is not None:
        return chosen  # lanes at the start gate: `planning.gate`
    # A registration that comes up enabled: never registered (done once per name,
    # ever), or enabled already (e.g. just enabled to be started as the active one).
    enabled = [
        lane
        for lane in lanes
        if (absent(lane) or (lane.agent_id is not None and lane.enabled is True))
        and draft.can_start(lane)
    ]
    # A standby comes before a registration known enabled whose container exited: that
    # one is the exited active lane, kept enabled until a standby's enable is confirmed
    # (`_standby`); restarted before, it would take the standby's place with a start-up.
    fresh = [lane for lane in enabled if absent(lane)]
    if fresh:
        draft.start(fresh[0])
        return fresh[0]
    if standbys:
        best = min(standbys, key=_rank)
        draft.set_enabled(best, True)
        return best
    if enabled:
        draft.start(enabled[0])
        return enabled[0]
    startable = [lane for lane in lanes if not lane.live and draft.can_start(lane)]
    if not startable:
        return None
    lane = min(startable, key=lambda item: (item.enabled is False, item.lane.value))
    if lane.enabled is False and draft.can_write:
        # Enable the (offline) registration first: the agent then comes up ready.
        draft.set_enabled(lane, True)
    else:
        draft.start(lane)
    return lane


def left_behind(state: EngineState, slot: SlotRecord, lane: LaneRecord) -> bool:
    """An agent of the slot left to update and this lane's container predates that exit.

    Without the cached package its agent would leave too at its first job (a second
    update exit on the slot): it is not enabled; the slot starts a fresh container,
    which gets the package, and the old one is replaced as outdated once it is cached.
    """
    first = slot.update_exit_at
    if first is None or (lane.started_at or 0.0) >= first:
        return False
    return not lane.package or lane.package != state.agent_package


def _standby(draft: Draft, lane: LaneRecord, active: LaneRecord | None) -> None:
    """Rules for the lane that is not the active one of a running slot."""
    if draft.claimed(lane):
        return
    if lane.held:
        if lane.enabled is True and not _enable_confirmed(active):
            return  # make before break, as below: no session, so no job meanwhile
        prepare_held(draft, lane)  # at the start gate: disabled, then the go
        return
    if lane.live:
        if lane.disabled_idle:
            resend_assumed(draft, lane)
        elif lane.enabled is False and lane.job is None:
            draft.check(lane)
        return
    if lane.agent_id is not None and lane.enabled is not False:
        # Its next container must come back disabled: set the flag while none runs. Make
        # before break: only once the active lane's enable is confirmed. Until then this
        # registration stays the slot's enabled one, so if the organisation refuses that
        # enable, this lane restarts in place (`planning.refused`) instead of the slot
        # being left with no enabled lane. Offline, it takes no job meanwhile.
        if _enable_confirmed(active):
            draft.set_enabled(lane, False)
        return
    if not draft.can_start(lane):
        return
    if (lane.agent_id is not None and lane.enabled is False) or draft.gated:
        # With the start gate, a registration that comes up enabled waits for our go:
        # it is disabled first, so a lane is registered whenever it is wanted.
        draft.start(lane)
        return
    if not absent(lane):
        # Registered or not? Its container ended after the last read: ask by its name.
        if draft.state.pool is not None:
            identify(draft, lane, since=lane.ended_at or 0.0)
        return
    _bootstrap(draft, lane, active)


def _enable_confirmed(lane: LaneRecord | None) -> bool:
    """The server said the lane is enabled and no write of its flag is in flight."""
    return lane is not None and lane.enabled is True and lane.op not in (Op.ENABLE, Op.DISABLE)


def _bootstrap(draft: Draft, lane: LaneRecord, active: LaneRecord | None) -> None:
    """Register a lane name for the first time, for an image without the start gate.

    Its registration comes up enabled and takes a job at once: so only while the
    slot is idle (no job running, none queued) and its other lanes can take none
    (the active one set aside, disabled and idle).
    """
    if active is None or not active.capable or draft.claimed(active):
        return
    pool = draft.state.pool
    queued = pool is not None and pool.queued_jobs > 0
    if draft.slot.intent is not Intent.RUN or active.job is not None or queued:
        draft.say(f"standby: {lane.name} is registered once {active.name} has no job")
        return
    if active.enabled is not False and active.phase is LanePhase.READY:
        # Set the idle active aside (disabled), then register this lane fresh; the
        # set-aside agent becomes its standby.
        if draft.set_enabled(active, False):
            draft.say(f"standby: registering {lane.name}; {active.name} is set aside meanwhile")
    elif active.enabled is False and not active.idle_verified:
        draft.check(active)
    # Still booting: its "Listening for Jobs" line (or the next read) makes it ready.


def _fresh_standby_coming(draft: Draft, active: LaneRecord, used: tuple[Lane, ...]) -> bool:
    """A restart keeps the active lane serving while a replacement standby boots."""
    state, slot = draft.state, draft.slot
    others = [slot.lane(lane) for lane in used if lane is not active.lane]
    if not state.standby or not others:
        return False

    def stays(lane: LaneRecord) -> bool:
        return lane.container_id is None or lane.container_id not in slot.restart_ids

    if any(
        lane.live and lane.disabled_idle and lane.phase is LanePhase.READY and stays(lane)
        for lane in others
    ):
        return False  # a ready standby takes over now
    if not all(stays(lane) for lane in others) or any(lane.live for lane in others):
        return True
    if all(lane.agent_id is None for lane in others):
        return False
    # Its replacement starts as soon as it may: its old container's name freed (the dead
    # one removed, the stop call answered), a backoff or an engine pause over. The active
    # keeps serving meanwhile, unless nothing will start (paused, stopping, parked).
    return not (state.paused or state.stopping or slot.parked)


def _settle_conflict(draft: Draft, capable: list[LaneRecord], used: tuple[Lane, ...]) -> None:
    """Two lanes could take a job (adoption, or a flag changed outside gpuci-tui): fix it."""
    busy = [lane for lane in capable if lane.job is not None]
    if len(busy) > 1:
        draft.say("both agents of this slot have a job: one was enabled outside gpuci-tui")
        return
    if busy:
        keep = busy[0]
    else:
        keep = min(
            capable,
            key=lambda lane: (lane.lane not in used, lane.enabled is not True, *_rank(lane)),
        )
    for lane in capable:
        if lane is keep:
            continue
        if lane.agent_id is None:
            identify(draft, lane, since=lane.said_registered or lane.started_at)
        elif lane.enabled is not False:
            draft.set_enabled(lane, False)
        else:
            draft.check(lane)
