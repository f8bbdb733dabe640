"""The durations the engine puts on its notes for the metrics: start-up and next-job gap."""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.engine.lifecycle import Lane, LanePhase, new_slot
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.server_steps import PoolRead
from gpuci_tui.core.engine.steps import Died, JobEnded, Note, Started
from gpuci_tui.core.engine.timings import gap_start, startup_note, with_gap
from gpuci_tui.core.engine.transitions.apply import apply
from gpuci_tui.core.models import JobInfo
from gpuci_tui.core.protocols import Agent, JobRequest
from tests.core.lifecycle_helpers import RULES, engine, observe, slot0

SLOT = new_slot("t", 0)
A, B = SLOT.lanes
BOOTING = replace(A, phase=LanePhase.BOOTING, container_id="c1", started_at=100.0)


def test_startup_runs_from_the_start_to_the_read_that_shows_the_agent_online() -> None:
    seen_offline = replace(BOOTING, known_at=101.0)
    online = replace(seen_offline, online=True, phase=LanePhase.READY, known_at=109.0)
    note = startup_note(seen_offline, online, 0, 109.0)
    assert note is not None and (note.kind, note.seconds, note.agent) == (
        "agent_online",
        9.0,
        A.name,
    )
    assert note.message == f"{A.name} online 9 s after its container started"
    # Once only: the next read changes nothing.
    assert startup_note(online, online, 0, 110.0) is None


def test_no_startup_for_an_adopted_container_or_one_never_seen_offline() -> None:
    """A container adopted at a daemon restart started long before anyone looked."""
    adopted = replace(BOOTING, known_at=0.0)
    online = replace(adopted, online=True, known_at=5000.0)
    assert startup_note(adopted, online, 0, 5000.0) is None
    # Another container than the one seen offline is not this one's start-up.
    other = replace(BOOTING, known_at=101.0)
    assert startup_note(other, replace(online, started_at=200.0), 0, 210.0) is None


def test_the_gap_runs_from_a_jobs_end_to_the_slots_next_assignment() -> None:
    ran = replace(A, took_job=True)
    slot = replace(SLOT, lanes=(ran, B))
    assert gap_start(slot, ran, True, 500.0) == 500.0
    assert gap_start(replace(slot, job_gap_from=400.0), A, False, 500.0) == 400.0  # no job
    # The other lane already runs the next job: no gap to measure.
    busy_b = replace(B, took_job=True)
    assert gap_start(replace(slot, lanes=(ran, busy_b)), ran, True, 500.0) is None
    waiting = replace(SLOT, job_gap_from=500.0)
    job = JobInfo(request_id=7, pipeline="p", run="r", assign_time="1970-01-01T00:08:23.5Z")
    taken = waiting.with_lane(replace(B, job=job))
    note, after = with_gap(Note("job_assigned", "x", 0, agent=B.name), taken, 510.0)
    assert note.seconds == 3.5  # the server's assignment time, not the read's
    assert after.job_gap_from is None
    again, _ = with_gap(Note("job_assigned", "x", 0, agent=B.name), after, 520.0)
    assert again.seconds is None  # once per ended job
    unreadable = taken.with_lane(replace(B, job=replace(job, assign_time="soon")))
    note, _ = with_gap(Note("job_assigned", "x", 0, agent=B.name), unreadable, 510.0)
    assert note.seconds == 10.0  # the read that showed it


def test_the_lane_keeps_its_startup_until_its_job_ends_and_the_history_row_gets_it() -> None:
    """The row of the finished job carries it (what a restarted "auto" starts from)."""

    def read(at: float, online: bool, job: int | None = None) -> PoolRead:
        request = JobRequest(request_id=job) if job else None
        agent = Agent(1, "h-0", True, "online" if online else "offline", assigned_request=request)
        return PoolRead(PoolView(42, began_at=at, agents=(agent,)))

    state = observe(engine(standby=False), Started(0, Lane.A, "c1", 100.0), read(101.0, False))
    state = observe(state, read(109.5, True))
    assert slot0(state).lane(Lane.A).startup_s == 9.5
    state = observe(state, read(110.0, True, job=7))
    step = apply(state, Died(0, Lane.A, "c1", 0, 113.0), RULES)
    ended = [out for out in step.outputs if isinstance(out, JobEnded)]
    assert [e.startup_s for e in ended] == [9.5]
    assert slot0(step.state).lane(Lane.A).startup_s is None, "the next container measures anew"
