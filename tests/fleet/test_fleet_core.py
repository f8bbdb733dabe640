"""The fleet's pure parts: reconnection delays, a host's link through drops, the overview rows."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from gpuci_tui.core.fleet.link import HostLink, HostStatus, LinkState
from gpuci_tui.core.fleet.rows import Severity, fleet_rows, fleet_totals, gpus_busy, host_row
from gpuci_tui.core.host.control.reconnect import Backoff
from gpuci_tui.core.models import (
    HealthSnapshot,
    HealthState,
    SlotState,
    SupervisorEvent,
    SupervisorSnapshot,
)
from tests.fleet.fakes import (
    NO_DAEMON,
    SwitchHandle,
    auth_failed_snapshot,
    healthy_snapshot,
    member,
)
from tests.ui.scenarios import NOW, loaded_snapshot

# --------------------------------------------------------------------------- backoff


def test_delays_double_from_one_second_to_thirty() -> None:
    backoff = Backoff()
    middle = [backoff.delay(n, lambda: 0.5) for n in range(1, 9)]
    assert middle == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_delays_are_jittered_within_twenty_percent_and_never_past_the_cap() -> None:
    backoff = Backoff()
    assert backoff.delay(1, lambda: 0.0) == pytest.approx(0.8)
    assert backoff.delay(1, lambda: 0.999999) == pytest.approx(1.2, abs=1e-5)
    assert backoff.delay(3, lambda: 0.0) == pytest.approx(3.2)
    assert backoff.delay(10, lambda: 0.999999) == 30.0
    assert backoff.delay(10, lambda: 0.0) == pytest.approx(24.0)


# --------------------------------------------------------------------------- the link


class Recorder:
    """Collects a link's statuses and stands in for its sleep (returns at once, records)."""

    def __init__(self) -> None:
        self.statuses: list[HostStatus] = []
        self.sleeps: list[float] = []
        self.events: list[SupervisorEvent] = []
        self.resume = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        await self.resume.wait()
        self.resume.clear()

    async def until(self, predicate: object, what: str) -> HostStatus:
        for _ in range(500):
            if self.statuses and predicate(self.statuses[-1]):  # type: ignore[operator]
                return self.statuses[-1]
            await asyncio.sleep(0.01)
        raise AssertionError(f"timed out waiting for {what}; last: {self.statuses[-1:]}")


async def test_a_link_goes_down_backs_off_and_comes_back() -> None:
    handle = SwitchHandle(healthy_snapshot())
    rec = Recorder()
    clock = iter(range(1000, 2000)).__next__
    moments = iter(range(0, 10_000, 5)).__next__  # every look: 5 s later (each link was steady)
    link = HostLink(
        member("gpu3", "ci@gpu3", handle),
        rec.statuses.append,
        clock=lambda: float(clock()),
        on_event=rec.events.append,
        rand=lambda: 0.5,
        sleep=rec.sleep,
        monotonic=lambda: float(moments()),
    )
    task = asyncio.get_running_loop().create_task(link.run())
    try:
        up = await rec.until(lambda s: s.state is LinkState.UP, "up")
        assert up.snapshot == healthy_snapshot() and up.failures == 0
        handle.push(SupervisorEvent(at=NOW, kind="job_assigned", message="x", slot=0))
        await rec.until(lambda s: bool(rec.events), "the event")

        handle.drop()
        down = await rec.until(lambda s: s.state is LinkState.DOWN, "down")
        # The lost stream said nothing of why: the link tried again at once, "reconnecting"
        # meanwhile, and the attempt's failure is the reason shown.
        between = rec.statuses[rec.statuses.index(up) + 1 : -1]
        assert [(s.state, s.problem) for s in between][-1:] == [(LinkState.CONNECTING, "")]
        assert down.problem == NO_DAEMON
        assert down.failures == 1 and down.snapshot == healthy_snapshot()
        assert down.since == between[-1].since, "down since the stream was lost"
        assert down.retry_at is not None and rec.sleeps[:1] == [1.0], "no wait before the retry"
        for expected in (2.0, 4.0):  # still down: each attempt waits twice as long
            rec.resume.set()
            await rec.until(lambda s, n=expected: rec.sleeps[-1:] == [n], f"a {expected} s wait")
        assert rec.statuses[-1].since == down.since, "down since the first failure"

        handle.restore()
        rec.resume.set()
        back = await rec.until(lambda s: s.state is LinkState.UP, "back up")
        assert back.failures == 0 and back.problem == "" and back.retry_at is None
        handle.drop()
        await rec.until(lambda s: s.state is LinkState.DOWN, "down again")
        assert rec.sleeps[-1] == 1.0, "a host that was up starts again from 1 s"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert rec.sleeps == [1.0, 2.0, 4.0, 1.0]


