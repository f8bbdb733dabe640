"""A container that dies under its running job: a job lost on the slot, never a failure (tables).

Known busy is a job on the lane (`LaneRecord.job`: the organisation's read, or the
agent's own output line, which knows the job's name before its request id).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.core.engine.lifecycle import EngineState, Lane
from gpuci_tui.core.engine.steps import Died, JobEnded, Note, OutOfMemory, Started
from gpuci_tui.core.engine.transitions.apply import apply
from gpuci_tui.core.host.observers.history_rows import exit_record, ran_job, with_request
from gpuci_tui.core.host.observers.job_match import Finished, match
from gpuci_tui.core.models import JobInfo
from gpuci_tui.core.protocols import JobRequest
from tests.core.lifecycle_helpers import JOB, RULES, UNKNOWN, engine, observe, slot0

A = Lane.A
CID = "c" * 64
BUSY = {"took_job": True, "job": JOB}
NAMED_ONLY = {"job": JobInfo(request_id=0, pipeline="train")}
"""Busy by the agent's output line (``Running job: train``): no request id, no read yet."""


def started(**lane: Any) -> EngineState:
    state = observe(engine(UNKNOWN, UNKNOWN, standby=False), Started(0, A, CID, 100.0))
    return state.with_slot(slot0(state).with_lane(replace(slot0(state).lane(A), **lane)))


@pytest.mark.parametrize(
    ("lane", "code", "oom", "reason", "lost"),
    [
        (BUSY, 137, False, "killed during job 7 (SIGKILL; the job is lost)", True),
        (NAMED_ONLY, 137, False, "killed during job train (SIGKILL; the job is lost)", True),
        (BUSY, 139, False, "killed during job 7 (signal 11; the job is lost)", True),
        (
            BUSY,
            1,
            False,
            "exit code 1 during job 7: agent stopped with an error (see the log tail) "
            "(the job is lost)",
            True,
        ),
        (BUSY, 137, True, "killed by the OOM killer during job 7", True),
        # The agent cancels its job on a stop signal and reports it: not lost here.
        (
            BUSY,
            143,
            False,
            "exit code 143: stopped (SIGTERM); its running job was cancelled",
            False,
        ),
        (BUSY, 0, False, "job finished", False),
        (
            BUSY,
            None,
            False,
            "gone while the Docker engine was unreachable (exit code unknown)",
            False,
        ),
        ({**BUSY, "stop_requested": True}, 137, False, "stopped by gpuci-tui", False),
        # Its job had ended (a read said so) before the container died.
        (
            {"took_job": True},
            137,
            False,
            "exit code 137: killed (SIGKILL: stop timeout or out of memory)",
            False,
        ),  # fmt: skip
    ],
)
def test_a_container_dying_under_its_job_loses_the_job_and_never_fails(
    lane: dict[str, Any], code: int | None, oom: bool, reason: str, lost: bool
) -> None:
    state = started(**lane)
    if oom:
        state = observe(state, OutOfMemory(0, A, CID))
    step = apply(state, Died(0, A, CID, code, 101.0), RULES)
    slot = slot0(step.state)
    last = slot.last_exit
    assert last is not None and (last.reason, last.lost_job, last.took_job) == (reason, lost, True)
    assert (slot.failures, slot.backoff_until, slot.parked) == (0, None, False)
    notes = [o.kind for o in step.outputs if isinstance(o, Note)]
    assert notes == ["container_exited", "job_lost" if lost else "job_finished"]
    (ended,) = [o for o in step.outputs if isinstance(o, JobEnded)]
    assert ended.exit == last and ended.job == lane.get("job")


def test_an_idle_container_killed_early_still_counts() -> None:
    step = apply(started(), Died(0, A, CID, 137, 101.0), RULES)
    slot = slot0(step.state)
    assert slot.failures == 1 and slot.last_exit is not None and not slot.last_exit.lost_job
    assert not [o for o in step.outputs if isinstance(o, JobEnded)]


def test_a_killed_job_never_steps_towards_parking() -> None:
    """Four failed starts, then a job killed under its agent: the streak ends, no park."""
    state = started(**BUSY)
    slot = replace(slot0(state), failures=RULES.park_after - 1, backoff_until=99.0)
    step = apply(state.with_slot(slot), Died(0, A, CID, 137, 101.0), RULES)
    after = slot0(step.state)
    assert (after.failures, after.parked, after.backoff_until) == (0, False, None)
    assert after.message == ""


@pytest.mark.parametrize(
    ("server", "result"),
    [
        (None, "abandoned"),  # the organisation has not finished it yet: lost here
        (JobRequest(request_id=7, result=None), "abandoned"),
        (JobRequest(request_id=7, result="succeeded"), "succeeded"),  # it ended first
        (JobRequest(request_id=6, result="succeeded"), "abandoned"),  # the previous job
    ],
)
def test_the_history_row_of_a_lost_job_is_abandoned(server: JobRequest | None, result: str) -> None:
    step = apply(started(**BUSY), Died(0, A, CID, 137, 101.0), RULES)
    (ended,) = [o for o in step.outputs if isinstance(o, JobEnded)]
    row = exit_record("inst", ended, None)
    if server is not None and match(ran_job(ended), [Finished(ended.agent, server)]):
        row = with_request(row, server)  # only its own request completes it
    assert (row.result, row.request_id, row.reason) == (result, 7, ended.exit.reason)
