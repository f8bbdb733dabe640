"""``[azure] max_requests_per_minute``: the sliding minute and who gives way, by tables on a
fake clock; then the client under a cap, against the simulated organisation."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuci_tui.core.azure.budget import Priority, RequestBudget
from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.azure.usage import RequestLedger, route_of
from gpuci_tui.core.errors import AzureHeldBackError
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer

P, R, W = Priority.PERIODIC, Priority.READ, Priority.INTAKE


@pytest.mark.parametrize(
    ("cap", "shares"),
    [(None, (None, None, None)), (10, (8, 9, 10)), (60, (48, 54, 60)), (100, (80, 90, 100)),
     (12, (10, 11, 12))],
)  # fmt: skip
def test_each_priority_leaves_a_reserve_for_those_above(
    cap: int | None, shares: tuple[int | None, ...]
) -> None:
    budget = RequestBudget(cap)
    assert tuple(budget.share(p) for p in (P, R, W)) == shares


#: (time, priority, expected wait: 0 = goes now) under a cap of 10 a minute:
#: periodic reads may use 8 of the 10, other reads 9, intake writes all 10.
SCRIPT = [
    *((float(t), P, 0.0) for t in range(8)),  # eight polls, one a second
    (8.0, P, 52.0),  # the ninth poll: held until the first leaves the minute (t=60)
    (8.5, R, 0.0),  # a job's history read still goes: the reads' reserve
    (9.0, R, 51.0),  # not a second one
    (9.5, W, 0.0),  # the enable of a standby goes: the writes' reserve
    (9.6, W, 50.4),  # the cap is the cap
    # The first poll left the minute, but the read and the write still count: the polls'
    # eight are the minute's first eight calls, whoever sent them.
    (60.0, P, 2.0),
    (62.0, P, 0.0),
    (62.5, P, 0.5),
]


def test_a_busy_minute_holds_the_polls_first_and_the_intake_last() -> None:
    budget = RequestBudget(10)
    for now, priority, wait in SCRIPT:
        assert budget.admit(now, priority).wait == pytest.approx(wait), (now, priority)
    assert budget.sent_last_minute(62.5) == 8
    assert budget.held_last_minute(62.5) == 5
    assert budget.held_last_minute(200.0) == 0 and budget.sent_last_minute(200.0) == 0


def test_without_a_cap_every_call_goes_and_is_counted() -> None:
    budget = RequestBudget()
    assert all(budget.admit(t / 10, P).go for t in range(500))
    assert budget.sent_last_minute(50.0) == 500
    assert budget.held_last_minute(50.0) == 0


def test_a_held_read_waits_in_the_callers_thread_a_periodic_one_is_skipped() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    ledger = RequestLedger(10)
    for _ in range(9):
        ledger.clear_to_send(R, "GET /x", lambda: now[0], sleep)
    with pytest.raises(AzureHeldBackError, match="max_requests_per_minute = 10") as held:
        ledger.clear_to_send(P, "GET /agents", lambda: now[0], sleep)
    assert held.value.retry_after == pytest.approx(60.0)
    ledger.clear_to_send(R, "GET /jobrequests", lambda: now[0], sleep)
    assert slept == [pytest.approx(60.0)]
    ledger.clear_to_send(W, "PATCH /agents/1", lambda: now[0], sleep)
    assert slept == [pytest.approx(60.0)], "the writes' reserve: no wait"


@pytest.mark.parametrize(
    ("path", "route"),
    [("_apis/distributedtask/pools/42/agents", "agents"),
     ("_apis/distributedtask/pools/42/agents/1007", "agent"),
     ("_apis/distributedtask/pools/42/jobrequests", "jobrequests"),
     ("_apis/distributedtask/pools/42/jobrequests/890001", "jobrequest"),
     ("_apis/distributedtask/pools/42", "pool"), ("_apis/distributedtask/pools", "pools"),
     ("_apis/distributedtask/packages/agent", "packages"), ("_apis/connectionData", "connectionData"),
     ("_apis/projects", "other")],
)  # fmt: skip
def test_routes_are_a_small_fixed_set_of_names(path: str, route: str) -> None:
    assert route_of(path) == route


PAT = "budget-pat-0123456789abcdefghijklmnopqrstuvwxyz01234"


@pytest.fixture
def served() -> Iterator[tuple[SimOrg, SimServer]]:
    org = SimOrg("acme")
    org.add_pat(PAT)
    org.add_pool("gpu")
    with SimServer(org) as server:
        yield org, server


def test_the_client_under_a_cap_skips_polls_and_says_so(served: tuple[SimOrg, SimServer]) -> None:
    org, server = served
    with AzureDevOpsClient(server.url, PAT, max_retries=0, max_requests_per_minute=10) as client:
        for _ in range(8):
            client.list_agents(42)
        with pytest.raises(AzureHeldBackError):
            client.list_agents(42)
        client.get_pool(42)  # a read someone waits for still goes
        usage = client.usage()
    assert (usage.requests_last_minute, usage.held_last_minute, usage.cap_per_minute) == (9, 1, 10)
    assert usage.bytes_last_minute > 0 and usage.read_at is not None
    sent = sum(n for (method, route), n in org.request_counts().items() if "agents" in route)
    assert sent == 8, "the held read never reached the organisation"
    with AzureDevOpsClient(server.url, PAT, max_retries=0) as client:
        client.set_request_cap(10)
        for _ in range(8):
            client.list_agents(42)
        client.set_request_cap(None)  # a reload that removes the cap: at once
        client.list_agents(42)


def test_the_services_word_on_the_budget_is_kept_and_shown(
    served: tuple[SimOrg, SimServer],
) -> None:
    """A delayed answer carries X-RateLimit-*: the usage says the budget and the wait."""
    from gpuci_tui.core.wording import usage_words

    org, server = served
    org.faults.slow(0.01, count=1, throttled=True)
    with AzureDevOpsClient(server.url, PAT, max_retries=0) as client:
        client.list_agents(42)
        usage = client.usage()
    assert (usage.rate_limit_remaining, usage.rate_limit_limit) == (0, 200)
    assert usage.rate_limit_reset_at is not None and usage.retry_after_until is not None
    assert usage.budget_low
    words = usage_words(usage, usage.read_at or 0.0)
    assert "identity's budget 0/200 left (resets in" in words
    assert "the service asks to wait, in" in words