# --------------------------------------------------------------------------- rows


def up(snapshot: SupervisorSnapshot) -> HostStatus:
    return HostStatus(state=LinkState.UP, since=NOW - 60, snapshot=snapshot, updated_at=NOW)


def test_a_healthy_host_row_counts_its_agents() -> None:
    row = host_row("gpu3", "ci@gpu3", up(healthy_snapshot()))
    assert (row.severity, row.problems, row.stale, row.seen) == (Severity.OK, (), False, True)
    assert (row.slots, row.desired, row.busy, row.idle, row.standby, row.parked) == (
        4, 4, 2, 2, 4, 0
    )  # fmt: skip
    assert (row.queued, row.gpus_busy, row.azure, row.pid) == (3, "2", HealthState.OK, 4321)


def test_a_loaded_host_shows_parked_and_backoff_as_problems() -> None:
    row = host_row("gpu2", "ci@gpu2", up(loaded_snapshot()))
    assert row.severity is Severity.ERROR
    assert row.problems == (
        "parked after repeated failures: gpuhost-6",
        "failing and backing off: gpuhost-5",
    )
    # The draining agent still runs its job: busy, and counted as draining.
    assert (row.busy, row.idle, row.parked, row.drained) == (3, 1, 1, 1)
    assert row.gpus_busy == "3"


def test_health_problems_come_first_and_say_why() -> None:
    row = host_row("gpu2", "ci@gpu2", up(auth_failed_snapshot()))
    assert row.problems[0] == "the PAT was rejected: HTTP 401"
    limited = loaded_snapshot(
        slots=(),
        azure=HealthSnapshot(HealthState.RATE_LIMITED),
        docker=HealthSnapshot(HealthState.UNREACHABLE, "no socket"),
        paused=True,
    )
    row = host_row("gpu5", "gpu5", up(limited))
    assert row.problems == (
        "Docker is not usable: no socket",
        "Azure DevOps rate-limits the host",
        "paused: exited agents are not replaced",
    )
    assert row.severity is Severity.ERROR


def test_gpus_held_by_busy_agents() -> None:
    snapshot = healthy_snapshot()
    assert gpus_busy(snapshot) == "2"
    all_gpus = replace(snapshot.slots[0], gpus=("all",))
    assert gpus_busy(replace(snapshot, slots=(all_gpus, *snapshot.slots[1:]))) == "all"
    idle = tuple(replace(s, state=SlotState.IDLE, job=None) for s in snapshot.slots)
    assert gpus_busy(replace(snapshot, slots=idle)) == "0"


def test_a_down_host_keeps_its_last_counts_as_stale() -> None:
    status = HostStatus(
        state=LinkState.DOWN,
        problem="ssh: connect to host gpu3 port 22: Connection refused",
        since=NOW - 30,
        retry_at=NOW + 4,
        failures=3,
        snapshot=healthy_snapshot(),
    )
    row = host_row("gpu3", "ci@gpu3", status)
    assert row.severity is Severity.DOWN and row.stale and row.busy == 2
    assert row.problems == ("unreachable: ssh: connect to host gpu3 port 22: Connection refused",)
    assert (row.since, row.retry_at) == (NOW - 30, NOW + 4)
    never = host_row("gpu4", "gpu4", HostStatus(LinkState.DOWN, "refused"))
    assert not never.seen and never.severity is Severity.DOWN


def test_problems_first_then_by_name_and_totals_of_live_hosts() -> None:
    rows = fleet_rows(
        [
            ("gpu9", "gpu9", up(healthy_snapshot())),
            ("gpu2", "gpu2", up(loaded_snapshot())),
            ("Gpu3", "gpu3", up(healthy_snapshot())),
            ("gpu7", "gpu7", HostStatus()),
            ("gpu8", "gpu8", HostStatus(LinkState.DOWN, "x", snapshot=healthy_snapshot())),
        ]
    )
    assert [r.label for r in rows] == ["gpu8", "gpu2", "gpu7", "Gpu3", "gpu9"]
    assert rows[2].problems == ("connecting…",)
    totals = fleet_totals(rows)
    assert (totals.hosts, totals.up, totals.busy, totals.idle, totals.standby, totals.parked) == (
        5, 3, 7, 5, 10, 1
    )  # fmt: skip


