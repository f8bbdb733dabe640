"""Make before break: the exited active lane is disabled only once the standby's enable is
confirmed (`planning.run`), on the fake clock.

A slot with hot standby: lane ``a`` active, lane ``b`` its ready standby. When
``a``'s container exits after its job, ``b`` is enabled first (the next job takes
no start-up), and ``a``'s registration, still enabled, is disabled for its
restart as the next standby only once that enable is answered. Found by an
outage window that began between the two PATCHes: with both sent at once, the
disable went through and the enable was refused, and the slot was left with two
disabled registrations and no lane the refused rule could restart: no job
until the window ended. Made in this order, a refused enable leaves ``a``
enabled, and it restarts in place (`planning.refused`).

Every step checks the planner's safety rule: never two lanes of a slot that
could take a job.
"""

from __future__ import annotations

import pytest

from gpuci_tui.core.engine.agent.start_gate import GoState
from gpuci_tui.core.engine.agent.steps import GiveGo, GoGiven
from gpuci_tui.core.engine.lifecycle import EngineState, Lane, LanePhase
from gpuci_tui.core.engine.planning.refused import IN_PLACE
from gpuci_tui.core.engine.server_steps import AgentWritten, ServerFailed, SetEnabled
from gpuci_tui.core.engine.steps import (
    Died,
    RemoveContainer,
    Removed,
    StartAgent,
    Started,
)
from gpuci_tui.core.protocols import Agent
from tests.core.lifecycle_helpers import ACTIVE, STANDBY, engine, observe, plan_safely, slot0

A, B = Lane.A, Lane.B
GATED = "s1"
REFUSALS = [
    "HTTP 429 (TF400733: rate-limited); retry after 60 s",
    "HTTP 500 from Azure DevOps",
    "cannot reach dev.azure.com: connection refused",
]


def agent(lane: Lane, *, enabled: bool) -> Agent:
    agent_id, name = (1, "h-0") if lane is A else (2, "h-0-b")
    return Agent(agent_id, name, enabled=enabled, status="online")


plan = plan_safely


def exited(state: EngineState) -> EngineState:
    """The active lane ``a`` ran its job and its container exited at 29."""
    return observe(state, Died(0, A, "ca", 0, 29.0))


def test_the_standby_is_enabled_first_and_the_exited_lane_disabled_once_that_is_answered() -> None:
    state, actions = plan(exited(engine(ACTIVE, STANDBY)), 30.0)
    assert actions == [RemoveContainer(0, A, "ca"), SetEnabled(0, B, 2, True)], "the first write"
    # The dead container is gone before the enable is answered: a is not started (it
    # would come back enabled), nor disabled yet.
    state = observe(state, Removed(0, A, "ca"))
    state, actions = plan(state, 30.1)
    assert actions == []
    assert slot0(state).lane(A).enabled is True
    state = observe(state, AgentWritten(0, B, agent(B, enabled=True), 30.2))
    state, actions = plan(state, 30.2)
    assert actions == [SetEnabled(0, A, 1, False)]
    state = observe(state, AgentWritten(0, A, agent(A, enabled=False), 30.3))
    state, actions = plan(state, 30.3)
    assert actions == [StartAgent(0, A)], "a restarts as the next standby, disabled"
    assert slot0(state).lane(B).capable


@pytest.mark.parametrize("message", REFUSALS)
def test_an_enable_refused_where_the_disable_would_have_gone_through_keeps_intake(
    message: str,
) -> None:
    """The failing run's interleaving: the refusal begins between the two writes."""
    state, actions = plan(exited(engine(ACTIVE, STANDBY)), 30.0)
    assert actions == [RemoveContainer(0, A, "ca"), SetEnabled(0, B, 2, True)]
    state = observe(state, ServerFailed(0, B, message, 90.0), Removed(0, A, "ca"))
    assert state.refusal
    state, actions = plan(state, 30.2)
    assert actions == [StartAgent(0, A)], "a, still enabled, restarts in place: no PATCH"
    slot = slot0(state)
    assert slot.lane(A).in_place and slot.lane(A).enabled is True
    assert slot.message == IN_PLACE.format(name="h-0")
    assert slot.lane(B).enabled is False and slot.lane(B).container_id == "cb"
    # Its new container comes back enabled and takes the next job; nothing is written.
    state = observe(state, Started(0, A, "ca2", 30.6))
    assert plan(state, 31.0)[1] == []
    assert slot0(state).lane(A).capable


@pytest.mark.parametrize("message", REFUSALS)
def test_a_refused_disable_after_the_enable_leaves_the_slot_its_enabled_standby(
    message: str,
) -> None:
    """b was enabled; a's disable is refused: a waits (it would come back enabled, a second
    lane that could take a job), b takes jobs; after b's job, b restarts in place."""
    state, _ = plan(exited(engine(ACTIVE, STANDBY)), 30.0)
    state = observe(state, AgentWritten(0, B, agent(B, enabled=True), 30.1))
    state, actions = plan(state, 30.1)
    assert actions == [SetEnabled(0, A, 1, False)]
    state = observe(state, ServerFailed(0, A, message, 90.0), Removed(0, A, "ca"))
    state, actions = plan(state, 30.2)
    assert actions == [], "a is not started while its registration is enabled"
    state = observe(state, Died(0, B, "cb", 0, 40.0), Removed(0, B, "cb"))
    state, actions = plan(state, 40.1)
    assert actions == [StartAgent(0, B)], "the lane that ran last restarts in place"
    assert slot0(state).lane(B).in_place


def test_with_the_start_gate_a_held_standby_gets_its_go_first() -> None:
    """The new standby is still at its gate (disabled) when the active lane exits: its go
    first, then its enable; the exited lane stays enabled until that enable is answered."""
    held = {**STANDBY, "phase": LanePhase.BOOTING, "online": False, "status": "offline",
            "go": GoState.HELD}  # fmt: skip
    state = observe(
        engine(ACTIVE, held, spec=GATED, gated_specs=frozenset({GATED})),
        Died(0, A, "ca", 0, 29.0),
    )
    state, actions = plan(state, 30.0)
    assert actions == [RemoveContainer(0, A, "ca"), GiveGo(0, B, "cb")]
    state = observe(state, GoGiven(0, B, "cb", 30.1), Removed(0, A, "ca"))
    state, actions = plan(state, 30.2)
    assert actions == [SetEnabled(0, B, 2, True)], "b, booting past its gate, is enabled first"
    state = observe(state, ServerFailed(0, B, REFUSALS[1], 90.0))
    state, actions = plan(state, 30.3)
    assert actions == [StartAgent(0, A, GATED, True)], "a restarts in place, enabled"
    state = observe(state, Started(0, A, "ca2", 30.5, spec=GATED, gated=True))
    state, actions = plan(state, 30.6)
    assert actions == [GiveGo(0, A, "ca2")], "its go needs no call"
