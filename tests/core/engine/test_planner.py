"""The planner as a table: (state, time) → (actions, fast poll), on a fake clock.

Each row is one situation of a slot; the expected actions are exact (order
included). The safety rule runs through every row: a lane is only enabled,
or started with a registration that could come up enabled, when the other
lane can take no job.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuci_tui.core.engine.lifecycle import EngineState, Intent, Lane, LanePhase
from gpuci_tui.core.engine.planner import DESTROY_GRACE, decide
from gpuci_tui.core.engine.steps import (
    Action,
    CheckAgent,
    RemoveContainer,
    SetEnabled,
    StartAgent,
    StopAgent,
)
from tests.core.lifecycle_helpers import (
    ABSENT,
    ACTIVE,
    BOOTING_NEW,
    BUSY,
    NOW,
    OFF_ENABLED,
    PARKED_DISABLED,
    STANDBY,
    STANDBY_BOOTING,
    UNKNOWN,
    actions,
    dying,
    engine,
    plan,
    slot0,
)

A, B = Lane.A, Lane.B

ROWS: list[tuple[str, EngineState, list[Action], bool]] = [
    # ------------------------------------------------------------- first start, bootstrap
    ("first start: only lane a; b's name unknown -> read fast",
     engine(UNKNOWN, UNKNOWN, read=None), [StartAgent(0, A)], True),
    ("a comes up as a new registration; b never registered: wait (reading fast) for a ready a",
     engine(BOOTING_NEW, ABSENT), [], True),
    ("a ready and idle, b never registered: set a aside (disable) to register b",
     engine(ACTIVE, ABSENT), [SetEnabled(0, A, 1, False)], False),
    ("a disabled but not yet re-checked: re-read it",
     engine({**ACTIVE, "enabled": False}, ABSENT), [CheckAgent(0, A, 1)], False),
    ("a disabled and idle: register b fresh (it comes up enabled)",
     engine({**ACTIVE, "enabled": False, "idle_verified": True}, ABSENT),
     [StartAgent(0, B)], False),
    ("a busy, b never registered: b waits (a new registration would be enabled)",
     engine(BUSY, ABSENT), [SetEnabled(0, A, 1, False)], False),
    # ------------------------------------------------------------- steady state
    ("active ready, standby ready: nothing to do", engine(ACTIVE, STANDBY), [], False),
    ("active busy: disable it now so its next container comes back as the standby",
     engine(BUSY, STANDBY), [SetEnabled(0, A, 1, False)], False),
    ("active exited (disabled while busy), standby ready: enable the standby at once",
     engine(dying("ca", agent_id=1, enabled=False, idle_verified=True, known_at=20.0), STANDBY),
     [SetEnabled(0, B, 2, True)], False),
    ("active exited still enabled: enable the standby and disable the exited registration",
     engine(dying("ca", agent_id=1, enabled=True, known_at=20.0), STANDBY),
     [SetEnabled(0, B, 2, True), SetEnabled(0, A, 1, False)], False),
    ("exited lane's name free and disabled: start it as the new standby",
     engine(PARKED_DISABLED, {**ACTIVE, "container_id": "cb", "agent_id": 2}),
     [StartAgent(0, A)], False),
    ("exited lane registered enabled, no container: disable it before its next start",
     engine(OFF_ENABLED, {**ACTIVE, "container_id": "cb", "agent_id": 2}),
     [SetEnabled(0, A, 1, False)], False),
    ("exited lane's registration unknown: read the pool fast, start nothing",
     engine({"ended_at": 25.0, "known_at": 20.0},
            {**ACTIVE, "container_id": "cb", "agent_id": 2}), [], True),
    ("standby still booting, active ready: nothing to do",
     engine(ACTIVE, STANDBY_BOOTING), [], False),
    ("no lane live, both registrations disabled: enable a first (offline), start b as standby",
     engine({**PARKED_DISABLED, "agent_id": 1}, PARKED_DISABLED),
     [SetEnabled(0, A, 1, True), StartAgent(0, B)], False),
    ("a enabled offline, b disabled: start both (a active, b standby)",
     engine({**OFF_ENABLED}, PARKED_DISABLED), [StartAgent(0, A), StartAgent(0, B)], False),
    # ------------------------------------------------------------- conflicts: never two capable
    ("both enabled and idle (changed outside gpuci-tui): disable b, enable nothing",
     engine(ACTIVE, {**ACTIVE, "container_id": "cb", "agent_id": 2}),
     [SetEnabled(0, B, 2, False)], False),
    ("a busy, b enabled idle: disable b, keep the busy one",
     engine(BUSY, {**ACTIVE, "container_id": "cb", "agent_id": 2}),
     [SetEnabled(0, B, 2, False)], False),
    ("both busy: nothing can be done without killing a job",
     engine(BUSY, {**BUSY, "container_id": "cb", "agent_id": 2}), [], False),
    ("adopted both, nothing read yet: wait for the read (fast)",
     engine(BOOTING_NEW, {**BOOTING_NEW, "container_id": "cb"}, read=None), [], True),
    # ------------------------------------------------------------- standby off
    ("standby off: exited lane's name free: start it (its registration stays enabled)",
     engine(OFF_ENABLED, UNKNOWN, standby=False), [StartAgent(0, A)], False),
    ("standby off: registration disabled (after a drain): enable it before starting",
     engine({**PARKED_DISABLED, "agent_id": 1}, UNKNOWN, standby=False),
     [SetEnabled(0, A, 1, True)], False),
    ("standby off: busy active is not disabled", engine(BUSY, UNKNOWN, standby=False), [], False),
    ("standby turned off: the old standby lane b is stopped",
     engine(ACTIVE, STANDBY, standby=False), [StopAgent(0, B, "cb")], False),
    # ------------------------------------------------------------- drain
    ("drain: busy a is disabled and left to finish, idle standby b stopped",
     engine(BUSY, STANDBY, intent=Intent.DRAIN),
     [SetEnabled(0, A, 1, False), StopAgent(0, B, "cb")], False),
    ("drain: idle enabled agent is disabled first",
     engine(ACTIVE, UNKNOWN, intent=Intent.DRAIN), [SetEnabled(0, A, 1, False)], False),
    ("drain: disabled, not re-checked: re-check before any stop",
     engine({**ACTIVE, "enabled": False}, UNKNOWN, intent=Intent.DRAIN),
     [CheckAgent(0, A, 1)], False),
    ("drain: disabled and confirmed idle: stop",
     engine({**ACTIVE, "enabled": False, "idle_verified": True}, UNKNOWN, intent=Intent.DRAIN),
     [StopAgent(0, A, "ca")], False),
    ("drain: registration not seen yet: wait for it, reading fast",
     engine(BOOTING_NEW, UNKNOWN, intent=Intent.DRAIN), [], True),
    ("drain: nothing is started", engine(UNKNOWN, UNKNOWN, intent=Intent.DRAIN), [], False),
    # ------------------------------------------------------------- gates
    ("organisation failing: no write, no start that would need one",
     engine(ACTIVE, ABSENT, server_retry_at=NOW + 5), [], False),
    ("paused: an exited active's standby still takes over, nothing is started",
     engine(dying("ca", agent_id=1, enabled=False, idle_verified=True, known_at=20.0), STANDBY,
            paused=True), [SetEnabled(0, B, 2, True)], False),
    ("PAT unreadable or engine down: starts wait",
     engine(UNKNOWN, UNKNOWN, start_retry_at=NOW + 2), [], False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "expected", "fast"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS]
)
def test_planner_table(state: EngineState, expected: list[Action], fast: bool) -> None:
    after, decided = decide(state, NOW)
    got = [a for a in decided.actions if type(a).__name__ != "FetchLogs"]
    assert got == expected
    assert decided.poll_fast is fast
    # What was planned is marked in flight: asking again plans nothing new for those lanes.
    again = [a for a in decide(after, NOW)[1].actions if a in expected]
    assert again == []


def test_dead_container_is_removed_after_the_grace_if_docker_did_not() -> None:
    state = engine(dying("ca"), UNKNOWN, standby=False)
    assert actions(state, 29.0 + DESTROY_GRACE - 0.1) == []
    _, early = plan(state, 29.0 + DESTROY_GRACE - 0.1)
    assert early.wake_at == pytest.approx(29.0 + DESTROY_GRACE)
    assert actions(state, 29.0 + DESTROY_GRACE) == [RemoveContainer(0, A, "ca")]


def test_backoff_holds_starts_until_it_ends() -> None:
    state = engine(UNKNOWN, UNKNOWN, standby=False)
    state = state.with_slot(replace(slot0(state), backoff_until=NOW + 4, failures=1))
    after, decided = plan(state)
    assert decided.actions == () and decided.wake_at == NOW + 4
    assert actions(state, NOW + 4) == [StartAgent(0, A)]


def test_parked_slot_starts_nothing_but_keeps_its_live_agent_served() -> None:
    state = engine(dying("ca", agent_id=1, enabled=False, idle_verified=True, known_at=20.0),
                   STANDBY)  # fmt: skip
    state = state.with_slot(replace(slot0(state), parked=True))
    assert actions(state) == [SetEnabled(0, B, 2, True)]


def test_restart_keeps_the_active_serving_until_a_fresh_standby_is_ready() -> None:
    state = engine(ACTIVE, STANDBY, intent=Intent.RESTART)
    state = state.with_slot(replace(slot0(state), restart_ids=frozenset({"ca", "cb"})))
    # The standby goes first; the active keeps taking jobs meanwhile.
    assert actions(state) == [StopAgent(0, B, "cb")]
    fresh = {**STANDBY, "container_id": "cb2"}
    state = state.with_slot(slot0(state).with_lane(replace(slot0(state).lane(B), **fresh)))
    # The fresh standby is ready: now the active is taken out (disable, re-check, stop).
    assert actions(state) == [SetEnabled(0, A, 1, False)]
    booting = {**STANDBY_BOOTING, "container_id": "cb2"}
    state = state.with_slot(slot0(state).with_lane(replace(slot0(state).lane(B), **booting)))
    assert actions(state) == []


def test_restart_finishes_when_no_old_container_is_left() -> None:
    state = engine(ACTIVE, STANDBY, intent=Intent.RESTART)
    state = state.with_slot(replace(slot0(state), restart_ids=frozenset({"gone"})))
    after, _ = plan(state)
    assert slot0(after).intent is Intent.RUN and slot0(after).restart_ids == frozenset()


def test_retired_slot_is_forgotten_once_empty() -> None:
    state = engine(UNKNOWN, UNKNOWN, intent=Intent.RETIRE)
    after, decided = plan(state)
    assert after.slots == () and decided.forgotten == (0,)


def test_a_stopping_lane_is_not_touched_again() -> None:
    state = engine({**ACTIVE, "enabled": False, "idle_verified": True,
                    "phase": LanePhase.STOPPING}, UNKNOWN, intent=Intent.DRAIN)  # fmt: skip
    assert actions(state) == []
