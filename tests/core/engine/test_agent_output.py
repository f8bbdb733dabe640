"""The agents' own lines, read as facts (hints), and what the engine makes of each (tables).

A line counts only when it begins with the agent's own timestamp (or start.sh's
prefix). What a line tells is folded in at once (online, busy, registered), but a
"completed" line never enables anything: only Docker's word that the container
ended, or a read, does.
"""

from __future__ import annotations

import calendar

import pytest

from gpuci_tui.core.command_types import Drain
from gpuci_tui.core.engine.agent.output import (
    MAX_LINE,
    AgentFact,
    AwaitingGo,
    JobCompleted,
    Listening,
    RunningJob,
    parse_line,
)
from gpuci_tui.core.engine.agent.steps import AgentSaid
from gpuci_tui.core.engine.commands import apply_command
from gpuci_tui.core.engine.lifecycle import Lane, LanePhase
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.server_steps import PoolRead, SetEnabled
from gpuci_tui.core.engine.steps import Died, JobEnded, Note, StopAgent
from gpuci_tui.core.engine.transitions.apply import apply
from gpuci_tui.core.formatting import job_label
from gpuci_tui.core.models import JobInfo
from gpuci_tui.core.protocols import Agent, JobRequest
from tests.core.lifecycle_helpers import (
    ACTIVE,
    BOOTING_NEW,
    BUSY,
    NOW,
    RULES,
    STANDBY,
    actions,
    engine,
    observe,
    slot0,
)

A, B = Lane.A, Lane.B
T = float(calendar.timegm((2025, 11, 28, 12, 0, 0)))
STAMP = "2025-11-28 12:00:00Z"
RUNNING = f"{STAMP}: Running job: "

LINES: list[tuple[str, AgentFact | None]] = [
    (f"{STAMP}: Listening for Jobs", Listening(T)),
    (f"{STAMP}: Running job: train - main", RunningJob("train - main", T)),
    (f"{STAMP}: Job Build completed with result: Succeeded", JobCompleted("Build", "Succeeded", T)),
    (f"{STAMP}: Job Build completed with result: Canceled\r", JobCompleted("Build", "Canceled", T)),
    ("2025-11-28T12:00:00Z: Listening for Jobs", Listening(T)),
    ("[start.sh] registered as gpu-0-b; waiting for the go file /run/azp/go",
     AwaitingGo("gpu-0-b", "/run/azp/go")),
    # Not the agent's own line: no timestamp at its start, or another text.
    ("Listening for Jobs", None),
    (f"step 3: {STAMP}: Job Build completed with result: Succeeded", None),
    (f" {STAMP}: Listening for Jobs", None),
    (f"{STAMP}: Listening for Jobs now", None),
    (f"{STAMP}: Running job: ", None),
    ("2025-13-28 12:00:00Z: Listening for Jobs", None),
    ("[start.sh] registering agent 'gpu-0' in pool 'gpu' at https://dev.azure.com/o", None),
    (RUNNING + "x" * 5000, RunningJob("x" * (MAX_LINE - len(RUNNING)), T)),
]  # fmt: skip


@pytest.mark.parametrize(("line", "fact"), LINES, ids=[row[0][:60] for row in LINES])
def test_a_line_is_a_fact_only_when_the_agent_itself_printed_it(
    line: str, fact: AgentFact | None
) -> None:
    assert parse_line(line) == fact


def said(fact: AgentFact, container: str = "ca", at: float = NOW, lane: Lane = A) -> AgentSaid:
    return AgentSaid(0, lane, container, fact, at)


def test_listening_makes_a_booting_lane_ready_and_measures_its_start_up() -> None:
    state = engine(BOOTING_NEW, STANDBY)
    step = apply(state, said(Listening(NOW - 1.0), at=NOW), RULES)
    lane = slot0(step.state).lane(A)
    assert lane.online and lane.phase is LanePhase.READY
    [note] = [n for n in step.outputs if getattr(n, "kind", "") == "agent_online"]
    assert note.seconds == pytest.approx(NOW - 25.0)


def test_a_replayed_listening_line_measures_nothing() -> None:
    """An adopted container's output is read from its start: old lines are no start-up."""
    step = apply(engine(BOOTING_NEW, STANDBY), said(Listening(NOW - 600.0)), RULES)
    assert slot0(step.state).lane(A).online
    assert not any(getattr(n, "kind", "") == "agent_online" for n in step.outputs)


def test_a_line_of_another_container_is_ignored() -> None:
    state = engine(BOOTING_NEW, STANDBY)
    assert apply(state, said(Listening(NOW), container="old"), RULES).state == state


