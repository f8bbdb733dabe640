"""Intake while the organisation refuses our calls (`planning.refused`), on the fake clock.

A slot with hot standby: lane ``a`` active, lane ``b`` its ready standby. The
organisation then refuses the daemon's calls (429, 500, unreachable; reads,
writes or both) while the agents go on. Each table row is one way the refusal
shows; what must follow is the same every time:

* the exited active lane restarts in place (StartAgent, no PATCH) as soon as its
  dead container is removed; the standby is not enabled and keeps its container;
* a busy active lane is not disabled (never, for the hand-over: its exit is);
* once a call is answered, the hot standby is back: a lane restarted in place
  that is still starting gives way to the ready standby (disable, re-read, enable).

Every step checks the planner's safety rule: never two lanes of a slot that could
take a job.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuci_tui.core.engine.agent.output import AwaitingGo
from gpuci_tui.core.engine.agent.steps import AgentSaid, GiveGo, GoGiven
from gpuci_tui.core.engine.lifecycle import EngineState, Lane, LanePhase
from gpuci_tui.core.engine.planning.refused import ALL_DISABLED, IN_PLACE
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.server_steps import (
    AgentChecked,
    AgentWritten,
    CheckAgent,
    PoolRead,
    PoolUnread,
    ServerFailed,
    SetEnabled,
)
from gpuci_tui.core.engine.steps import (
    Died,
    Observation,
    RemoveContainer,
    Removed,
    StartAgent,
    Started,
)
from gpuci_tui.core.protocols import Agent, JobRequest
from tests.core.lifecycle_helpers import ACTIVE, BUSY, STANDBY, engine, observe, plan_safely, slot0

A, B = Lane.A, Lane.B
RATE_LIMITED = "HTTP 429 (TF400733: rate-limited); retry after 60 s"
SERVER_ERROR = "HTTP 500 from Azure DevOps"
UNREACHABLE = "cannot reach dev.azure.com: connection refused"


def agent_a(*, enabled: bool = True, online: bool = True, job: int | None = None) -> Agent:
    request = JobRequest(request_id=job) if job is not None else None
    status = "online" if online else "offline"
    return Agent(1, "h-0", enabled=enabled, status=status, assigned_request=request)


def agent_b(*, enabled: bool = False, job: int | None = None) -> Agent:
    request = JobRequest(request_id=job) if job is not None else None
    return Agent(2, "h-0-b", enabled=enabled, status="online", assigned_request=request)


def read(at: float, *agents: Agent, queued: int = 3) -> PoolRead:
    return PoolRead(PoolView(pool_id=42, began_at=at, agents=agents, queued_jobs=queued))


plan = plan_safely


def refused_by(*observations: Observation) -> EngineState:
    """A steady slot (a active, b ready standby) after the organisation refused us."""
    return observe(engine(ACTIVE, STANDBY), *observations)


# How the daemon learns that the organisation refuses it, at t=25 (retry at 85):
# its own read fails (reads refused: a throttled identity is refused everywhere), a
# write fails (writes refused), or both.
WAYS: list[tuple[str, tuple[Observation, ...]]] = [
    ("429 on reads", (PoolUnread(25.0, 85.0, RATE_LIMITED),)),
    ("429 on writes", (ServerFailed(0, A, RATE_LIMITED, 85.0),)),
    ("429 on both", (PoolUnread(25.0, 85.0, RATE_LIMITED), ServerFailed(0, A, RATE_LIMITED, 85.0))),
    ("500 on reads", (PoolUnread(25.0, 85.0, SERVER_ERROR),)),
    ("500 on writes", (ServerFailed(0, B, SERVER_ERROR, 85.0),)),
    ("unreachable", (PoolUnread(25.0, 85.0, UNREACHABLE),)),
]  # fmt: skip


@pytest.mark.parametrize("observations", [w[1] for w in WAYS], ids=[w[0] for w in WAYS])
def test_an_exited_active_lane_restarts_in_place_without_a_patch(
    observations: tuple[Observation, ...],
) -> None:
    state = refused_by(*observations)
    assert state.refusal
    # The active agent ran a job the daemon never saw (no reads) and exited.
    state = observe(state, Died(0, A, "ca", 0, 29.0))
    state, actions = plan(state, 30.0)
    assert actions == [RemoveContainer(0, A, "ca")], "no PATCH: the standby is not enabled"
    assert slot0(state).message == IN_PLACE.format(name="h-0")
    state = observe(state, Removed(0, A, "ca"))
    state, actions = plan(state, 30.1)
    assert actions == [StartAgent(0, A)]
    lane = slot0(state).lane(A)
    assert lane.in_place and lane.enabled is True
    assert slot0(state).lane(B).container_id == "cb", "the standby keeps its container"
    # Its new container comes back enabled and takes the next job; the standby waits.
    state = observe(state, Started(0, A, "ca2", 30.6))
    state, actions = plan(state, 31.0)
    assert actions == []
    assert slot0(state).message == IN_PLACE.format(name="h-0"), "said for as long as it lasts"
    # ...and again after that job: one job per start-up + job, in place, for as long as it lasts.
    state = observe(state, Died(0, A, "ca2", 0, 42.6), Removed(0, A, "ca2"))
    assert plan(state, 42.7)[1] == [StartAgent(0, A)]


@pytest.mark.parametrize("message", [RATE_LIMITED, SERVER_ERROR, UNREACHABLE])
def test_a_refusal_that_begins_mid_job_strands_no_slot(message: str) -> None:
    """The busy lane is still enabled: it restarts in place after its job, refused or not."""
    state = engine(BUSY, STANDBY)
    assert plan(state, 24.0)[1] == [], "not disabled while busy, even while writes work"
    state = observe(state, PoolUnread(25.0, 28.0, message), Died(0, A, "ca", 0, 29.0))
    assert plan(state, 29.1)[1] == [RemoveContainer(0, A, "ca")]
    state = observe(plan(state, 29.1)[0], Removed(0, A, "ca"))
    assert plan(state, 29.2)[1] == [StartAgent(0, A)]


def test_429_on_writes_only_each_read_ends_the_refusal_and_the_next_write_probes() -> None:
    """Reads work: each ends the refusal; an exit tries the hand-over, refused, then in place."""
    state = refused_by(ServerFailed(0, A, RATE_LIMITED, 85.0))
    state = observe(state, read(26.0, agent_a(), agent_b()))
    assert state.refusal == "" and state.server_retry_at == 0.0
    state = observe(state, Died(0, A, "ca", 0, 29.0))
    state, actions = plan(state, 30.0)
    assert actions == [RemoveContainer(0, A, "ca"), SetEnabled(0, B, 2, True)], "a stays enabled"
    # Answered from the client's memory of the 429: refused again.
    state = observe(state, ServerFailed(0, B, RATE_LIMITED, 85.0), Removed(0, A, "ca"))
    assert plan(state, 30.2)[1] == [StartAgent(0, A)]


def test_a_lane_disabled_before_the_refusal_cannot_take_jobs_until_writes_work() -> None:
    """Its disable went through while it was busy: nothing can enable a lane meanwhile."""
    state = observe(
        engine(BUSY, STANDBY),
        AgentWritten(0, A, agent_a(enabled=False, job=7), 24.0),
        PoolUnread(25.0, 85.0, RATE_LIMITED),
        Died(0, A, "ca", 0, 29.0),
    )
    state, actions = plan(state, 30.0)
    assert actions == [RemoveContainer(0, A, "ca")]
    assert slot0(state).message == ALL_DISABLED.format(names="h-0, h-0-b")
    # It comes back as a second standby (disabled): ready for when writes work.
    state = observe(state, Removed(0, A, "ca"))
    state, actions = plan(state, 30.1)
    assert actions == [StartAgent(0, A)]
    assert not slot0(state).lane(A).in_place
    # Past the backoff the enable of the ready standby is tried: the probe for writes.
    assert plan(state, 86.0)[1] == [SetEnabled(0, B, 2, True)]


def test_window_ending_while_the_in_place_lane_starts_hands_over_to_the_ready_standby() -> None:
    state = refused_by(PoolUnread(25.0, 85.0, RATE_LIMITED))
    state = observe(state, Died(0, A, "ca", 0, 29.0), Removed(0, A, "ca"))
    state, _ = plan(state, 30.0)
    state = observe(state, Started(0, A, "ca2", 30.5))
    state, _ = plan(state, 31.0)
    assert slot0(state).message == IN_PLACE.format(name="h-0")
    # The first answered read: a is still registering (offline), b ready and idle.
    state = observe(state, read(33.0, agent_a(online=False), agent_b()))
    assert state.refusal == "" and slot0(state).message == "", "no longer said"
    state, actions = plan(state, 33.1)
    assert actions == [SetEnabled(0, A, 1, False)], "b may not be enabled while a could take a job"
    state = observe(state, AgentWritten(0, A, agent_a(enabled=False, online=False), 33.2))
    state, actions = plan(state, 33.2)
    assert actions == [CheckAgent(0, A, 1)], "a job may have reached a meanwhile: re-read"
    state = observe(state, AgentChecked(0, A, agent_a(enabled=False, online=False), 33.25))
    state, actions = plan(state, 33.3)
    assert actions == [SetEnabled(0, B, 2, True)], "the standby takes the next job: no start-up"
    state = observe(state, AgentWritten(0, B, agent_b(enabled=True), 33.4))
    slot = slot0(state)
    assert slot.lane(B).capable and not slot.lane(A).capable
    assert slot.lane(A).live, "a stays, as the next standby"


def test_window_ending_mid_job_the_exit_enables_the_standby_as_usual() -> None:
    state = refused_by(PoolUnread(25.0, 85.0, SERVER_ERROR))
    state = observe(state, Died(0, A, "ca", 0, 29.0), Removed(0, A, "ca"))
    state, _ = plan(state, 30.0)
    state = observe(state, Started(0, A, "ca2", 30.5))
    # Answered again while the in-place lane runs a job: nothing to do until it ends.
    state = observe(state, read(41.0, agent_a(job=9), agent_b()))
    assert plan(state, 41.1)[1] == []
    state = observe(state, Died(0, A, "ca2", 0, 42.5))
    state, actions = plan(state, 42.6)
    assert actions == [RemoveContainer(0, A, "ca2"), SetEnabled(0, B, 2, True)]


def test_window_ending_with_the_in_place_lane_ready_changes_nothing() -> None:
    """It takes the next job itself at once: no calls for a hand-over."""
    state = refused_by(PoolUnread(25.0, 85.0, UNREACHABLE))
    state = observe(state, Died(0, A, "ca", 0, 29.0), Removed(0, A, "ca"))
    state, _ = plan(state, 30.0)
    state = observe(state, Started(0, A, "ca2", 30.5), read(41.0, agent_a(), agent_b()))
    assert slot0(state).lane(A).phase is LanePhase.READY
    assert plan(state, 41.1)[1] == []


def test_a_started_lane_that_is_not_in_place_never_hands_over() -> None:
    """The hand-back is for lanes restarted in place: a hot standby's usual path costs nothing."""
    booting = {**ACTIVE, "phase": LanePhase.BOOTING, "online": False, "status": "offline"}
    assert plan(engine(booting, STANDBY), 30.0)[1] == []


