"""The transport while the organisation is known down: one attempt per call (`azure.outage`).

A blip on a healthy organisation is retried inside the call; once a call has
failed for good (5xx after its retries, or unreachable), every call makes one
attempt until one is answered, and a call waiting to retry when another finds
the organisation down gives up its retry. A 429's wait is the service's word
and is kept. Fake clock: the retries' waits are recorded, not slept.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest

from gpuci_tui.core.azure.client import AzureDevOpsClient
from gpuci_tui.core.azure.outage import OutageWatch, may_retry
from gpuci_tui.core.errors import AzureNotFoundError, AzureServerError, AzureUnreachableError
from tests.core.azure.test_azure_fake import PAT, FakeAzure, FakeClock, Reply, closed_port
from tests.waiting import wait_until

POOLS = "_apis/distributedtask/pools"
POOL_LIST = {"count": 1, "value": [{"id": 7, "name": "gpu"}]}
AGENT = f"{POOLS}/7/agents/11"
ENABLED = {"id": 11, "name": "gpu-1", "enabled": True}


@pytest.fixture
def fake() -> Iterator[FakeAzure]:
    """The scripted organisation, for one test."""
    server = FakeAzure().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def clock() -> FakeClock:
    """Moves only as the client waits: each wait is recorded."""
    return FakeClock()


def make(url: str, clock: FakeClock, sleep: object = None) -> AzureDevOpsClient:
    return AzureDevOpsClient(
        url,
        PAT,
        clock=clock,
        sleep=sleep or clock.sleep,  # type: ignore[arg-type]
        jitter=lambda: 0.0,
    )


def down(client: AzureDevOpsClient, fake: FakeAzure) -> None:
    """Make ``client`` find the organisation down: a read answered 500 five times."""
    fake.on("GET", f"{POOLS}/7", Reply(500))
    with pytest.raises(AzureServerError, match="5 attempts"):
        client.get_pool(7)
    assert client.organisation_down


@pytest.mark.parametrize(
    ("attempt", "max_retries", "known_down", "retry"),
    [
        (0, 4, False, True),  # a blip on a healthy organisation: retried in the call
        (3, 4, False, True),
        (4, 4, False, False),  # the retries are spent: the call fails
        (0, 0, False, False),  # a client without retries
        (0, 4, True, False),  # known down: one attempt, the next probe is the retry
        (2, 4, True, False),  # found down while retrying: the retry is called off
    ],
)
def test_a_failed_attempt_is_retried_only_while_the_organisation_is_not_known_down(
    attempt: int, max_retries: int, known_down: bool, retry: bool
) -> None:
    assert may_retry(attempt, max_retries, known_down) is retry


def test_a_blip_on_a_healthy_organisation_is_retried_in_the_call(
    fake: FakeAzure, clock: FakeClock
) -> None:
    fake.on("GET", POOLS, Reply(500), Reply(200, POOL_LIST))
    client = make(fake.url, clock)
    assert [p.id for p in client.list_pools()] == [7]
    assert len(fake.requests_to(POOLS)) == 2 and clock.sleeps == [0.25]
    assert not client.organisation_down


def test_once_a_call_failed_each_call_makes_one_attempt(fake: FakeAzure, clock: FakeClock) -> None:
    client = make(fake.url, clock)
    down(client, fake)
    slept = len(clock.sleeps)
    fake.on("GET", POOLS, Reply(503), Reply(200, POOL_LIST))
    with pytest.raises(AzureServerError, match=r"\(1 attempt\)"):
        client.list_pools()
    assert len(fake.requests_to(POOLS)) == 1, "no retry inside the call"
    assert len(clock.sleeps) == slept, "and no wait: the caller learns at once"
    assert client.organisation_down
    # The next call (the observer's next probe) is the retry: answered, the organisation is up.
    assert [p.id for p in client.list_pools()] == [7]
    assert not client.organisation_down


@pytest.mark.parametrize(
    "answer", [Reply(200, POOL_LIST), Reply(404, {"message": "no such route"})], ids=["200", "404"]
)
def test_any_answer_below_500_ends_it_and_blips_are_retried_again(
    fake: FakeAzure, clock: FakeClock, answer: Reply
) -> None:
    client = make(fake.url, clock)
    down(client, fake)
    fake.on("GET", POOLS, answer)
    with contextlib.suppress(AzureNotFoundError):  # a refusal is an answer: it is up
        client.list_pools()
    assert not client.organisation_down
    fake.on("GET", POOLS, Reply(500), Reply(200, POOL_LIST))
    before = len(fake.requests_to(POOLS))
    assert [p.id for p in client.list_pools()] == [7]
    assert len(fake.requests_to(POOLS)) - before == 2, "retried in the call again"


def test_a_429s_short_wait_is_kept_while_down(fake: FakeAzure, clock: FakeClock) -> None:
    """The service says when to come back: that wait is not an in-call retry of an outage."""
    client = make(fake.url, clock)
    down(client, fake)
    fake.on("GET", POOLS, Reply(429, headers={"Retry-After": "2"}), Reply(200, POOL_LIST))
    assert [p.id for p in client.list_pools()] == [7]
    assert clock.sleeps[-1] == 2.0 and len(fake.requests_to(POOLS)) == 2


def test_a_write_while_down_is_sent_once_and_its_failure_reaches_the_caller(
    fake: FakeAzure, clock: FakeClock
) -> None:
    """The engine's rules retry a failed write once the organisation answers: never twice here."""
    client = make(fake.url, clock)
    down(client, fake)
    fake.on("PATCH", AGENT, Reply(500), Reply(200, ENABLED))
    with pytest.raises(AzureServerError, match="PATCH"):
        client.set_agent_enabled(7, 11, True)
    assert len(fake.requests_to(AGENT)) == 1
    fake.on("DELETE", AGENT, Reply(502))
    with pytest.raises(AzureServerError, match="DELETE"):
        client.delete_agent(7, 11)
    assert [s.method for s in fake.requests_to(AGENT)] == ["PATCH", "DELETE"]
    # Answered again: the write the engine plans anew goes through, once.
    fake.on("GET", POOLS, Reply(200, POOL_LIST))
    client.list_pools()
    fake.on("PATCH", AGENT, Reply(200, ENABLED))
    assert client.set_agent_enabled(7, 11, True).enabled is True
    assert [s.method for s in fake.requests_to(AGENT)] == ["PATCH", "DELETE", "PATCH"]


