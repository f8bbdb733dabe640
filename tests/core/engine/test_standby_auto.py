"""Standby depth and ``standby = "auto"`` as tables, on a fake clock.

Three tables: the depth "auto" asks for (`wanted`), what the planner does with
a slot of three or four lanes, and "auto" learning start-ups and job lengths
from the lanes. The safety rule runs through every planner row: at most one
lane of a slot can take a job, whatever the depth.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.core.engine.lifecycle import EngineState, Lane, LanePhase, new_slot
from gpuci_tui.core.engine.planning.planner import decide
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.server_steps import SetEnabled
from gpuci_tui.core.engine.standby.auto import (
    AutoStandby,
    depth_of,
    depth_text,
    lane_limit,
    learn,
    per_slot_most,
    registered,
    wanted,
)
from gpuci_tui.core.engine.steps import (
    Action,
    Died,
    RemoveContainer,
    StartAgent,
    Started,
    StopAgent,
)
from gpuci_tui.core.models import JobInfo
from gpuci_tui.core.protocols import Agent
from tests.core.lifecycle_helpers import (
    ABSENT,
    ACTIVE,
    BUSY,
    NOW,
    PARKED_DISABLED,
    READ,
    STANDBY,
    dying,
    observe,
)

A, B, C, D = Lane.A, Lane.B, Lane.C, Lane.D
AUTO = AutoStandby(least=1, most=3)
SHORT = replace(AUTO, startup_s=9.0, job_s=3.0)
"""Learnt: 3-s jobs, 9-s start-ups."""

# name, auto, slots, queued, ready, current, now, (depth, demand_at)
WANTED: list[tuple[str, AutoStandby, int, int, int, int, float, tuple[int, float | None]]] = [
    ("idle, nothing learnt: the idle depth", AUTO, 2, 0, 4, 1, 100.0, (1, None)),
    ("queue within the ready agents, long jobs: idle depth", replace(AUTO, startup_s=9.0,
     job_s=60.0), 2, 2, 4, 1, 100.0, (1, 100.0)),
    ("queue outgrows the ready agents: one lane per queued job per slot, up to most",
     AUTO, 2, 15, 2, 1, 100.0, (3, 100.0)),
    ("queue outgrows a little: ceil(queued / slots)", AUTO, 2, 5, 4, 1, 100.0, (3, 100.0)),
    ("queue outgrows by one on 4 slots: 2 standbys", AUTO, 4, 6, 4, 1, 100.0, (2, 100.0)),
    ("short jobs queued (3 s vs 9 s start-up): ceil(9 / 3) = 3", SHORT, 2, 1, 4, 1, 100.0,
     (3, 100.0)),
    ("short jobs, but most = 2", replace(SHORT, most=2), 2, 1, 4, 1, 100.0, (2, 100.0)),
    ("cap of 6 agents on 2 slots: 3 lanes each, 2 standbys", replace(SHORT, cap=6), 2, 1, 4,
     1, 100.0, (2, 100.0)),
    ("cap below two per slot: no standby at all", replace(SHORT, cap=3), 2, 1, 4, 1, 100.0,
     (0, None)),
    ("queue gone, within the hold-down: the depth stays", replace(AUTO, demand_at=50.0), 2,
     0, 8, 3, 100.0, (3, 50.0)),
    ("queue gone, hold-down over: back to the idle depth", replace(AUTO, demand_at=50.0), 2,
     0, 8, 3, 170.0, (1, 50.0)),
    ("queue smaller, hold-down over: down to what it asks", replace(SHORT, demand_at=50.0,
     job_s=4.0), 2, 1, 8, 3, 170.0, (3, 170.0)),
    ("a lower depth asked while the queue is still there: kept until the hold-down ends",
     replace(AUTO, demand_at=90.0), 2, 1, 8, 3, 100.0, (3, 90.0)),
    ("least 0 idles without a standby", replace(AUTO, least=0), 2, 0, 2, 0, 100.0, (0, None)),
    ("least 2 idles with two", replace(AUTO, least=2), 2, 0, 6, 2, 100.0, (2, None)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("auto", "slots", "queued", "ready", "current", "now", "expected"),
    [row[1:] for row in WANTED],
    ids=[row[0] for row in WANTED],
)
def test_wanted(
    auto: AutoStandby,
    slots: int,
    queued: int,
    ready: int,
    current: int,
    now: float,
    expected: tuple[int, float | None],
) -> None:
    assert wanted(auto, slots=slots, queued=queued, ready=ready, current=current, now=now) == (
        expected
    )


def test_bounds_and_words() -> None:
    assert depth_of(True) == (1, None) and depth_of(False) == (0, None)
    assert depth_of(3) == (3, None)
    depth, auto = depth_of("auto", least=1, most=3, cap=8)
    assert depth == 1 and auto == AutoStandby(least=1, most=3, cap=8)
    assert per_slot_most(AutoStandby(most=3, cap=8), 2) == 3
    assert per_slot_most(AutoStandby(most=3, cap=7), 2) == 2  # 7 // 2 = 3 lanes
    assert per_slot_most(AutoStandby(most=9), 1) == 7  # lanes a..h
    state = EngineState(prefix="h", desired=2, standby=2, auto=AutoStandby(most=3, cap=8))
    assert depth_text(state) == "2/3 (auto)" and lane_limit(state) == 4
    assert depth_text(EngineState(prefix="h", desired=2, standby=True)) == "1"
    assert depth_text(EngineState(prefix="h", desired=2, standby=0)) == "off"
    assert EngineState(prefix="h", desired=1, standby=2).used_lanes == (A, B, C)
    assert EngineState(prefix="h", desired=1, standby=False).used_lanes == (A,)


def lanes_engine(
    *lanes: dict[str, Any],
    standby: int = 2,
    auto: AutoStandby | None = None,
    read: PoolView | None = READ,
) -> EngineState:
    """One slot (number 0) with as many lanes as presets given (a, b, c, ...)."""
    slot = new_slot("h", 0, lanes=len(lanes))
    for lane, preset in zip(Lane, lanes, strict=False):
        slot = slot.with_lane(replace(slot.lane(lane), **preset))
    return EngineState(prefix="h", desired=1, slots=(slot,), standby=standby, auto=auto, pool=read)


STANDBY_C = {**STANDBY, "container_id": "cc", "agent_id": 3}
STANDBY_D = {**STANDBY, "container_id": "cd", "agent_id": 4}
OFF_C = {**PARKED_DISABLED, "agent_id": 3}
OFF_D = {**PARKED_DISABLED, "agent_id": 4}
BOOTING_C = {**STANDBY_C, "phase": LanePhase.BOOTING, "online": False, "started_at": 26.0}
BOOTING_B = {**STANDBY, "phase": LanePhase.BOOTING, "online": False, "started_at": 24.0}
QUEUED = replace(READ, queued_jobs=10)

ROWS: list[tuple[str, EngineState, list[Action]]] = [
    ("depth 2, a busy, b ready, c registered and stopped: start c (it comes back disabled)",
     lanes_engine({**BUSY, "enabled": False}, STANDBY, OFF_C), [StartAgent(0, C)]),
    ("depth 2, a busy and enabled: stays enabled until it exits, c started",
     lanes_engine(BUSY, STANDBY, OFF_C), [StartAgent(0, C)]),
    ("depth 2, a exited: exactly one standby enabled (b), c waits",
     lanes_engine(dying("ca", agent_id=1, enabled=False), STANDBY, STANDBY_C),
     [RemoveContainer(0, A, "ca"), SetEnabled(0, B, 2, True)]),
    ("depth 3, none ready: the standby started first is enabled (b before c)",
     lanes_engine(dying("ca", agent_id=1, enabled=False), BOOTING_B, BOOTING_C, OFF_D,
                  standby=3),
     [RemoveContainer(0, A, "ca"), SetEnabled(0, B, 2, True), StartAgent(0, D)]),
    ("depth 2, c never registered, a ready and idle: set a aside to register c",
     lanes_engine(ACTIVE, STANDBY, ABSENT), [SetEnabled(0, A, 1, False)]),
    ("depth 2, c never registered, a busy: c waits (it would come up enabled)",
     lanes_engine({**BUSY, "enabled": False}, STANDBY, ABSENT), []),
    ("depth lowered to 1: the ready c is stopped at once (it holds no job)",
     lanes_engine(ACTIVE, STANDBY, STANDBY_C, standby=1), [StopAgent(0, C, "cc")]),
    ("standby off: b and c stopped, a serves",
     lanes_engine(ACTIVE, STANDBY, STANDBY_C, standby=0),
     [StopAgent(0, B, "cb"), StopAgent(0, C, "cc")]),
    ("two capable lanes of three (c enabled outside): c disabled",
     lanes_engine(ACTIVE, STANDBY, {**STANDBY_C, "enabled": True, "idle_verified": False}),
     [SetEnabled(0, C, 3, False)]),
    ("auto, queue outgrows the agents: depth 3, c and d started",
     lanes_engine({**BUSY, "enabled": False}, STANDBY, OFF_C, OFF_D, standby=1, auto=AUTO,
                  read=QUEUED),
     [StartAgent(0, C), StartAgent(0, D)]),
    ("auto, idle, c never registered: registered now (a set aside)",
     lanes_engine(ACTIVE, STANDBY, ABSENT, ABSENT, standby=1, auto=AUTO),
     [SetEnabled(0, A, 1, False)]),
    ("auto, idle, c set aside already and a confirmed idle: c started fresh",
     lanes_engine({**ACTIVE, "enabled": False, "idle_verified": True}, STANDBY, ABSENT, ABSENT,
                  standby=1, auto=AUTO),
     [StartAgent(0, C)]),
    ("auto, jobs queued, c never registered: not now (it would come up enabled)",
     lanes_engine({**BUSY, "enabled": False}, STANDBY, ABSENT, ABSENT, standby=1, auto=AUTO,
                  read=QUEUED), []),
    ("auto, registered c (fresh, enabled) once registered: disabled again, then stopped",
     lanes_engine({**ACTIVE, "enabled": False, "idle_verified": True}, STANDBY,
                  {**ACTIVE, "container_id": "cc", "agent_id": 3, "phase": LanePhase.BOOTING,
                   "online": False}, ABSENT, standby=1, auto=AUTO),
     [SetEnabled(0, C, 3, False)]),
    ("auto, hold-down over, idle: the extra c and d stopped",
     lanes_engine(ACTIVE, STANDBY, STANDBY_C, STANDBY_D, standby=3,
                  auto=replace(AUTO, demand_at=NOW - 200.0)),
     [StopAgent(0, C, "cc"), StopAgent(0, D, "cd")]),
    ("auto, within the hold-down, idle: c and d stay",
     lanes_engine(ACTIVE, STANDBY, STANDBY_C, STANDBY_D, standby=3,
                  auto=replace(AUTO, demand_at=NOW - 10.0)), []),
]  # fmt: skip


@pytest.mark.parametrize(("state", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_planner_with_deeper_standby(state: EngineState, expected: list[Action]) -> None:
    new, plan = decide(state, NOW)
    assert [a for a in plan.actions if type(a).__name__ != "FetchLogs"] == expected
    # The safety rule: a lane is enabled, or started fresh (its first registration comes
    # up enabled), only while no other lane of the slot could take a job.
    before = state.slots[0]
    for action in plan.actions:
        if isinstance(action, StartAgent) and before.lane(action.lane).agent_id is None:
            lane: Lane | None = action.lane
        elif isinstance(action, SetEnabled) and action.enabled:
            lane = action.lane
        else:
            continue
        assert not any(other.capable for other in before.lanes if other.lane is not lane)
    assert sum(1 for a in plan.actions if isinstance(a, SetEnabled) and a.enabled) <= 1
    assert new.slot(0) is not None


def test_auto_wakes_for_the_end_of_its_hold_down() -> None:
    state = lanes_engine(
        ACTIVE, STANDBY, STANDBY_C, standby=2, auto=replace(AUTO, demand_at=NOW - 10.0)
    )
    _, plan = decide(state, NOW)
    assert plan.wake_at == NOW - 10.0 + AUTO.hold_down


def test_learns_startup_and_job_length_from_the_lanes() -> None:
    booting = lanes_engine({**ACTIVE, "online": False, "phase": LanePhase.BOOTING}, STANDBY)
    auto = learn(AUTO, booting, 12.0)
    assert auto.startup_s == 0.0 and auto.booting == {("h-0", 10.0)}
    online = lanes_engine(ACTIVE, STANDBY)
    auto = learn(auto, online, 19.0)
    assert auto.startup_s == pytest.approx(9.0) and not auto.booting
    said = JobInfo(request_id=0, name="p")  # the agent's line told of it first
    auto = learn(auto, lanes_engine({**BUSY, "job": said}, STANDBY), 20.0)
    assert auto.running == {("h-0", "ca", 20.0)} and auto.job_s == 0.0
    job = JobInfo(request_id=8, pipeline="p", run="r")  # then a read: the same job
    auto = learn(auto, lanes_engine({**BUSY, "job": job}, STANDBY), 21.0)
    assert auto.running == {("h-0", "ca", 20.0)} and auto.job_s == 0.0
    auto = learn(auto, lanes_engine(dying("ca"), STANDBY), 23.5)
    assert auto.job_s == pytest.approx(3.5) and not auto.running


def test_a_lane_that_ran_between_two_reads_counts_against_the_cap() -> None:
    """Registered, ran a short job and ended between two reads: still one of ``max_agents``.

    Cap 7 on 2 slots (3 lanes each); a retired slot 2 left ``h-2`` and ``h-2-b`` in the
    pool, so the read at 20 shows 6 of the group's names and one more may be registered.
    """
    names = ("h-0", "h-0-b", "h-1", "h-1-b", "h-2", "h-2-b")
    agents = tuple(Agent(n, name, enabled=False) for n, name in enumerate(names))
    read = replace(READ, agents=agents)
    slot0 = new_slot("h", 0, lanes=3)
    slot1 = new_slot("h", 1, lanes=3)
    for lane, preset in ((A, dying("ca", agent_id=1, enabled=False)), (B, STANDBY), (C, ABSENT)):
        slot0 = slot0.with_lane(replace(slot0.lane(lane), **preset))
    for lane, preset in ((A, {**BUSY, "container_id": "ca1", "agent_id": 3}),
                         (B, {**STANDBY, "container_id": "cb1", "agent_id": 4}), (C, ABSENT)):  # fmt: skip
        slot1 = slot1.with_lane(replace(slot1.lane(lane), **preset))
    auto = AutoStandby(least=2, most=3, cap=7)
    state = EngineState("h", 2, (slot0, slot1), standby=2, auto=auto, pool=read)
    # Slot 0 has no agent that could take a job: its c is registered for the first time.
    state, plan = decide(state, NOW)
    assert StartAgent(0, C) in plan.actions and not any(a.slot == 1 for a in plan.actions)
    # It registers, runs a job and exits before the next read: no read shows h-0-c.
    state = observe(state, Started(0, C, "cc", 31.0), Died(0, C, "cc", 0, 35.0))
    assert registered(state) == 7
    # Slot 1's a exits: its ready standby b takes over; c is not registered (an 8th).
    state = observe(state, Died(1, A, "ca1", 0, 36.0))
    _, plan = decide(state, 36.0)
    assert [a for a in plan.actions if a.slot == 1] == [
        RemoveContainer(1, A, "ca1"), SetEnabled(1, B, 4, True),
    ]  # fmt: skip
