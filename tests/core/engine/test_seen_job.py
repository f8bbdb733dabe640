"""A container's job is remembered after a read says it ended: its history row is tied to it.

The agent finishes its job, the organisation's next read shows the lane with no
assigned request (the container has not exited yet), then the container ends: the
job's end (`JobEnded`) still names the request the lane was seen running, never
"none" (issue 28: the recorder then took the agent's latest request, a newer job).
"""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.engine.lifecycle import EngineState, Lane, PoolView
from gpuci_tui.core.engine.steps import Died, JobEnded, PoolRead, Started
from gpuci_tui.core.engine.transitions.apply import apply
from gpuci_tui.core.models import JobInfo
from gpuci_tui.core.protocols import Agent, JobRequest
from tests.core.lifecycle_helpers import RULES, UNKNOWN, engine, observe, slot0

A = Lane.A
CID = "c" * 64


def read(at: float, request_id: int | None) -> PoolRead:
    assigned = JobRequest(request_id, definition_name="train") if request_id else None
    agent = Agent(1, "h-0", status="online", assigned_request=assigned)
    return PoolRead(PoolView(pool_id=42, began_at=at, agents=(agent,)))


def started() -> EngineState:
    return observe(engine(UNKNOWN, UNKNOWN, standby=False), Started(0, A, CID, 100.0))


def job_end(state: EngineState, code: int = 0) -> JobEnded:
    step = apply(state, Died(0, A, CID, code, 130.0), RULES)
    (ended,) = [o for o in step.outputs if isinstance(o, JobEnded)]
    return ended


def test_a_job_a_read_saw_end_is_still_the_containers() -> None:
    state = observe(started(), read(110.0, 7))
    assert slot0(state).lane(A).job is not None
    state = observe(state, read(120.0, None))  # its job ended; its container lives on
    lane = slot0(state).lane(A)
    assert lane.job is None and lane.seen_job is not None and lane.seen_job.request_id == 7
    ended = job_end(state)
    assert ended.job is not None and ended.job.request_id == 7


def test_a_job_only_the_agents_line_told_of_is_kept() -> None:
    """``Running job: train`` (request id 0): a read after its end cannot name it; the row
    is matched to its request by the agent and the times."""
    named = JobInfo(request_id=0, name="train")
    state = started()
    state = state.with_slot(slot0(state).with_lane(replace(slot0(state).lane(A), job=named)))
    state = observe(state, read(120.0, None))
    assert job_end(state).job == named


def test_the_next_container_starts_with_no_job_remembered() -> None:
    state = observe(observe(started(), read(110.0, 7)), read(120.0, None))
    state = apply(state, Died(0, A, CID, 0, 130.0), RULES).state
    assert slot0(state).lane(A).seen_job is None
    state = observe(state, Started(0, A, "d" * 64, 140.0))
    assert slot0(state).lane(A).seen_job is None