def test_two_slots_each_keep_their_own_lane() -> None:
    """Slot 0's active exits, slot 1's is busy: 0 restarts in place, 1 is left alone."""
    state = refused_by()
    one = replace(slot0(state), number=1)
    one = one.with_lane(replace(one.lane(A), name="h-1", **{k: BUSY[k] for k in ("job", "phase")}))
    one = one.with_lane(replace(one.lane(B), name="h-1-b", container_id="cb1"))
    state = replace(state, desired=2).with_slot(one)
    state = observe(state, PoolUnread(25.0, 85.0, RATE_LIMITED), Died(0, A, "ca", 0, 29.0))
    state = observe(state, Removed(0, A, "ca"))
    state, actions = plan(state, 30.0)
    assert actions == [StartAgent(0, A)]
    assert state.slot(1) is not None and state.slot(1).lane(A).enabled is True  # type: ignore[union-attr]


def test_without_standby_the_usual_rules_restart_in_place_and_say_nothing_more() -> None:
    state = observe(
        engine(ACTIVE, None, standby=False),
        PoolUnread(25.0, 85.0, RATE_LIMITED),
        Died(0, A, "ca", 0, 29.0),
        Removed(0, A, "ca"),
    )
    state, actions = plan(state, 30.0)
    assert actions == [StartAgent(0, A)]
    assert not slot0(state).lane(A).in_place


