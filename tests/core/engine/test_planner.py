"""The planner as a table: (state, time) → actions, on a fake clock.

Each row is one situation of a slot; the expected actions are exact (order
included). The safety rule runs through every row: a lane is only enabled,
or started with a registration that could come up enabled, when the other
lane can take no job.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuci_tui.core.docker.agentspec import LABEL_LANE, LABEL_SLOT, placed
from gpuci_tui.core.engine.agent.steps import ReadAgent
from gpuci_tui.core.engine.lifecycle import EngineState, Intent, Lane, LanePhase
from gpuci_tui.core.engine.planning.planner import decide
from gpuci_tui.core.engine.server_steps import CheckAgent, SetEnabled
from gpuci_tui.core.engine.steps import (
    Action,
    FetchLogs,
    Listed,
    LogTail,
    RemoveContainer,
    Removed,
    StartAgent,
    StopAgent,
)
from gpuci_tui.core.engine.transitions.exit import REMOVE_RETRY
from gpuci_tui.core.protocols import ContainerInfo
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
    observe,
    plan,
    slot0,
)

A, B = Lane.A, Lane.B

ROWS: list[tuple[str, EngineState, list[Action]]] = [
    # ------------------------------------------------------------- first start, bootstrap
    ("first start: only lane a; b's name unknown: b waits for the first read",
     engine(UNKNOWN, UNKNOWN, read=None), [StartAgent(0, A)]),
    ("a comes up as a new registration; b never registered: wait for a ready a (its line)",
     engine(BOOTING_NEW, ABSENT), []),
    ("a ready and idle, b never registered: set a aside (disable) to register b",
     engine(ACTIVE, ABSENT), [SetEnabled(0, A, 1, False)]),
    ("a disabled but not yet re-checked: re-read it",
     engine({**ACTIVE, "enabled": False}, ABSENT), [CheckAgent(0, A, 1)]),
    ("a disabled and idle: register b fresh (it comes up enabled)",
     engine({**ACTIVE, "enabled": False, "idle_verified": True}, ABSENT),
     [StartAgent(0, B)]),
    ("a busy, b never registered: b waits (a new registration would be enabled)",
     engine(BUSY, ABSENT), []),
    # ------------------------------------------------------------- steady state
    ("active ready, standby ready: nothing to do", engine(ACTIVE, STANDBY), []),
    ("active busy: it stays enabled until it exits (then the exit disables it, below), so"
     " an organisation that starts refusing writes meanwhile does not strand the slot",
     engine(BUSY, STANDBY), []),
    ("active exited (disabled while busy), standby ready: enable the standby at once"
     " (and remove the dead container at once: no auto-remove)",
     engine(dying("ca", agent_id=1, enabled=False, idle_verified=True, known_at=20.0), STANDBY),
     [RemoveContainer(0, A, "ca"), SetEnabled(0, B, 2, True)]),
    ("active exited still enabled: enable the standby, while its dead container is removed;"
     " the exited registration stays enabled until that enable is confirmed",
     engine(dying("ca", agent_id=1, enabled=True, known_at=20.0), STANDBY),
     [RemoveContainer(0, A, "ca"), SetEnabled(0, B, 2, True)]),
    ("exited lane's name free and disabled: start it as the new standby",
     engine(PARKED_DISABLED, {**ACTIVE, "container_id": "cb", "agent_id": 2}),
     [StartAgent(0, A)]),
    ("exited lane registered enabled, no container: disable it before its next start",
     engine(OFF_ENABLED, {**ACTIVE, "container_id": "cb", "agent_id": 2}),
     [SetEnabled(0, A, 1, False)]),
    ("exited lane's registration unknown: read it by name, start nothing",
     engine({"ended_at": 25.0, "known_at": 20.0},
            {**ACTIVE, "container_id": "cb", "agent_id": 2}), [ReadAgent(0, A, "h-0")]),
    ("standby still booting, active ready: nothing to do",
     engine(ACTIVE, STANDBY_BOOTING), []),
    ("no lane live, both registrations disabled: enable a first (offline), start b as standby",
     engine({**PARKED_DISABLED, "agent_id": 1}, PARKED_DISABLED),
     [SetEnabled(0, A, 1, True), StartAgent(0, B)]),
    ("a enabled offline, b disabled: start both (a active, b standby)",
     engine({**OFF_ENABLED}, PARKED_DISABLED), [StartAgent(0, A), StartAgent(0, B)]),
    # ------------------------------------------------------------- conflicts: never two capable
    ("both enabled and idle (changed outside gpuci-tui): disable b, enable nothing",
     engine(ACTIVE, {**ACTIVE, "container_id": "cb", "agent_id": 2}),
     [SetEnabled(0, B, 2, False)]),
    ("a busy, b enabled idle: disable b, keep the busy one",
     engine(BUSY, {**ACTIVE, "container_id": "cb", "agent_id": 2}),
     [SetEnabled(0, B, 2, False)]),
    ("both busy: nothing can be done without killing a job",
     engine(BUSY, {**BUSY, "container_id": "cb", "agent_id": 2}), []),
    ("adopted both, nothing read yet: wait for the first read",
     engine(BOOTING_NEW, {**BOOTING_NEW, "container_id": "cb"}, read=None), []),
    # ------------------------------------------------------------- standby off
    ("standby off: exited lane's name free: start it (its registration stays enabled)",
     engine(OFF_ENABLED, UNKNOWN, standby=False), [StartAgent(0, A)]),
    ("standby off: registration disabled (after a drain): enable it before starting",
     engine({**PARKED_DISABLED, "agent_id": 1}, UNKNOWN, standby=False),
     [SetEnabled(0, A, 1, True)]),
    ("standby off: busy active is not disabled", engine(BUSY, UNKNOWN, standby=False), []),
    ("standby turned off: the old standby lane b is stopped",
     engine(ACTIVE, STANDBY, standby=False), [StopAgent(0, B, "cb")]),
    # ------------------------------------------------------------- drain
    ("drain: busy a is disabled and left to finish, idle standby b stopped",
     engine(BUSY, STANDBY, intent=Intent.DRAIN),
     [SetEnabled(0, A, 1, False), StopAgent(0, B, "cb")]),
    ("drain: idle enabled agent is disabled first",
     engine(ACTIVE, UNKNOWN, intent=Intent.DRAIN), [SetEnabled(0, A, 1, False)]),
    ("drain: disabled, not re-checked: re-check before any stop",
     engine({**ACTIVE, "enabled": False}, UNKNOWN, intent=Intent.DRAIN),
     [CheckAgent(0, A, 1)]),
    ("drain: disabled and confirmed idle: stop",
     engine({**ACTIVE, "enabled": False, "idle_verified": True}, UNKNOWN, intent=Intent.DRAIN),
     [StopAgent(0, A, "ca")]),
    ("drain: registration not seen yet: wait for it (its line, or the periodic read)",
     engine(BOOTING_NEW, UNKNOWN, intent=Intent.DRAIN), []),
    ("drain: it said it registered: read it by name",
     engine({**BOOTING_NEW, "said_registered": 28.0}, UNKNOWN, intent=Intent.DRAIN),
     [ReadAgent(0, A, "h-0")]),
    ("drain: nothing is started", engine(UNKNOWN, UNKNOWN, intent=Intent.DRAIN), []),
    # ------------------------------------------------------------- gates
    ("organisation failing: no write, no start that would need one",
     engine(ACTIVE, ABSENT, server_retry_at=NOW + 5), []),
    ("paused: an exited active's standby still takes over, nothing is started",
     engine(dying("ca", agent_id=1, enabled=False, idle_verified=True, known_at=20.0), STANDBY,
            paused=True), [RemoveContainer(0, A, "ca"), SetEnabled(0, B, 2, True)]),
    ("PAT unreadable or engine down: starts wait",
     engine(UNKNOWN, UNKNOWN, start_retry_at=NOW + 2), []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "expected"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS]
)
def test_planner_table(state: EngineState, expected: list[Action]) -> None:
    after, decided = decide(state, NOW)
    got = [a for a in decided.actions if type(a).__name__ != "FetchLogs"]
    assert got == expected
    # What was planned is marked in flight: asking again plans nothing new for those lanes.
    again = [a for a in decide(after, NOW)[1].actions if a in expected]
    assert again == []


# ------------------------------------------------------------------ dead containers
# Agents run without Docker's auto-remove (it drops the logs ~100 ms after ``die``):
# the engine removes each dead container itself, at once, after its tail is read.


def test_a_dead_container_without_a_tail_to_read_is_removed_at_once() -> None:
    state = engine(dying("ca"), UNKNOWN, standby=False)
    after, decided = plan(state, 29.0)
    assert list(decided.actions) == [RemoveContainer(0, A, "ca")]
    assert decided.wake_at is None
    assert actions(after, 29.0) == [], "in flight: not planned twice"


def test_a_failed_container_has_its_tail_read_then_is_removed_at_once() -> None:
    state = engine({**dying("ca"), "logs_of": "ca"}, UNKNOWN, standby=False)
    state, decided = plan(state, 29.0)
    assert list(decided.actions) == [FetchLogs(0, "ca")]
    # Not removed while the read is in flight: the removal would take the logs with it.
    assert plan(state, 29.5)[1].actions == ()
    state = observe(state, LogTail(0, "ca", ("boom",)))
    assert slot0(state).last_exit is None or slot0(state).last_exit.log_tail == ("boom",)
    state, decided = plan(state, 29.01)
    assert list(decided.actions) == [RemoveContainer(0, A, "ca")]
    # Removed: the name is free, the lane is refilled.
    state = observe(state, Removed(0, A, "ca"))
    assert actions(state, 29.02) == [StartAgent(0, A)]


def test_an_unreadable_tail_does_not_keep_the_name_taken() -> None:
    state = engine({**dying("ca"), "logs_of": "ca"}, UNKNOWN, standby=False)
    state, _ = plan(state, 29.0)
    state = observe(state, LogTail(0, "ca", ()))  # the read failed: answered empty
    assert actions(state, 29.01) == [RemoveContainer(0, A, "ca")]


def test_a_failed_removal_is_retried() -> None:
    state = engine(dying("ca"), UNKNOWN, standby=False)
    state, _ = plan(state, 29.0)
    state = observe(state, Removed(0, A, "ca", "Docker could not remove it", 29.1))
    assert slot0(state).lane(A).dying_id == "ca", "it still holds the name"
    state, waiting = plan(state, 29.2)
    assert waiting.actions == () and waiting.wake_at == pytest.approx(29.1 + REMOVE_RETRY)
    state, decided = plan(state, 29.1 + REMOVE_RETRY)
    assert list(decided.actions) == [RemoveContainer(0, A, "ca")]
    state = observe(state, Removed(0, A, "ca"))
    lane = slot0(state).lane(A)
    assert lane.name_free and lane.remove_retry_at is None
    assert actions(state, 31.2) == [StartAgent(0, A)]


def test_a_leftover_that_failed_while_no_supervisor_ran_is_read_then_removed() -> None:
    """A (re)started supervisor finds dead containers of its slots; they hold the names."""
    state = engine(UNKNOWN, UNKNOWN, standby=False)
    labels = {LABEL_SLOT: "0", LABEL_LANE: "a"}
    crashed = ContainerInfo("old", "h-0", labels, "exited", started_at=5.0, exit_code=3)
    done = ContainerInfo("older", "h-0", labels, "exited", started_at=1.0, exit_code=0)
    state = observe(state, Listed(placed((crashed, done)), 30.0))
    last = slot0(state).last_exit
    assert last is not None and last.code == 3 and "found exited" in last.reason
    state, decided = plan(state, 30.0)
    # The job's container goes at once, the failed one after its tail is read.
    assert list(decided.actions) == [FetchLogs(0, "old"), RemoveContainer(0, A, "older")]
    state = observe(state, Removed(0, A, "older"), LogTail(0, "old", ("fatal: bad PAT",)))
    assert slot0(state).last_exit.log_tail == ("fatal: bad PAT",)  # type: ignore[union-attr]
    assert actions(state, 30.1) == [RemoveContainer(0, A, "old")]


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
    assert actions(state) == [RemoveContainer(0, A, "ca"), SetEnabled(0, B, 2, True)]


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