def test_an_unreachable_organisation_is_down_and_a_dropped_connection_is_not_retried(
    fake: FakeAzure, clock: FakeClock
) -> None:
    gone = make(f"http://127.0.0.1:{closed_port()}/org", clock)
    with pytest.raises(AzureUnreachableError):
        gone.list_pools()
    assert gone.organisation_down
    client = make(fake.url, clock)
    down(client, fake)
    fake.on("GET", POOLS, Reply(drop=True), Reply(200, POOL_LIST))
    with pytest.raises(AzureUnreachableError):
        client.list_pools()
    assert len(fake.requests_to(POOLS)) == 1


def test_a_call_waiting_to_retry_gives_up_when_another_finds_the_organisation_down(
    fake: FakeAzure, clock: FakeClock
) -> None:
    """Its retry would only repeat the outage: it fails with what it got, and sends nothing."""
    fake.on("PATCH", AGENT, Reply(500), Reply(200, ENABLED))

    def another_call_fails_meanwhile(seconds: float) -> None:
        clock.sleep(seconds)
        client._http.outage.failed()  # noqa: SLF001 - what another call's failure does

    client = make(fake.url, clock, sleep=another_call_fails_meanwhile)
    with pytest.raises(AzureServerError, match=r"HTTP 500 to PATCH .*\(1 attempt\)"):
        client.set_agent_enabled(7, 11, True)
    assert len(fake.requests_to(AGENT)) == 1


def test_a_backoff_wait_ends_as_the_organisation_is_found_down() -> None:
    """In real time the waiting call learns at once, not after its backoff (up to 4 s)."""
    watch = OutageWatch()
    waited = threading.Event()
    waiter = threading.Thread(target=lambda: (watch.back_off(300.0), waited.set()), daemon=True)
    waiter.start()
    watch.failed()
    wait_until(waited.is_set, 10.0, "the 300-s backoff to end once the organisation is down")
    waiter.join(5)
    assert watch.down
    watch.answered()
    assert not watch.down