def test_an_answered_write_ends_the_refusal_too() -> None:
    state = refused_by(ServerFailed(0, B, SERVER_ERROR, 31.0))
    state = observe(state, AgentWritten(0, B, agent_b(), 32.0))
    assert state.refusal == ""


def test_no_such_agent_is_an_answer_not_a_refusal() -> None:
    state = refused_by(ServerFailed(0, B, "agent 2 not found", 31.0, gone=True))
    assert state.refusal == ""


GATED = "s1"
"""A spec whose image has the start gate (its agents wait for our go after registering)."""


def test_with_the_start_gate_a_lane_restarted_in_place_gets_its_go_with_no_call() -> None:
    """The go is a file put into the container: its registration's id and flag are known
    (the re-registration keeps them), so no read by name and no PATCH come first."""
    state = observe(
        engine(ACTIVE, STANDBY, spec=GATED, gated_specs=frozenset({GATED})),
        PoolUnread(25.0, 85.0, RATE_LIMITED),
        Died(0, A, "ca", 0, 29.0),
        Removed(0, A, "ca"),
    )
    state, actions = plan(state, 30.0)
    assert actions == [StartAgent(0, A, GATED, True)]
    state = observe(state, Started(0, A, "ca2", 30.5, spec=GATED, gated=True))
    assert slot0(state).lane(A).held and slot0(state).lane(A).in_place
    state, actions = plan(state, 30.6)
    assert actions == [GiveGo(0, A, "ca2")], "no ReadAgent, no SetEnabled, no standby enabled"
    assert slot0(state).message == IN_PLACE.format(name="h-0")
    said = AgentSaid(0, A, "ca2", AwaitingGo("h-0", "/run/azp/go"), 31.0)
    state = observe(state, GoGiven(0, A, "ca2", 30.7), said)
    state, actions = plan(state, 31.1)
    assert actions == []
    slot = slot0(state)
    assert slot.lane(A).capable and slot.lane(B).container_id == "cb"
    assert slot.message == IN_PLACE.format(name="h-0")


def test_with_the_start_gate_an_answer_before_the_go_hands_over_to_the_ready_standby() -> None:
    """Writes work again while the in-place lane still waits at the gate: the ready standby
    takes the next job at once, and the held lane is made the next standby (disabled, then
    its go)."""
    state = observe(
        engine(ACTIVE, STANDBY, spec=GATED, gated_specs=frozenset({GATED})),
        PoolUnread(25.0, 85.0, RATE_LIMITED),
        Died(0, A, "ca", 0, 29.0),
        Removed(0, A, "ca"),
    )
    state, _ = plan(state, 30.0)
    state = observe(state, Started(0, A, "ca2", 30.5, spec=GATED, gated=True))
    state = observe(state, read(30.55, agent_a(online=False), agent_b()))
    state, actions = plan(state, 30.6)
    assert actions == [SetEnabled(0, B, 2, True)], "a stays enabled until b's enable is answered"
    state = observe(state, AgentWritten(0, B, agent_b(enabled=True), 30.7))
    state, actions = plan(state, 30.8)
    assert actions == [SetEnabled(0, A, 1, False)], "then a is made the next standby"
