"""Transitions as tables: (state, observation) → new state and notes, on a fake clock."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuci_tui.core.docker.agentspec import LABEL_LANE, LABEL_SLOT, placed
from gpuci_tui.core.engine.lifecycle import EngineState, Intent, Lane, LanePhase
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.server_steps import AgentChecked, AgentWritten, PoolRead
from gpuci_tui.core.engine.snapshots import slot_state
from gpuci_tui.core.engine.steps import (
    Destroyed,
    Died,
    JobEnded,
    Listed,
    Note,
    OutOfMemory,
    Started,
    StartFailed,
)
from gpuci_tui.core.engine.transitions.apply import ENGINE_RETRY, TOKEN_RETRY, apply
from gpuci_tui.core.models import HealthState, SlotState
from gpuci_tui.core.protocols import Agent, ContainerInfo, JobRequest
from tests.core.lifecycle_helpers import (
    ACTIVE,
    BUSY,
    RULES,
    STANDBY,
    UNKNOWN,
    engine,
    observe,
    slot0,
)

A, B = Lane.A, Lane.B
CID = "c" * 64


def started(at: float = 100.0, **lane: object) -> EngineState:
    state = engine(UNKNOWN, UNKNOWN, standby=False)
    state = observe(state, Started(0, A, CID, at))
    if lane:
        state = state.with_slot(slot0(state).with_lane(replace(slot0(state).lane(A), **lane)))
    return state


# --------------------------------------------------------------------------- exits


@pytest.mark.parametrize(
    ("code", "failure", "reason"),
    [
        (1, True, "exit code 1: agent stopped with an error (see the log tail)"),
        (
            10,
            True,
            "exit code 10: agent registration failed: check the PAT, its scope, the pool and the URL",
        ),
        (137, True, "exit code 137: killed (SIGKILL: stop timeout or out of memory)"),
        # An idle agent (a standby) stopped by a signal lost nothing: say so.
        (143, False, "exit code 143: stopped (SIGTERM) while idle"),
        (0, False, "exited 0"),
        (None, False, "gone while the Docker engine was unreachable (exit code unknown)"),
    ],
)
def test_what_counts_as_a_failure(code: int | None, failure: bool, reason: str) -> None:
    state = observe(started(), Died(0, A, CID, code, 101.0))
    slot = slot0(state)
    assert slot.last_exit is not None and slot.last_exit.reason == reason
    assert (slot.failures == 1) is failure
    assert slot.lane(A).dying_id == CID and slot.lane(A).phase is LanePhase.EXITED


def test_a_stop_signal_during_a_job_says_the_job_was_cancelled() -> None:
    state = observe(started(took_job=True, job=BUSY["job"]), Died(0, A, CID, 143, 101.0))
    exit_info = slot0(state).last_exit
    assert exit_info is not None
    assert exit_info.reason == "exit code 143: stopped (SIGTERM); its running job was cancelled"


def test_a_job_taken_is_never_a_failure_and_is_reported_for_the_history() -> None:
    state = started(took_job=True, job=BUSY["job"])
    # (A non-zero exit under the job loses it: tests/core/engine/test_killed_job.py.)
    step = apply(state, Died(0, A, CID, 0, 101.0), RULES)
    slot = slot0(step.state)
    assert slot.failures == 0 and slot.last_exit is not None and slot.last_exit.took_job
    assert slot.jobs_done == 1
    ended = [o for o in step.outputs if isinstance(o, JobEnded)]
    assert ended and ended[0].job == BUSY["job"] and ended[0].started_at == 100.0
    assert [o.kind for o in step.outputs if isinstance(o, Note)] == [
        "container_exited",
        "job_finished",
    ]


def test_backoff_doubles_then_parks_with_the_reason() -> None:
    state, now, delays = started(), 100.0, []
    for _ in range(RULES.park_after):
        state = observe(state, Died(0, A, CID, 1, now))
        slot = slot0(state)
        if slot.parked:
            break
        assert slot.backoff_until is not None
        delays.append(slot.backoff_until - now)
        now = slot.backoff_until
        cleared = replace(slot.lane(A), dying_id=None, phase=LanePhase.EMPTY)
        state = observe(state.with_slot(slot.with_lane(cleared)), Started(0, A, CID, now))
    assert delays == [2.0, 4.0, 8.0, 16.0]
    slot = slot0(state)
    assert slot.parked and slot_state(replace(slot, lanes=(replace(slot.lanes[0],
        dying_id=None), slot.lanes[1])), now) is SlotState.PARKED  # fmt: skip
    assert (
        slot.message
        == "parked after 5 failed starts: exit code 1: agent stopped with an error (see the log tail)"
    )


def test_an_agent_leaving_to_update_never_steps_towards_parking() -> None:
    # Issue 20: exit 12 (the organisation wants a newer agent) once parked every slot.
    state, now = started(), 100.0
    for _ in range(RULES.park_after + 2):
        step = apply(state, Died(0, A, CID, 12, now + 1.0), RULES)
        slot = slot0(step.state)
        assert not slot.parked and slot.failures == 0
        assert [o.kind for o in step.outputs if isinstance(o, Note)] == ["agent_updating"]
        assert slot.last_exit is not None
        assert slot.last_exit.reason == (
            "exit code 12: agent left to update itself (the organisation requires a newer agent)"
        )
        now = (slot.backoff_until or now + 1.0) + 1.0
        cleared = replace(slot.lane(A), dying_id=None, phase=LanePhase.EMPTY)
        state = observe(step.state.with_slot(slot.with_lane(cleared)), Started(0, A, CID, now))


def test_only_a_repeated_update_exit_waits_before_the_next_start() -> None:
    # The first update exit: the next container gets the cached package at once.
    state = observe(started(at=100.0), Died(0, A, CID, 12, 101.0))
    slot = slot0(state)
    assert slot.backoff_until is None and slot.update_exit_at == 101.0
    assert slot.message == "agent left to update; the next container uses the cached package"
    # A container started after it left again: the cache did not help; pause, not park.
    cleared = replace(slot.lane(A), dying_id=None, phase=LanePhase.EMPTY)
    state = observe(state.with_slot(slot.with_lane(cleared)), Started(0, A, CID, 102.0))
    slot = slot0(observe(state, Died(0, A, CID, 12, 103.0)))
    assert slot.backoff_until == 133.0 and slot.failures == 0 and not slot.parked
    assert slot.update_exit_at == 101.0  # the episode's first exit, not the latest
    # A job done clears the memory: the next update is a new one.
    cleared = replace(slot.lane(A), dying_id=None, phase=LanePhase.EMPTY)
    state = observe(state.with_slot(slot.with_lane(cleared)), Started(0, A, CID, 140.0))
    busy = slot0(state).with_lane(replace(slot0(state).lane(A), took_job=True, job=BUSY["job"]))
    slot = slot0(observe(state.with_slot(busy), Died(0, A, CID, 0, 150.0)))
    assert slot.update_exit_at is None


def test_an_update_exit_of_a_container_we_stopped_is_our_stop() -> None:
    state = observe(started(stop_requested=True), Died(0, A, CID, 12, 101.0))
    assert slot0(state).update_exit_at is None


def test_our_own_stop_is_not_a_failure_and_drain_ends_drained() -> None:
    state = started(stop_requested=True)
    state = state.with_slot(replace(slot0(state), intent=Intent.DRAIN))
    state = observe(state, Died(0, A, CID, 143, 101.0), Destroyed(0, A, CID, 101.1))
    slot = slot0(state)
    assert slot.failures == 0
    assert slot.last_exit is not None and slot.last_exit.reason == "stopped by gpuci-tui"
    assert slot_state(slot, 102.0) is SlotState.DRAINED and slot.message == "drained"


def test_oom_is_remembered_for_the_exit() -> None:
    state = observe(started(), OutOfMemory(0, A, CID), Died(0, A, CID, 137, 101.0))
    last = slot0(state).last_exit
    assert last is not None and last.oom and last.reason == "killed by the OOM killer"


def test_an_exit_reported_before_start_returned_is_applied_on_start() -> None:
    state = engine(UNKNOWN, UNKNOWN, standby=False)
    slot = slot0(state)
    starting = replace(slot.lane(A), op=None, phase=LanePhase.STARTING)
    from gpuci_tui.core.engine.lifecycle import Op

    state = state.with_slot(slot.with_lane(replace(starting, op=Op.START)))
    state = observe(state, Died(0, A, CID, 1, 100.05), Destroyed(0, A, CID, 100.1))
    assert slot0(state).lane(A).early_exit is not None
    state = observe(state, Started(0, A, CID, 100.0))
    lane = slot0(state).lane(A)
    assert lane.container_id is None and lane.dying_id is None and slot0(state).failures == 1


# --------------------------------------------------------------------------- start failures


def test_start_failures_by_whose_fault() -> None:
    base = engine(UNKNOWN, UNKNOWN, standby=False)
    conflict = observe(base, StartFailed(0, A, "conflict", "name taken", 50.0))
    assert slot0(conflict).lane(A).retry_at == pytest.approx(50.1) and slot0(conflict).failures == 0
    down = observe(base, StartFailed(0, A, "engine", "Cannot connect", 50.0))
    assert down.start_retry_at == 50.0 + ENGINE_RETRY and slot0(down).failures == 0
    assert down.docker.state is HealthState.UNREACHABLE
    token = observe(base, StartFailed(0, A, "token", "keyring locked", 50.0))
    assert token.start_retry_at == 50.0 + TOKEN_RETRY and slot0(token).failures == 0
    image = observe(base, StartFailed(0, A, "start", "image not present", 50.0))
    assert slot0(image).failures == 1 and slot0(image).backoff_until == 52.0
    assert slot0(image).last_exit is not None
    assert slot0(image).last_exit.reason == "start failed: image not present"


# --------------------------------------------------------------------------- what the server said


def agent(
    id_: int, name: str, *, enabled: bool = True, status: str = "online", job: int | None = None
) -> Agent:
    request = JobRequest(request_id=job, definition_name="train") if job else None
    return Agent(id=id_, name=name, enabled=enabled, status=status, assigned_request=request)


def test_a_read_older_than_our_write_does_not_undo_it() -> None:
    state = engine({**ACTIVE, "known_at": 25.0, "enabled": False}, UNKNOWN)
    stale = PoolView(42, began_at=24.0, agents=(agent(1, "h-0", enabled=True),))
    lane = slot0(observe(state, PoolRead(stale))).lane(A)
    assert lane.enabled is False
    fresh = replace(stale, began_at=26.0)
    assert slot0(observe(state, PoolRead(fresh))).lane(A).enabled is True


def test_a_job_counts_only_for_a_container_started_before_the_read() -> None:
    state = engine({**ACTIVE, "started_at": 21.0, "phase": LanePhase.BOOTING}, UNKNOWN)
    old_session = PoolView(42, began_at=20.5, agents=(agent(1, "h-0", job=7),))
    assert slot0(observe(state, PoolRead(old_session))).lane(A).job is None
    after = replace(old_session, began_at=22.0)
    lane = slot0(observe(state, PoolRead(after))).lane(A)
    assert lane.job is not None and lane.phase is LanePhase.BUSY and lane.took_job


def test_a_read_confirms_a_disabled_idle_registration_and_an_absent_name() -> None:
    state = engine(ACTIVE, UNKNOWN)
    read = PoolView(42, began_at=26.0, agents=(agent(1, "h-0", enabled=False),))
    slot = slot0(observe(state, PoolRead(read)))
    assert slot.lane(A).disabled_idle and not slot.lane(A).capable
    assert slot.lane(B).agent_id is None and slot.lane(B).known_at == 26.0


def test_disable_of_a_live_lane_needs_a_re_read_but_not_of_a_dead_one() -> None:
    live = engine(ACTIVE, UNKNOWN)
    written = observe(live, AgentWritten(0, A, agent(1, "h-0", enabled=False), 27.0))
    assert not slot0(written).lane(A).idle_verified and slot0(written).lane(A).capable
    checked = observe(written, AgentChecked(0, A, agent(1, "h-0", enabled=False), 27.5))
    assert slot0(checked).lane(A).disabled_idle
    busy = observe(written, AgentChecked(0, A, agent(1, "h-0", enabled=False, job=9), 27.5))
    assert slot0(busy).lane(A).capable and slot0(busy).lane(A).job is not None
    dead = engine({"agent_id": 1, "enabled": True, "known_at": 20.0}, UNKNOWN)
    written = observe(dead, AgentWritten(0, A, agent(1, "h-0", enabled=False), 27.0))
    assert slot0(written).lane(A).disabled_idle


def test_a_lane_disabled_while_busy_is_a_safe_standby_after_its_exit() -> None:
    state = engine({**BUSY, "enabled": False}, STANDBY)
    state = observe(state, Died(0, A, "ca", 0, 29.0))
    lane = slot0(state).lane(A)
    assert lane.disabled_idle and not lane.live


# --------------------------------------------------------------------------- adoption


def info(cid: str, slot: int, lane: str | None, status: str = "running") -> ContainerInfo:
    labels = {LABEL_SLOT: str(slot)}
    if lane is not None:
        labels[LABEL_LANE] = lane
    return ContainerInfo(id=cid, name=f"h-{slot}", labels=labels, status=status, started_at=5.0)


def test_listing_adopts_both_lanes_retires_extra_slots_and_clears_leftovers() -> None:
    state = engine(UNKNOWN, UNKNOWN)
    found = (
        info("x0a", 0, None),  # from before hot standby: lane a
        info("x0b", 0, "b"),
        info("old", 0, "b", status="exited"),
        info("x3a", 3, "a"),  # above the desired count
    )
    state = observe(state, Listed(placed(found), 30.0))
    slot = slot0(state)
    assert slot.lane(A).container_id == "x0a" and slot.lane(B).container_id == "x0b"
    assert slot.lane(B).stale_ids == frozenset({"old"})
    extra = state.slot(3)
    assert extra is not None and extra.intent is Intent.RETIRE
    assert state.docker.state is HealthState.OK


def test_listing_without_a_known_container_counts_it_as_gone() -> None:
    state = engine(ACTIVE, STANDBY)
    state = observe(state, Listed(placed((info("cb", 0, "b"),)), 30.0))
    slot = slot0(state)
    assert slot.lane(A).container_id is None and slot.lane(A).dying_id == "ca"
    assert slot.last_exit is not None and slot.last_exit.code is None
    assert slot.lane(B).container_id == "cb"


def test_notes_name_the_agent_of_the_lane_they_are_about() -> None:
    step = apply(started(), Died(0, A, CID, 143, 101.0), RULES)
    notes = [o for o in step.outputs if isinstance(o, Note)]
    lane_name = slot0(started()).lane(A).name
    assert notes and all(n.agent == lane_name for n in notes)
