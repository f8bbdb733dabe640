"""The start gate as tables: a gated container registers, waits for our go, and takes no job.

With an image that has the gate (`StartAgent.gated`, `Started.gated`) a lane
name may be registered for the first time at any time: its container is never
capable before the go, a standby-to-be is disabled before its go, and the lane
that is to take jobs gets its go only while no other lane of its slot can take
one. Images without the gate keep the old rules (tests/core/engine/test_planner.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.core.engine.agent.output import AwaitingGo
from gpuci_tui.core.engine.agent.start_gate import GoState
from gpuci_tui.core.engine.agent.steps import AgentSaid, GiveGo, GoGiven, ReadAgent
from gpuci_tui.core.engine.lifecycle import (
    EngineState,
    Intent,
    Lane,
    LanePhase,
    LaneRecord,
    lane_name,
)
from gpuci_tui.core.engine.planning.planner import decide
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.server_steps import AgentChecked, AgentWritten, SetEnabled
from gpuci_tui.core.engine.standby.auto import AutoStandby, registering
from gpuci_tui.core.engine.steps import (
    Action,
    Listed,
    ListedContainer,
    StartAgent,
    Started,
    StartFailed,
    StopAgent,
)
from gpuci_tui.core.protocols import Agent, ContainerInfo
from tests.core.lifecycle_helpers import (
    ABSENT,
    ACTIVE,
    BUSY,
    NOW,
    PARKED_DISABLED,
    STANDBY,
    actions,
    dying,
    engine,
    observe,
    slot0,
)

A, B = Lane.A, Lane.B
SPEC = "s1"

#: A gated container that has not said anything yet; its name was never registered.
HELD_NEW: dict[str, Any] = {
    "phase": LanePhase.BOOTING, "container_id": "cb", "started_at": 25.0, "go": GoState.HELD,
    "known_at": 20.0, "spec": SPEC,
}  # fmt: skip
#: It said it registered (start.sh's line): a new name is read once, by name.
HELD_SAID = {**HELD_NEW, "said_registered": 28.0}
#: Read: its fresh registration came up enabled.
HELD_ENABLED = {**HELD_SAID, "agent_id": 2, "enabled": True, "known_at": 29.0}
#: Disabled by us while at the gate: no session, so no job (idle verified).
HELD_DISABLED = {**HELD_ENABLED, "enabled": False, "idle_verified": True}


def gated(a: dict[str, Any] | None, b: dict[str, Any] | None, **kw: Any) -> EngineState:
    """One slot whose spec's image has the start gate."""
    return engine(a, b, spec=SPEC, gated_specs=frozenset({SPEC}), **kw)


def held_a(**registration: Any) -> dict[str, Any]:
    return {**HELD_NEW, "container_id": "ca", **registration}


def with_c(state: EngineState, c: dict[str, Any]) -> EngineState:
    """``state`` with a third lane (two standbys)."""
    slot = slot0(state)
    lane = replace(LaneRecord(Lane.C, lane_name("h", 0, Lane.C)), **c)
    return replace(state.with_slot(slot.with_lane(lane)), standby=2)


ROWS: list[tuple[str, EngineState, list[Action]]] = [
    ("gated, idle slot: a new name is registered at once, next to the active one",
     gated(ACTIVE, ABSENT), [StartAgent(0, B, SPEC, True)]),
    ("gated, active busy: a new name is still registered (without the gate it waits)",
     gated({**BUSY, "enabled": False}, ABSENT), [StartAgent(0, B, SPEC, True)]),
    ("gated, nothing registered yet: a and b start together",
     gated(ABSENT, ABSENT), [StartAgent(0, A, SPEC, True), StartAgent(0, B, SPEC, True)]),
    ("a held new lane says nothing yet: wait (no read, no go)",
     gated(ACTIVE, HELD_NEW), []),
    ("a held new lane said it registered: read it once, by name",
     gated(ACTIVE, HELD_SAID), [ReadAgent(0, B, "h-0-b")]),
    ("a held new lane read again after its line: no second read",
     gated(ACTIVE, {**HELD_SAID, "known_at": 28.5}), []),
    ("a held standby-to-be, enabled (a fresh registration): disable it before its go",
     gated(ACTIVE, HELD_ENABLED), [SetEnabled(0, B, 2, False)]),
    ("a held standby-to-be, disabled: its go",
     gated(ACTIVE, HELD_DISABLED), [GiveGo(0, B, "cb")]),
    ("a held standby-to-be, enabled, next to a busy lane: the same (disabled first, never a job)",
     gated(BUSY, HELD_ENABLED), [SetEnabled(0, B, 2, False)]),
    ("a held lane, enabled, next to a busy lane being taken out (disabled): it stays enabled"
     " (make before break) and gets its go as the active one once that lane has exited",
     gated({**BUSY, "enabled": False}, HELD_ENABLED), []),
    ("re-registration of a disabled name: its go at once (--replace keeps the flag)",
     gated(ACTIVE, {**HELD_NEW, **PARKED_DISABLED}), [GiveGo(0, B, "cb")]),
    ("nothing capable; a held, enabled and known: a gets its go, b (new) waits",
     gated(held_a(agent_id=1, enabled=True), HELD_NEW), [GiveGo(0, A, "ca")]),
    ("nothing capable; both held and unknown: wait, and start nothing else",
     gated(held_a(), HELD_NEW), []),
    ("nothing capable; b ready standby, a held: the standby is enabled, a waits",
     gated(held_a(), STANDBY), [SetEnabled(0, B, 2, True)]),
    ("the active died; a ready standby and a held new lane: enable the standby",
     with_c(gated(dying("ca", agent_id=1, enabled=False, idle_verified=True, known_at=20.0),
                  STANDBY), {**HELD_NEW, "container_id": "cc"}),
     [SetEnabled(0, B, 2, True)]),
    ("the go could not be written: the held container is stopped, never enabled",
     gated(ACTIVE, {**HELD_DISABLED, "go": GoState.REFUSED}), [StopAgent(0, B, "cb")]),
    ("drain: a held container is stopped at once (no job possible, no read needed)",
     gated(ACTIVE, HELD_ENABLED, intent=Intent.DRAIN),
     [SetEnabled(0, A, 1, False), StopAgent(0, B, "cb")]),
    ("adopted gated active that says it still waits: its go again",
     gated({**ACTIVE, "go": GoState.ASSUMED, "online": False, "phase": LanePhase.BOOTING,
            "said_registered": 28.0}, STANDBY), [GiveGo(0, A, "ca")]),
]  # fmt: skip