def test_a_host_with_gpus_none_holds_no_gpu() -> None:
    """gpus = "none" reaches the snapshot as ("none",): counting it showed 1 GPU."""
    snapshot = healthy_snapshot()
    no_gpu = tuple(replace(s, gpus=("none",)) for s in snapshot.slots)
    assert gpus_busy(replace(snapshot, slots=no_gpu)) == "0"


def test_a_drained_host_with_queued_jobs_is_not_all_well() -> None:
    snapshot = healthy_snapshot()
    drained = tuple(replace(s, state=SlotState.DRAINED, job=None) for s in snapshot.slots)
    row = host_row("gpu3", "gpu3", up(replace(snapshot, slots=drained)))
    assert row.problems == ("3 jobs queued, but no agent here takes jobs",)
    assert row.severity is Severity.WARNING
    # With no job waiting, a drained host is what the operator asked for.
    calm = replace(
        snapshot, slots=drained, pool_summary=replace(snapshot.pool_summary, queued_jobs=0)
    )
    assert host_row("gpu3", "gpu3", up(calm)).problems == ()


def test_a_hosts_stale_registrations_are_counted_and_named_in_its_detail() -> None:
    from gpuci_tui.core.registrations import StaleRegistration
    from gpuci_tui.widgets.fleet_table import host_detail

    quiet = host_row("gpu3", "ci@gpu3", up(healthy_snapshot()))
    assert quiet.stale_registrations == 0
    assert "stale registrations" not in host_detail(quiet, NOW).plain, "only when some are left"
    left = tuple(
        StaleRegistration(1000 + n, f"gpu3-{n}", "offline", None, "an earlier name prefix")
        for n in range(2)
    )
    row = host_row("gpu3", "ci@gpu3", up(replace(healthy_snapshot(), stale=left)))
    assert row.stale_registrations == 2
    assert "· stale registrations 2" in host_detail(row, NOW).plain


def test_a_hosts_refused_pool_role_is_its_problem_in_words() -> None:
    reason = "the service principal gpuci-lab is not an Administrator of pool gpu: add it in …"
    azure = HealthSnapshot(HealthState.AUTH_FAILED, reason + " (agent starts wait…)",
                           pool_role=reason)  # fmt: skip
    row = host_row("gpu3", "ci@gpu3", up(replace(healthy_snapshot(), azure=azure)))
    assert row.problems[0] == f"agent starts wait: {reason}"
    assert row.severity is Severity.ERROR and "PAT was rejected" not in " ".join(row.problems)


def test_each_hosts_api_calls_and_their_sum_and_a_queue_read_at_the_cap() -> None:
    """One identity shared by the fleet spends one budget: the overview adds the hosts up."""
    from gpuci_tui.core.models import AzureUsage
    from gpuci_tui.widgets.fleet_table import host_detail, row_cells, totals_line

    def counting(calls: int, **usage: float) -> SupervisorSnapshot:
        snap = healthy_snapshot()
        return replace(
            snap,
            azure_usage=AzureUsage(requests_last_minute=calls, read_at=NOW, **usage),  # type: ignore[arg-type]
            pool_summary=replace(
                snap.pool_summary, queued_jobs=200, queued_capped=True, jobs_read_at=snap.taken_at
            ),
        )

    rows = fleet_rows(
        [
            ("gpu1", "gpu1", up(counting(12))),
            ("gpu2", "gpu2", up(counting(30, rate_limit_remaining=20, rate_limit_limit=200))),
            ("gpu3", "gpu3", up(healthy_snapshot())),  # an older daemon: does not say
        ]
    )
    assert [(r.label, r.calls_per_minute) for r in rows] == [
        ("gpu2", 30), ("gpu1", 12), ("gpu3", None)
    ]  # fmt: skip
    assert rows[0].problems == (
        "the identity's budget is nearly spent: 20/200 left (every host signing in as it "
        "shares it)",
    )
    assert fleet_totals(rows).calls_per_minute == 42
    assert "42 API calls/min" in totals_line(fleet_totals(rows), readonly=False, width=200).plain
    cells = row_cells(rows[1])
    assert (cells["calls"].plain, cells["queued"].plain) == ("12", "200+")
    assert row_cells(rows[2])["calls"].plain == "-"
    assert "queue 200 or more read" in host_detail(rows[1], NOW).plain
    assert fleet_totals(rows[2:]).calls_per_minute is None
