"""Events of many hosts, and of one over reconnects: each once, by time, the newest kept."""

from __future__ import annotations

import asyncio

import pytest

from gpuci_tui.core.fleet.event_merge import MergedEvents
from gpuci_tui.core.host.reporter import Broadcaster
from gpuci_tui.core.models import SupervisorEvent

T0 = 1_700_000_000.0


def ev(at: float, seq: int, message: str = "m", kind: str = "job_assigned") -> SupervisorEvent:
    return SupervisorEvent(at=T0 + at, kind=kind, message=message, seq=seq)


def shown(merged: MergedEvents[None]) -> list[tuple[int, float, int]]:
    return [(p.source, p.event.at - T0, p.event.seq) for p in merged.entries]


def test_backlogs_of_hosts_merge_by_time_and_a_replay_adds_nothing() -> None:
    merged: MergedEvents[None] = MergedEvents(keep=100)
    a = [ev(1, 1), ev(4, 2), ev(9, 3)]
    b = [ev(2, 1), ev(3, 2), ev(10, 3)]
    for event in a:  # host 0's backlog lands first, as one block...
        merged.add(0, event, None)
    positions = [merged.add(1, event, None) for event in b]  # ...then host 1's
    assert positions == [1, 2, 5], "each in its place by time; the newest at the bottom"
    assert shown(merged) == [(0, 1, 1), (1, 2, 1), (1, 3, 2), (0, 4, 2), (0, 9, 3), (1, 10, 3)]
    # A reconnect: the daemon sends its recent events again, then a new one.
    assert [merged.add(0, event, None) for event in a] == [None, None, None]
    assert merged.add(0, ev(11, 4), None) == 6
    assert len(merged) == 7


def test_two_hosts_may_number_alike_and_at_the_same_time() -> None:
    merged: MergedEvents[None] = MergedEvents(keep=10)
    assert merged.add(0, ev(5, 1), None) == 0
    assert merged.add(1, ev(5, 1), None) == 1, "another host's event: not a duplicate"


def test_a_restarted_daemon_numbers_from_one_again_at_later_times() -> None:
    merged: MergedEvents[None] = MergedEvents(keep=10)
    merged.add(0, ev(1, 1, "before"), None)
    assert merged.add(0, ev(50, 1, "after the restart"), None) == 1


def test_unnumbered_events_of_an_older_daemon_are_told_apart_by_what_they_say() -> None:
    merged: MergedEvents[None] = MergedEvents(keep=10)
    assert merged.add(0, ev(1, 0, "a"), None) == 0
    assert merged.add(0, ev(1, 0, "b"), None) == 1, "same time, other words"
    assert merged.add(0, ev(1, 0, "a"), None) is None, "the same event again"


def test_only_the_newest_are_kept_and_an_older_one_is_not_taken_back() -> None:
    merged: MergedEvents[None] = MergedEvents(keep=3)
    for n in range(1, 6):
        merged.add(0, ev(n, n), None)
    assert shown(merged) == [(0, 3, 3), (0, 4, 4), (0, 5, 5)]
    assert merged.add(0, ev(1, 1), None) is None, "dropped, and older than all kept"
    assert merged.add(1, ev(0.5, 9), None) is None
    assert merged.add(1, ev(4.5, 1), None) == 1, "between two kept ones: in, the oldest out"
    assert shown(merged) == [(0, 4, 4), (1, 4.5, 1), (0, 5, 5)]


@pytest.mark.parametrize("groups", [False, True])
async def test_a_daemon_numbers_every_event_it_reports(groups: bool) -> None:
    clock = iter(range(100)).__next__
    reporter = Broadcaster(lambda: float(clock()))
    for n in range(3):
        reporter.event("job_assigned", f"job {n}", 0, "gpu" if groups else "")
    queue = reporter.subscribe()
    reporter.event("job_finished", "done", 0)
    assert [e.seq for e in reporter.events] == [1, 2, 3, 4]
    item = await asyncio.wait_for(queue.get(), 5)
    assert isinstance(item, SupervisorEvent) and item.seq == 4
    assert len({e.identity for e in reporter.events}) == 4