def test_running_job_makes_the_lane_busy_without_a_read_and_plans_nothing() -> None:
    step = apply(engine(ACTIVE, STANDBY), said(RunningJob("train - main", NOW)), RULES)
    lane = slot0(step.state).lane(A)
    assert lane.phase is LanePhase.BUSY and lane.took_job
    assert lane.job == JobInfo(request_id=0, name="train - main")
    assert [n.kind for n in step.outputs] == ["job_assigned"]
    assert job_label(lane.job) == "job 'train - main'"
    # The busy active stays enabled until its container ends, so that a refusal of our
    # writes beginning mid-job strands no slot (`planning.refused`); its exit enables the
    # standby, and it is disabled once that enable is confirmed (make before break).
    assert actions(step.state) == []
    ended = observe(step.state, Died(0, A, "ca", 0, NOW + 1))
    assert actions(ended, NOW + 1)[1:] == [SetEnabled(0, B, 2, True)]


def test_a_container_killed_after_its_running_job_line_lost_that_job() -> None:
    """Busy by its line alone (no read yet): a SIGKILL loses the job, named by the line."""
    state = observe(engine(ACTIVE, STANDBY), said(RunningJob("train - main", NOW)))
    step = apply(state, Died(0, A, "ca", 137, NOW + 1), RULES)
    last = slot0(step.state).last_exit
    assert last is not None and last.lost_job
    assert last.reason == "killed during job train - main (SIGKILL; the job is lost)"
    assert [n.kind for n in step.outputs if isinstance(n, Note)][-1] == "job_lost"
    assert slot0(step.state).failures == 0


def test_a_listening_line_keeps_the_start_up_for_the_history() -> None:
    """Measured from the line as from a read (`timings`): the finished job's row keeps it."""
    state = observe(engine(BOOTING_NEW, STANDBY), said(Listening(NOW - 1.0), at=NOW))
    assert slot0(state).lane(A).startup_s == pytest.approx(NOW - 25.0)
    busy = observe(state, said(RunningJob("j", NOW + 1), at=NOW + 1))
    step = apply(busy, Died(0, A, "ca", 0, NOW + 5), RULES)
    (ended,) = [o for o in step.outputs if isinstance(o, JobEnded)]
    assert ended.startup_s == pytest.approx(NOW - 25.0)


def test_a_read_fills_the_job_in_and_an_older_read_cannot_undo_it() -> None:
    state = observe(engine(ACTIVE, STANDBY), said(RunningJob("train - main", NOW), at=NOW))
    old = PoolView(42, NOW - 0.5, (Agent(1, "h-0", enabled=True, status="online"),))
    kept = observe(state, PoolRead(old))
    assert slot0(kept).lane(A).job == JobInfo(request_id=0, name="train - main")
    request = JobRequest(request_id=77, definition_name="train - main", owner_name="1.2")
    new = PoolView(42, NOW + 1, (Agent(1, "h-0", enabled=True, status="online",
                                      assigned_request=request),))  # fmt: skip
    step = apply(kept, PoolRead(new), RULES)
    job = slot0(step.state).lane(A).job
    assert job is not None and job.request_id == 77 and job.name == "train - main"
    assert not any(getattr(n, "kind", "") == "job_assigned" for n in step.outputs)


def test_a_job_faking_completed_while_its_container_runs_enables_nothing() -> None:
    """The standby is enabled only once Docker says the active container ended."""
    state = engine(BUSY, STANDBY)  # enabled during its job, as the engine leaves it
    faked = observe(state, said(JobCompleted("train - main", "Succeeded", NOW)))
    assert slot0(faked).lane(A) == slot0(state).lane(A)
    assert actions(faked) == []
    ended = observe(faked, Died(0, A, "ca", 0, NOW + 1))
    assert SetEnabled(0, B, 2, True) in actions(ended, NOW + 1)


def test_registered_line_is_remembered_for_the_read_by_name() -> None:
    state = observe(engine(BOOTING_NEW, STANDBY), said(AwaitingGo("h-0", "/run/azp/go")))
    assert slot0(state).lane(A).said_registered == NOW
    again = observe(state, said(Listening(NOW), at=NOW + 3))
    assert slot0(again).lane(A).said_registered == NOW


def test_completed_is_only_noted() -> None:
    state = engine(BUSY, STANDBY)
    step = apply(state, said(JobCompleted("train - main", "Failed", NOW)), RULES)
    assert step.state == state
    [note] = step.outputs
    assert "train - main" in note.message and "Failed" in note.message  # type: ignore[union-attr]


def test_a_busy_lane_seen_only_by_its_line_is_not_stopped_by_a_drain() -> None:
    state = observe(engine(ACTIVE, STANDBY), said(RunningJob("j", NOW)))
    draining, _ = apply_command(state, Drain((0,)))
    # Disabled and left to finish its job; the idle standby is stopped.
    assert actions(draining) == [SetEnabled(0, A, 1, False), StopAgent(0, B, "cb")]