@pytest.mark.parametrize(("state", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_gate_table(state: EngineState, expected: list[Action]) -> None:
    after, decided = decide(state, NOW)
    got = [a for a in decided.actions if type(a).__name__ not in ("FetchLogs", "RemoveContainer")]
    assert got == expected
    # Never two capable lanes, whatever was planned (in flight counts).
    assert sum(lane.capable for lane in slot0(after).lanes) <= 1


def test_a_gated_start_holds_the_lane_and_teaches_the_spec() -> None:
    state = engine(ACTIVE, ABSENT, spec=SPEC)
    state = observe(state, Started(0, B, "cb", NOW, spec=SPEC, gated=True))
    lane = slot0(state).lane(B)
    assert lane.go is GoState.HELD and lane.held and not lane.capable
    assert state.gated(SPEC)


def test_an_image_that_lost_its_gate_is_planned_without_it_and_not_counted() -> None:
    state = gated(ACTIVE, ABSENT)
    after, _ = decide(state, NOW)  # b's gated start in flight
    failed = observe(after, StartFailed(0, B, "gate", "no label", NOW))
    assert not failed.gated(SPEC) and slot0(failed).failures == 0
    assert slot0(failed).lane(B).retry_at == NOW + 1.0
    # Without the gate a new name waits for an idle slot again: a is set aside first.
    assert actions(failed, NOW + 2) == [SetEnabled(0, A, 1, False)]


def test_a_failed_go_counts_as_a_failed_start() -> None:
    state = gated(ACTIVE, HELD_DISABLED)
    after, _ = decide(state, NOW)
    refused = observe(after, GoGiven(0, B, "cb", NOW, "container not running"))
    slot = slot0(refused)
    assert slot.lane(B).go is GoState.REFUSED and slot.failures == 1
    assert not slot.lane(B).capable


def test_a_new_gated_lane_goes_from_registered_to_standby() -> None:
    """The whole way, as observations: line, read by name, disable, go."""
    state = gated(ACTIVE, HELD_NEW)
    state = observe(state, AgentSaid(0, B, "cb", AwaitingGo("h-0-b", "/run/azp/go"), 28.0))
    assert actions(state) == [ReadAgent(0, B, "h-0-b")]
    fresh = Agent(2, "h-0-b", enabled=True, status="offline")
    state = observe(decide(state, NOW)[0], AgentChecked(0, B, fresh, NOW))
    assert actions(state) == [SetEnabled(0, B, 2, False)]
    off = replace(fresh, enabled=False)
    state = observe(decide(state, NOW)[0], AgentWritten(0, B, off, NOW + 0.1))
    assert slot0(state).lane(B).disabled_idle
    assert actions(state, NOW + 0.2) == [GiveGo(0, B, "cb")]
    state = observe(decide(state, NOW + 0.2)[0], GoGiven(0, B, "cb", NOW + 0.3))
    lane = slot0(state).lane(B)
    assert lane.go is GoState.GIVEN and not lane.capable  # a standby: disabled, idle


def test_adopted_gated_containers_count_as_past_the_gate() -> None:
    info = ContainerInfo("cx", "h-0", {}, "running", started_at=5.0)
    state = engine(None, None, spec=SPEC)
    state = observe(state, Listed((ListedContainer(0, A, info, SPEC, gated=True),), NOW))
    lane = slot0(state).lane(A)
    assert lane.go is GoState.ASSUMED and lane.capable
    assert state.gated(SPEC)


def test_auto_registers_nothing_ahead_with_the_gate() -> None:
    auto = AutoStandby(least=1, most=3)
    state = engine(ACTIVE, STANDBY, auto=auto, read=PoolView(42, 20.0))
    fresh = [replace(lane, known_at=20.0) for lane in slot0(state).lanes]
    gated_state = replace(state, spec=SPEC, gated_specs=frozenset({SPEC}))
    assert registering(gated_state, slot0(gated_state), fresh) is None
