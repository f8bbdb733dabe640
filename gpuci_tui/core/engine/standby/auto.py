"""Standby depth: how many standby lanes each slot keeps, and ``standby = "auto"``.

A slot runs one agent that may take a job (its *active* lane) and ``depth``
standby lanes: registered, online and disabled on the server. Every agent runs
one job and exits (``--once``), and a registration needs the agent's whole
start-up (~9 s) before its next job; so one standby hides the start-up only
from jobs at least that long. With jobs of length ``j`` and a start-up ``s``,
a slot keeps its GPUs busy with ``1 + ceil(s / j)`` lanes: each lane runs one
job, then restarts while the others run theirs.

``"auto"`` moves the depth between ``least`` and ``most`` (and a cap on the
group's registrations), from what the engine sees (`observe`):

- it *adds* lanes while jobs are queued and either the recent jobs are
  shorter than the recent agent start-ups (``ceil(start-up / job)`` standbys),
  or the queue outgrows the agents that could take it (a standby per queued
  job per slot), up to ``most``;
- it *retires* the extra lanes once nothing asked for them during
  ``hold_down`` seconds (they hold no job: they are stopped at once).

A lane name registered for the first time comes up *enabled* (see
`planner_run`). With the start gate (`planning.gate`) that is harmless, and a
lane is registered when the depth wants it, also while jobs wait. Without it a
new lane is registered only while its slot is idle: with "auto", each slot
registers its lanes up to the deepest it may use once, while idle
(`registering`), and stops them again; later the depth grows by starting
containers on existing, disabled registrations, which come back disabled. The
price is ``slots x (1 + most)`` registrations in the pool (offline while not
used) and, while the depth is up, one idle container per extra lane.

Only the rules live here: pure functions of the state and the time, tested
as tables on a fake clock (``tests/core/engine/test_standby_auto.py``).
"""

from __future__ import annotations

import functools
import math
import re
import statistics
from dataclasses import replace

from gpuci_tui.core.engine.lifecycle import (
    LANES,
    EngineState,
    Intent,
    Lane,
    LanePhase,
    LaneRecord,
    SlotRecord,
    lane_name,
    new_slot,
)
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.standby.schedule import in_force
from gpuci_tui.core.engine.standby.state import AutoSeed, AutoStandby

__all__ = ["AutoSeed", "AutoStandby", "depth_of", "observe", "seeded", "wanted"]

#: The deepest standby a slot may have (lanes ``b`` to ``h``).
DEEPEST = len(LANES) - 1


def depth_of(
    standby: bool | int | str, *, least: int = 1, most: int = 3, cap: int | None = None
) -> tuple[int, AutoStandby | None]:
    """The engine's depth and "auto" settings from ``[agents] standby`` and its bounds.

    ``true`` is one standby (two registrations per slot, as before depths
    existed), ``false`` none; "auto" starts at its idle depth, ``least``.
    """
    if standby == "auto":
        return max(0, least), AutoStandby(least=max(0, least), most=max(least, most), cap=cap)
    return int(standby), None


def seeded(auto: AutoStandby, seed: AutoSeed) -> AutoStandby:
    """``auto`` starting from the local history: the typical job length and start-up.

    A restarted daemon has measured nothing yet, so without a seed its first
    burst is sized by the queue alone. The medians of the recent figures stand
    in until its own lanes measure newer ones (`learn`); a figure the history
    lacks stays unknown (0), as without a seed.
    """
    return replace(auto, job_s=_typical(seed.jobs), startup_s=_typical(seed.startups))


def _typical(seconds: tuple[float, ...]) -> float:
    """The median of the positive figures, 0.0 without any."""
    measured = [s for s in seconds if s > 0]
    return statistics.median(measured) if measured else 0.0


