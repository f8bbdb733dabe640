"""A lane's job and the organisation's finished request: tied by what was seen, never "the latest"."""

from __future__ import annotations

import pytest

from gpuci_tui.core.host.observers.job_match import (
    SLACK,
    Finished,
    RanJob,
    distance,
    match,
    pair,
    slot_of,
)
from gpuci_tui.core.protocols import JobRequest
from gpuci_tui.sim.records import wire_time


def request(request_id: int, assigned: float | None, *, name: str = "train") -> JobRequest:
    return JobRequest(
        request_id=request_id,
        assign_time=wire_time(assigned) if assigned is not None else None,
        finish_time=wire_time((assigned or 0.0) + 5.0),
        result="succeeded",
        definition_name="train - main",
        job_name=name,
    )


def finished(request_id: int, assigned: float | None, agent: str = "h-1", **kw: str) -> Finished:
    return Finished(agent, request(request_id, assigned, **kw))


CONTAINER = RanJob(agent="h-1", started_at=100.0, ended_at=160.0)


@pytest.mark.parametrize(
    ("ran", "candidate", "expected"),
    [
        # Seen running in a read: its id alone decides, whatever the times say.
        (RanJob("h-1", 100.0, 160.0, request_id=7), finished(7, 500.0), 0.0),
        (RanJob("h-1", 100.0, 160.0, request_id=7), finished(8, 120.0), None),
        # Not seen in a read: assigned while the container lived.
        (CONTAINER, finished(7, 130.0), 0.0),
        (CONTAINER, finished(7, 100.0), 0.0),
        (CONTAINER, finished(7, 160.0 + SLACK / 2), SLACK / 2),  # the two clocks
        (CONTAINER, finished(7, 100.0 - SLACK / 2), SLACK / 2),
        (CONTAINER, finished(7, 160.0 + SLACK + 1), None),  # the next container's job
        (CONTAINER, finished(7, 100.0 - SLACK - 1), None),  # the previous container's job
        (CONTAINER, finished(7, None), None),  # never assigned: no job of any container
        (CONTAINER, finished(7, 130.0, agent="h-1-b"), None),  # another lane's
        # The container's start is not known (adopted while the job ran): up to its end.
        (RanJob("h-1", None, 160.0), finished(7, 20.0), 0.0),
        (RanJob("h-1", None, 160.0), finished(7, 200.0), None),
    ],
)
def test_distance(ran: RanJob, candidate: Finished, expected: float | None) -> None:
    assert distance(ran, candidate) == expected


def test_the_agents_latest_is_not_the_job_of_an_older_container() -> None:
    """Seven containers of one lane over 35 s; a delayed read sees only the latest request:
    it is the job of the last container alone, never of the six before."""
    latest = finished(66, 100.0 + 6 * 5 + 2)
    containers = [RanJob("h-1", 100.0 + i * 5, 104.5 + i * 5) for i in range(7)]
    assert [match(c, [latest]) for c in containers] == [None] * 6 + [latest]


def test_a_name_breaks_a_tie_but_never_makes_a_match() -> None:
    ran = RanJob("h-1", 100.0, 160.0, name="eval")
    train, evaluation = finished(7, 110.0, name="train"), finished(8, 120.0, name="eval")
    assert match(ran, [train, evaluation]) == evaluation
    # Without a fitting time a name is only a line the job may have printed.
    assert match(ran, [finished(9, 400.0, name="eval")]) is None
    # No names: the earliest assigned (one job per container).
    assert match(CONTAINER, [finished(8, 120.0), finished(7, 110.0)]) == finished(7, 110.0)


def test_pair_is_one_to_one_closest_first() -> None:
    """Back-to-back containers of one lane: each request goes to the container it fits best."""
    first = RanJob("h-1", 100.0, 130.0)
    second = RanJob("h-1", 131.0, 160.0)
    late_first, early_second = finished(1, 129.0), finished(2, 133.0)
    pairs = pair([first, second], [early_second, late_first])
    assert sorted((p[0].started_at, p[1].request_id) for p in pairs) == [(100.0, 1), (131.0, 2)]
    # One request, two containers that could hold it: only the closer one gets it.
    (only,) = pair([first, second], [finished(3, 132.0)])
    assert only[0] is second


def test_slot_of_a_lane_name() -> None:
    assert [slot_of(n) for n in ("gpu01-3", "gpu01-3-b", "gpu-x-12", "nameless")] == [
        3,
        3,
        12,
        None,
    ]