def per_slot_most(auto: AutoStandby, slots: int) -> int:
    """The deepest standby ``auto`` allows with ``slots`` slots (the cap shared out)."""
    most = min(auto.most, DEEPEST)
    if auto.cap is not None and slots > 0:
        most = min(most, max(0, auto.cap // slots - 1))
    return max(0, most)


def wanted(
    auto: AutoStandby, *, slots: int, queued: int, ready: int, current: int, now: float
) -> tuple[int, float | None]:
    """The depth "auto" asks for now, and the new start of its hold-down.

    Args:
        auto: Bounds and learnt start-up and job lengths.
        slots: Slots of the group (the cap is shared among them).
        queued: Jobs queued in the pool (as last read).
        ready: Agents of the group that could take a job or be enabled for one now.
        current: The depth in force.
        now: Engine clock.
    """
    top = per_slot_most(auto, slots)
    floor = min(auto.least, top)
    want = floor
    if queued > 0:
        if 0 < auto.job_s < auto.startup_s:
            # Enough lanes that a lane's restart hides behind the others' jobs.
            want = max(want, math.ceil(auto.startup_s / auto.job_s))
        if queued > ready:
            want = max(want, math.ceil(queued / max(1, slots)))
    want = max(floor, min(want, top))
    if queued > 0 and want >= current:
        return want, now
    if want >= current:
        return want, auto.demand_at
    if auto.demand_at is not None and now - auto.demand_at < auto.hold_down:
        return min(max(current, floor), top), auto.demand_at
    return want, auto.demand_at


def learn(auto: AutoStandby, state: EngineState, now: float) -> AutoStandby:
    """Start-ups and job lengths measured from the lanes as they are now.

    The engine plans after every observation, and the agents' own lines say
    when each is online and when it takes its job, so both are good to about a
    second: enough to tell a 3-s job from a 9-s start-up.

    A start-up is remembered only while its container is the lane's current one
    (its start time still the lane's): one that never came online (crashed,
    stopped, replaced) is forgotten with it, so the memory stays one entry per
    lane however long the daemon runs. Nothing learnt changes: a lane's start
    time only moves forward, so a forgotten entry could never be matched again.
    Returns ``auto`` itself when nothing changed (the planner asks on every plan).
    """
    booting, running = set(auto.booting), set(auto.running)
    startup, job = auto.startup_s, auto.job_s
    names: set[str] = set()
    starts: set[tuple[str, float]] = set()
    by_name: dict[str, list[tuple[str, str, float]]] = {}
    for item in running:
        by_name.setdefault(item[0], []).append(item)
    for _, lane in state.lanes():
        names.add(lane.name)
        if lane.started_at is not None:
            key = (lane.name, lane.started_at)
            starts.add(key)
            if lane.live:
                if not lane.online:
                    booting.add(key)
                elif key in booting:
                    booting.discard(key)
                    startup = now - lane.started_at
        # By container: one job per container (``--once``), known by a line or a read.
        current = lane.container_id if lane.job is not None else None
        seen = by_name.get(lane.name, [])
        for item in set(seen):
            if item[1] != current:
                running.discard(item)
                seen.remove(item)
                job = max(0.1, now - item[2])
        if current is not None and not any(item[1] == current for item in seen):
            running.add((lane.name, current, now))
            seen.append((lane.name, current, now))
            by_name[lane.name] = seen
    booting &= starts
    running = {item for item in running if item[0] in names}
    unchanged = startup == auto.startup_s and job == auto.job_s
    if unchanged and booting == auto.booting and running == auto.running:
        return auto
    return replace(
        auto,
        startup_s=startup,
        job_s=job,
        booting=frozenset(booting),
        running=frozenset(running),
    )


def ready_agents(state: EngineState) -> int:
    """Agents that could take a job now or be enabled for one (active or standby, idle)."""
    return sum(
        1
        for slot, lane in state.lanes()
        if slot.intent is Intent.RUN and lane.phase is LanePhase.READY and lane.job is None
    )


def scheduled(state: EngineState, now: float) -> EngineState:
    """The state with the standby schedule evaluated at ``now``.

    The count in force is the depth itself with ``standby = N`` (so a change
    of schedule adds or retires lanes as a change of N does), and the floor
    with "auto" (see `least`).
    """
    if state.schedule is None:
        return state if state.scheduled is None else replace(state, scheduled=None)
    now_in = in_force(state.schedule, now)
    depth = now_in.count if now_in is not None and state.auto is None else None
    if now_in == state.scheduled and (depth is None or _same_depth(state.standby, depth)):
        return state  # asked on every plan: no copy while nothing changes
    state = replace(state, scheduled=now_in)
    if depth is not None:
        state = replace(state, standby=depth)
    return state


def least(state: EngineState) -> int:
    """The standbys "auto" keeps while idle: the schedule's count in force, else ``standby_min``."""
    if state.scheduled is not None:
        return state.scheduled.count
    return state.auto.least if state.auto is not None else int(state.standby)


def next_change_at(state: EngineState) -> float | None:
    """When the schedule's count next changes (wake the planner then), or None."""
    return state.scheduled.next_at if state.scheduled is not None else None


def observe(state: EngineState, now: float) -> EngineState:
    """The state with the schedule's count and "auto"'s depth and learning brought up to ``now``."""
    state = scheduled(state, now)
    auto = state.auto
    if auto is None:
        return state
    learnt = learn(auto, state, now)
    pool = state.pool
    queued = pool.queued_jobs if pool is not None else 0
    floor = least(state)
    depth, demand_at = wanted(
        learnt if learnt.least == floor else replace(learnt, least=floor),
        slots=max(1, state.desired),
        queued=queued,
        ready=ready_agents(state),
        current=int(state.standby),
        now=now,
    )
    if learnt is auto and demand_at == auto.demand_at and _same_depth(state.standby, depth):
        return state  # nothing learnt, nothing changed: no copy
    return replace(state, standby=depth, auto=replace(learnt, demand_at=demand_at))


def _same_depth(standby: int, depth: int) -> bool:
    # ``standby`` may hold True/False (read as 1/0): that one is replaced by its number.
    return type(standby) is int and standby == depth


def retire_at(state: EngineState) -> float | None:
    """When "auto" may retire its extra lanes (wake the planner then), or None."""
    auto = state.auto
    if auto is None or auto.demand_at is None:
        return None
    if int(state.standby) <= min(least(state), per_slot_most(auto, max(1, state.desired))):
        return None
    return auto.demand_at + auto.hold_down


def lane_limit(state: EngineState) -> int:
    """Lanes a slot may ever register: the configured depth, or "auto"'s deepest, plus one."""
    if state.auto is None:
        return len(state.used_lanes)
    return 1 + per_slot_most(state.auto, max(1, state.desired))


def widened(slot: SlotRecord, prefix: str, lanes: int) -> SlotRecord:
    """``slot`` with records for its first ``lanes`` lanes (existing records kept)."""
    wanted_lanes = LANES[:lanes]
    if tuple(record.lane for record in slot.lanes[:lanes]) == wanted_lanes:
        return slot  # the planner asks on every plan; the records are there but once
    for lane in wanted_lanes:
        if not slot.has(lane):
            slot = slot.with_lane(LaneRecord(lane, lane_name(prefix, slot.number, lane)))
    return slot


def listed_slots(
    state: EngineState, live: set[tuple[int, Lane]], dead: set[tuple[int, Lane]]
) -> EngineState:
    """Slots and lanes for the containers a listing found, (slot, lane), before adoption.

    A slot below the desired count, or with a live container above it (to
    retire), gets a record; a slot gets records for every lane a container was
    found in (a deeper standby before the daemon restarted).
    """
    found = live | dead
    for number, _ in sorted(found):
        if state.slot(number) is None and (
            number < state.desired or any(n == number for n, _ in live)
        ):
            intent = Intent.RUN if number < state.desired else Intent.RETIRE
            state = state.with_slot(new_slot(state.prefix, number, intent, state.lane_count))
    for slot in state.slots:
        deepest = max((LANES.index(lane) + 1 for n, lane in found if n == slot.number), default=0)
        state = state.with_slot(widened(slot, state.prefix, deepest))
    return state


def registered(state: EngineState) -> int:
    """Agents of this group registered in the pool, or that may be by now.

    From the pool's own list, so the registrations of slots retired by a
    scale-down, still in the pool until removed, count too; and every lane
    that `LaneRecord.may_be_registered`, whose registration the last read may
    not show yet (one that ran a short job between two reads counts as well).
    """
    cached = _registered_memo
    if (
        cached is not None
        and cached[0] is state.slots
        and cached[1] is state.pool
        and cached[2] == state.prefix
    ):
        return cached[3]
    pool = state.pool
    names = set(_group_names(pool, state.prefix)) if pool else set()
    names |= {lane.name for _, lane in state.lanes() if lane.may_be_registered}
    _remember_registered((state.slots, state.pool, state.prefix, len(names)))
    return len(names)


#: The last answer of `registered`, for the same slots and pool read (the planner asks
#: once per slot in a plan, and most plans change neither): (slots, pool, prefix, count).
_registered_memo: tuple[tuple[SlotRecord, ...], PoolView | None, str, int] | None = None


def _remember_registered(
    answer: tuple[tuple[SlotRecord, ...], PoolView | None, str, int],
) -> None:
    global _registered_memo  # noqa: PLW0603 - a memo of a pure function, not state
    _registered_memo = answer


@functools.lru_cache(maxsize=4)
def _group_pattern(prefix: str) -> re.Pattern[str]:
    return re.compile(rf"{re.escape(prefix)}-\d+(-[b-{LANES[-1].value}])?")


_pool_names: dict[str, tuple[PoolView, frozenset[str]]] = {}


def _group_names(pool: PoolView, prefix: str) -> frozenset[str]:
    """The names of ``pool``'s agents that belong to the group ``prefix``.

    Kept for the last pool read per group: the planner asks on every plan and
    the read is replaced (a new, frozen view) only every poll.
    """
    cached = _pool_names.get(prefix)
    if cached is not None and cached[0] is pool:
        return cached[1]
    pattern = _group_pattern(prefix)
    names = frozenset(a.name for a in pool.agents if pattern.fullmatch(a.name))
    _pool_names[prefix] = (pool, names)
    return names


def within_cap(
    state: EngineState, used: tuple[Lane, ...], never_registered: list[LaneRecord]
) -> tuple[Lane, ...]:
    """``used`` less the never-registered lanes (but ``a``) once "auto" is at its cap."""
    auto = state.auto
    if auto is None or auto.cap is None or registered(state) < auto.cap:
        return used
    fresh = {lane.lane for lane in never_registered}
    return tuple(lane for lane in used if lane is Lane.A or lane not in fresh)


def registering(
    state: EngineState, slot: SlotRecord, never_registered: list[LaneRecord]
) -> Lane | None:
    """With "auto": the lane beyond the current depth to register now, if the slot is idle.

    ``never_registered``: the slot's lanes a read showed unregistered. One at a
    time, and only while nothing is queued and no lane of the slot has a job:
    the new registration comes up enabled, so the slot is set aside meanwhile.
    Not with the start gate: a lane is then registered when the depth wants it
    (it waits for our go, disabled first), so nothing is registered ahead.
    """
    if state.auto is None or slot.intent is not Intent.RUN or not state.standby:
        return None
    if state.gated(state.target_spec(slot.number)):
        return None
    pool = state.pool
    if pool is None or pool.queued_jobs > 0 or any(lane.job for lane in slot.lanes):
        return None
    used = state.used_lanes
    limit = lane_limit(state)
    if state.auto.cap is not None and registered(state) >= state.auto.cap:
        return None
    for lane in never_registered:
        if lane.lane not in used and LANES.index(lane.lane) < limit:
            return lane.lane
    return None


def unused_why(state: EngineState) -> str:
    """Why a lane beyond the standby depth is taken out."""
    return "standby is off" if not state.standby else "beyond the standby depth"


def depth_text(state: EngineState) -> str:
    """The standby depth as shown: ``off``, ``1``, ``2/3 (auto)``, with the schedule after a ``;``.

    E.g. ``3; schedule: 3 until 19:00 (Europe/Berlin)``.
    """
    if state.auto is not None:
        most = per_slot_most(state.auto, max(1, state.desired))
        depth = f"{int(state.standby)}/{most} (auto)"
    else:
        depth = str(int(state.standby)) if state.standby else "off"
    return f"{depth}; {state.scheduled.label}" if state.scheduled is not None else depth
